import CastCore
import CastDaemon

#if canImport(Glibc)
import Glibc
#endif

let exitCode = await CLI.run(arguments: Array(CommandLine.arguments.dropFirst()),
                             environment: ProcessEnvironment.current())
// _exit, not exit: worker threads (the peer driver, Dispatch, sockets) may
// still be running, and atexit handlers (OpenSSL's cleanup among them) must
// not tear libraries down under them. Output is already written: castd's
// streams write straight to the file descriptors, unbuffered.
_exit(exitCode)
