#if canImport(Glibc)
import Glibc
#endif

/// The raw bytes of each argument (argv need not be UTF-8, and keys are bytes).
let arguments: [[UInt8]] = (1..<Int(CommandLine.argc)).map { index in
    guard let argument = CommandLine.unsafeArgv[index] else { return [] }
    return Array(UnsafeRawBufferPointer(start: argument, count: strlen(argument)))
}
let output = Output()
var status = CaskTool.run(arguments, output: output)
output.flush()
if let failure = output.failure {
    output.error("Error: cannot write standard output: \(failure)\n")
    if status == .success { status = .failure }
}
exit(status.rawValue)
