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
