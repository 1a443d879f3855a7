import CastCore
import CastSignaling
import CastWebRTC
import Testing
@testable import CastIO

/// ice-config's TURN entries (RFC 7065 URLs with long-term credentials) become TURN servers.
@Suite struct ICEServerResolverTests {
    @Test func turnURLsGiveTransportAndDefaultPorts() {
        #expect(ICEServerResolver.parseTURN("turn:198.51.100.1")! == ("198.51.100.1", 3478, .udp))
        #expect(ICEServerResolver.parseTURN("turn:turn.example.org:3479?transport=udp")! == ("turn.example.org", 3479, .udp))
        #expect(ICEServerResolver.parseTURN("TURN:turn.example.org?transport=tcp")! == ("turn.example.org", 3478, .tcp))
        #expect(ICEServerResolver.parseTURN("turns:turn.example.org")! == ("turn.example.org", 5349, .tls))
        #expect(ICEServerResolver.parseTURN("turns:[2001:db8::1]:443?transport=tcp")! == ("2001:db8::1", 443, .tls))
        #expect(ICEServerResolver.parseTURN("turns:turn.example.org?transport=udp") == nil)   // DTLS is not offered
        #expect(ICEServerResolver.parseTURN("turn:host:port") == nil)
        #expect(ICEServerResolver.parseTURN("turn:") == nil)
        #expect(ICEServerResolver.parseTURN("turn:host?transport=sctp") == nil)
    }

    @Test func turnEntriesNeedCredentialsAndKeepThemOutOfTheirName() {
        let ice = IceConfig(iceServers: [
            IceServer(urls: ["stun:198.51.100.9:3478"]),
            IceServer(urls: ["turn:198.51.100.1:3478", "turns:198.51.100.2"], username: "1700000000:u",
                      credential: Redacted("c2VjcmV0")),
            IceServer(urls: ["turn:198.51.100.3"]),
            IceServer(urls: ["turn:bad:port"], username: "u", credential: Redacted("x")),
        ], turnConfigured: true)
        let (servers, skipped) = ICEServerResolver.turnServers(ice)
        #expect(servers.map(\.address) == [SocketAddress("198.51.100.1:3478")!, SocketAddress("198.51.100.2:5349")!])
        #expect(servers.map(\.transport) == [.udp, .tls])
        #expect(servers.allSatisfy { $0.username == "1700000000:u" && $0.password.unredacted == "c2VjcmV0" })
        #expect(servers[0].name == "turn:198.51.100.1:3478")
        #expect(skipped.count == 2)
        #expect(skipped[0].contains("turn:198.51.100.3") && skipped[0].contains("no username and credential"))
        #expect(skipped.allSatisfy { !$0.contains("c2VjcmV0") })
        // The STUN entry still feeds srflx gathering.
        #expect(ICEServerResolver.stunAddresses(ice) == [SocketAddress("198.51.100.9:3478")!])
    }
}
