import CastCore
import CastDaemon

#if canImport(Glibc)
import Glibc
#endif

let exitCode = CLI.run(arguments: Array(CommandLine.arguments.dropFirst()),
                       environment: ProcessEnvironment.current())
exit(exitCode)
