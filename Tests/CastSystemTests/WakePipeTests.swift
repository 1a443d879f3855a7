import Testing
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

@Suite struct WakePipeTests {
    func readable(_ fd: Int32) -> Bool {
        var p = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        return poll(&p, 1, 0) == 1
    }

    @Test func aWakeMakesItReadableUntilDrained() throws {
        let w = try WakePipe()
        #expect(!readable(w.readEnd))
        for _ in 0..<100_000 { w.wake() }   // more than a pipe holds: never blocks
        #expect(readable(w.readEnd))
        w.drain()
        #expect(!readable(w.readEnd))
    }
}
