// SwiftPM gives every executable a `<Target>_main` entry point and aliases
// `main` to it, so libFuzzer's own main() is never linked. A fuzz target
// therefore declares `@main enum Main: LibFuzzerMain {}`, whose main() hands
// control to libFuzzer's driver with the target's LLVMFuzzerTestOneInput.

@_silgen_name("LLVMFuzzerTestOneInput")
func castdFuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32

@_silgen_name("LLVMFuzzerRunDriver")
func castdRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

public protocol LibFuzzerMain {}

extension LibFuzzerMain {
    public static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        let rc = castdRunDriver(&argc, &argv) { data, size in castdFuzzTestOneInput(data, size) }
        exit(rc)
    }
}

#if canImport(Glibc)
import Glibc
#endif
