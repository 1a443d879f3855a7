import Foundation
import Testing
import CastCore
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

@Suite struct SystemErrorTests {
    @Test func posixKeepsTheNumberAndStrerrorsSentence() {
        let e = CastError.posix(.io, errno: ENOENT) { "Could not open /x: \($0)." }
        #expect(e.code == .io)
        #expect(e.posixCode == ENOENT)
        #expect(e.message == "Could not open /x: No such file or directory.")
        let short = CastError.posix("bind", errno: EADDRINUSE)
        #expect(short.code == .system && short.posixCode == EADDRINUSE)
        #expect(short.message == "bind: Address already in use (errno \(EADDRINUSE))")
    }

    @Test func errorsNotFromErrnoHaveNoPosixCode() {
        #expect(CastError(.io, "x").posixCode == nil)
    }

    @Test func theDefaultErrnoIsReadAtTheCallSite() {
        errno = EACCES
        let e = CastError.posix(.io) { reason in
            errno = 0   // whatever the sentence does cannot change the recorded number
            return reason
        }
        #expect(e.posixCode == EACCES)
        #expect(e.message == "Permission denied")
    }

    @Test func privateFileReportsErrnoAndSizeByCode() throws {
        let dir = "/tmp/castd-syserr-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PrivateFile.write(Array(repeating: 0x41, count: 100), to: "f", in: dir)
        #expect(try PrivateFile.read(dir + "/f")?.count == 100)
        let big = #expect(throws: CastError.self) { try PrivateFile.read(dir + "/f", limit: 10) }
        #expect(big?.code == .tooLarge && big?.posixCode == nil)
        // Reading a directory fails in read(2) with EISDIR: the number travels with the error.
        let isDir = #expect(throws: CastError.self) { try PrivateFile.read(dir) }
        #expect(isDir?.code == .io && isDir?.posixCode == EISDIR)
        #expect(try PrivateFile.read(dir + "/absent") == nil)
    }
}
