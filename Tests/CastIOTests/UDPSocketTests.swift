import Testing
import CastWebRTC
@testable import CastIO

#if canImport(Glibc)
import Glibc
#endif

@Suite struct UDPSocketTests {
    func roundTrip(_ host: String) throws {
        let a = try UDPSocket(bindTo: SocketAddress(IPAddress(host)!, 0))
        let b = try UDPSocket(bindTo: SocketAddress(IPAddress(host)!, 0))
        #expect(a.local.port != 0 && a.local.port != b.local.port)
        #expect(a.send([1, 2, 3, 250], to: b.local))
        var pfd = pollfd(fd: b.fd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pfd, 1, 2000) == 1)
        var buf = [UInt8](repeating: 0, count: 1500)
        let got = b.receive(into: &buf)
        #expect(got?.count == 4)
        #expect(Array(buf.prefix(4)) == [1, 2, 3, 250])
        #expect(got?.from == a.local)
        #expect(b.receive(into: &buf) == nil)   // nothing else waiting; never blocks
    }

    @Test func ipv4LoopbackRoundTrip() throws { try roundTrip("127.0.0.1") }
    @Test func ipv6LoopbackRoundTrip() throws { try roundTrip("::1") }

    @Test func bindingAnAddressThatIsNotOursFailsWithASentence() {
        do {
            _ = try UDPSocket(bindTo: SocketAddress(IPAddress("192.0.2.1")!, 0))
            Issue.record("bound a TEST-NET address")
        } catch {
            #expect("\(error)".contains("bind"))
        }
    }

    @Test func loopbackIsListedOnlyWhenAsked() {
        #expect(NetworkInterfaces.usable(includeLoopback: true).contains { $0.ip.isLoopback })
        #expect(!NetworkInterfaces.usable(includeLoopback: false).contains { $0.ip.isLoopback })
        #expect(!NetworkInterfaces.usable(includeLoopback: true).contains { $0.ip.isLinkLocal })
    }
}
