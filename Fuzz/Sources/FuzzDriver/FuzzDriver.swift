import Glibc

/// libFuzzer's entry point when the program has its own `main` (SwiftPM names each executable's entry
/// `<Target>_main` and links `main` to it, so libFuzzer's own `main` is never pulled in).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the process's arguments (`-max_total_time=…`, `-runs=…`, corpus folders), calling
/// `target` with each input, and returns libFuzzer's exit status.
public func runFuzzer(_ target: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt {
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    return LLVMFuzzerRunDriver(&argc, &argv, target)
}

/// The input as bytes (libFuzzer passes a null pointer for the empty input).
public func fuzzInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> [UInt8] {
    guard let data, count > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: count))
}

/// Writes `seeds` as files `seed-N` into the corpus folder named on the command line (the first argument
/// that is not a `-flag`), when that folder has none yet, so libFuzzer starts from valid inputs: a keybag
/// made with the fuzzer's own device key reaches the code behind its tag, which random bytes never do.
public func plantSeeds(_ seeds: [[UInt8]]) {
    guard let folder = CommandLine.arguments.dropFirst().first(where: { !$0.hasPrefix("-") }) else { return }
    mkdir(folder, 0o700)
    for (index, seed) in seeds.enumerated() {
        let path = folder + "/seed-\(index)"
        guard access(path, F_OK) != 0 else { continue }
        guard let file = fopen(path, "wb") else { continue }
        _ = seed.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
}
