import ArgumentParser
import Logging

/// `--log-level`, what the library's loggers write to standard error.
///
/// The loggers are `protected-store.launch`, `.device`, `.store`, `.migrations` and `.inbox`. Every command takes the
/// option.
struct LoggingOptions: ParsableArguments {
    @Option(
        name: .customLong("log-level"),
        help: ArgumentHelp(
            "Log to standard error at this level and above: trace, debug, info, notice, warning, error, critical.",
            discussion: "The library logs its flow at debug and trace only, so the default (warning) prints nothing."))
    var level: Level = .warning

    /// swift-log's levels, as the option spells them.
    enum Level: String, CaseIterable, ExpressibleByArgument {
        case trace, debug, info, notice, warning, error, critical

        var swiftLog: Logger.Level { Logger.Level(rawValue: rawValue)! }
    }

    /// Bootstraps swift-log with a standard-error handler at ``level``. Call once, first thing in `run()`.
    func bootstrap() {
        let level = self.level.swiftLog
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
