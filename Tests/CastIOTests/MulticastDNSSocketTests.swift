import Foundation
import Testing
import CastWebRTC
@testable import CastIO

#if canImport(Glibc)
import Glibc
#endif

/// The mDNS socket on loopback only (its group datagrams never leave the machine).
@Suite struct MulticastDNSSocketTests {
    /// Users of 224.0.0.251 on `lo` in /proc/net/igmp (the kernel's count of sockets joined there).
    static func loopbackGroupUsers() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/net/igmp", encoding: .utf8) else { return -1 }
        var device = ""
        for line in text.split(separator: "\n") {
            let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if line.first?.isNumber == true, f.count > 1 { device = String(f[1]) }
            else if device == "lo", f.first == "FB0000E0", f.count > 1 { return Int(f[1]) ?? -1 }
        }
        return 0
    }

    @Test func joinsTheGroupOnlyWhenItFirstSendsAndThenHearsItsOwnQuery() throws {
        let lo = NetworkInterfaces.Address(interface: "lo", ip: IPAddress("127.0.0.1")!)
        let m = try MulticastDNSSocket(ipv6: false, addresses: [lo])
        #expect(m.interfaces == ["lo"])
        #expect(m.joined == nil)   // bound, listening on the port, no membership of its own yet
        let query = try MDNS.query(for: "castd-test-\(UInt32.random(in: 0 ... .max)).local", id: 0, unicastResponse: false)
        #expect(m.send(query, to: SocketAddress(MDNS.ipv4Group, MDNS.port)))
        #expect(m.joined == ["lo"])
        #expect(Self.loopbackGroupUsers() >= 1)
        // Multicast loop is on and the host is now a member on lo: the query comes back.
        var buf = [UInt8](repeating: 0, count: 1500)
        var heard = false
        var pfd = pollfd(fd: m.fd, events: Int16(POLLIN), revents: 0)
        while !heard, poll(&pfd, 1, 2000) == 1, let got = m.receive(into: &buf) {
            heard = Array(buf.prefix(got.count)) == query
        }
        #expect(heard)
        // A second send joins nothing more.
        #expect(m.send(query, to: SocketAddress(MDNS.ipv4Group, MDNS.port)))
        #expect(m.joined == ["lo"])
    }
}
