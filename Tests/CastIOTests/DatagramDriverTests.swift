import Testing
import Foundation
import CastCore
import CastSystem
import CastWebRTC
@testable import CastIO

#if canImport(Glibc)
import Glibc
#endif

/// Echoes every datagram with a prefix, and sends "tick" once at its deadline.
struct EchoCore: DatagramCore {
    typealias Event = Never
    var out = OutputQueue<DatagramOutput<Never>>()
    var tickAt: Instant?
    var tickTo: SocketAddress?
    let local: SocketAddress

    mutating func handle(_ input: DatagramInput, now: Instant) {
        guard case .datagram(let bytes, let from, let to) = input else { return }
        out.push(.transmit(Transmit(bytes: Array("echo:".utf8) + bytes, from: to, to: from)))
    }
    mutating func handleTimeout(now: Instant) {
        if let t = tickAt, now >= t, let to = tickTo {
            out.push(.transmit(Transmit(bytes: Array("tick".utf8), from: local, to: to)))
            tickAt = nil
        }
    }
    mutating func poll() -> DatagramOutput<Never>? { out.pop() }
    func nextDeadline() -> Instant? { tickAt }
}

@Suite struct DatagramDriverTests {
    func receive(_ s: UDPSocket) -> String? {
        var pfd = pollfd(fd: s.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 3000) == 1 else { return nil }
        var buf = [UInt8](repeating: 0, count: 1500)
        guard let (n, _) = s.receive(into: &buf) else { return nil }
        return String(decoding: buf.prefix(n), as: UTF8.self)
    }

    @Test func echoesThroughTheCoreAndFiresItsDeadline() throws {
        let a = try UDPSocket(bindTo: SocketAddress(IPAddress("127.0.0.1")!, 0))
        let peer = try UDPSocket(bindTo: SocketAddress(IPAddress("127.0.0.1")!, 0))
        let clock = SystemMonotonicClock()
        let driver = try DatagramDriver(core: EchoCore(local: a.local), sockets: [a], clock: clock)
        driver.start()
        defer { driver.stop() }

        #expect(peer.send(Array("hi".utf8), to: a.local))
        #expect(receive(peer) == "echo:hi")

        // Work posted from another thread runs on the driver's thread with the core.
        let target = peer.local
        driver.perform { core, now in
            core.tickTo = target
            core.tickAt = now + .milliseconds(50)
        }
        #expect(receive(peer) == "tick")
    }

    @Test func stopIsIdempotentAndSafeBeforeStart() throws {
        let a = try UDPSocket(bindTo: SocketAddress(IPAddress("127.0.0.1")!, 0))
        let peer = try UDPSocket(bindTo: SocketAddress(IPAddress("127.0.0.1")!, 0))
        let driver = try DatagramDriver(core: EchoCore(local: a.local), sockets: [a], clock: SystemMonotonicClock())
        driver.stop()   // before start: returns at once and does not spoil a later start
        driver.start()
        #expect(peer.send(Array("hi".utf8), to: a.local))
        #expect(receive(peer) == "echo:hi")
        driver.stop()
        driver.stop()   // again: returns, the thread is already gone
        // Nobody serves `a` any more: a datagram sent to it waits in its queue, unanswered,
        // for the test itself to read (a live driver would have taken and echoed it).
        #expect(peer.send(Array("late".utf8), to: a.local))
        #expect(receive(a) == "late")
    }
}
