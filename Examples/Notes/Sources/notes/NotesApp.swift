import Foundation

/// The example's entry point: tells the story, step by step, and exits 0 when every step behaved as
/// expected — 1, with what was expected and what happened, when one did not.
@main
@MainActor
enum NotesApp {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "simulate" { return await simulate(arguments.dropFirst()) }
        let started = ContinuousClock.now
        print("Notes — an app on ProtectedStore's data layer")
        let root = FileManager.default.temporaryDirectory.path + "/notes-example-\(UUID().uuidString)"
        do {
            let story = try NotesStory(root: root)
            try await story.run()
            Watchdog.end()
            try? FileManager.default.removeItem(atPath: root)
            print("\nAll \(NotesStory.stepCount) steps behaved as expected (\((ContinuousClock.now - started).milliseconds)).")
        } catch {
            FileHandle.standardError.write(
                Data("notes: FAILED in step \"\(Watchdog.currentStep)\": \(error)\n(state kept in \(root))\n".utf8))
            exit(1)
        }
    }

    /// `notes simulate [--plant badge-outside-store|read-before-ready] [--seeds N] [--steps N] [--concurrent-seeds N]`:
    /// the app on the seeded simulation.
    static func simulate(_ arguments: ArraySlice<String>) async {
        var planted: NotesSimulation.PlantedBug?
        var seeds = NotesSimulation.seeds
        var steps = NotesSimulation.steps
        var concurrentSeeds = ProcessInfo.processInfo.activeProcessorCount
        var rest = arguments
        while let option = rest.popFirst() {
            let value = rest.popFirst()
            switch option {
            case "--plant":
                guard let bug = value.flatMap(NotesSimulation.PlantedBug.init(rawValue:)) else {
                    let names = NotesSimulation.PlantedBug.allCases.map(\.rawValue).joined(separator: ", ")
                    usage("--plant takes one of: \(names)")
                }
                planted = bug
            case "--seeds":
                guard let count = value.flatMap(UInt64.init), count > 0 else { usage("--seeds takes a count above 0") }
                seeds = 0..<count
            case "--steps":
                guard let count = value.flatMap(Int.init), count > 0 else { usage("--steps takes a count above 0") }
                steps = count
            case "--concurrent-seeds":
                guard let count = value.flatMap(Int.init), count > 0 else { usage("--concurrent-seeds takes a count above 0") }
                concurrentSeeds = count
            default:
                usage("unknown option \(option)")
            }
        }
        do {
            try await NotesSimulation.run(only: planted, seeds: seeds, steps: steps, concurrentSeeds: concurrentSeeds)
        } catch {
            FileHandle.standardError.write(Data("notes simulate: FAILED: \(error)\n".utf8))
            exit(1)
        }
    }

    /// Prints what is wrong with the arguments and exits 2.
    private static func usage(_ problem: String) -> Never {
        FileHandle.standardError.write(
            Data("notes simulate: \(problem)\nusage: notes simulate [--plant BUG] [--seeds N] [--steps N] [--concurrent-seeds N]\n".utf8))
        exit(2)
    }
}
