import CastCore
import CastDaemon

#if canImport(Glibc)
import Glibc
#endif

let exitCode = await CLI.run(arguments: Array(CommandLine.arguments.dropFirst()),
                       environment: ProcessEnvironment.current())
exit(exitCode)
