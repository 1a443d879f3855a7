import CastCore
import CastOpenSSL
import SansIOContract
import Testing
@testable import CastWebRTC

/// The session resolves Chrome's `<uuid>.local` candidates itself over the shell's
/// mDNS socket, on a fake clock: the query goes out to the group, an answer or an
/// announcement turns the name into a host candidate that ICE checks.
@Suite struct PeerSessionMDNSTests {
    static let cert = try! Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)
    static let mdnsSocket = SocketAddress(IPAddress("0.0.0.0")!, 5353)
    static let local = SocketAddress(IPAddress("192.0.2.1")!, 40000)
    /// The IPv4 candidate's name in chrome-answer-mdns.sdp (port 52120).
    static let name = "87c85f0a-3708-455f-894d-a0a402bf58a9.local"
    static let resolved = SocketAddress(IPAddress("192.0.2.2")!, 52120)
    let t0 = Instant.zero + .seconds(10)

    func session(mdns: Bool) throws -> PeerSession {
        var rng = SeededRandom(seed: 7)
        let s = try PeerSession(configuration: .init(wallclockOffset: .zero), certificate: Self.cert, random: &rng)
        if mdns { s.useMDNS(on: [Self.mdnsSocket]) }
        s.addLocalAddress(Self.local, now: t0)
        s.endOfLocalAddresses(now: t0)
        return s
    }

    func drain(_ s: PeerSession) -> (transmits: [Transmit], events: [PeerSession.Event]) {
        var t: [Transmit] = [], e: [PeerSession.Event] = []
        while let x = s.poll() {
            switch x {
            case .transmit(let d): t.append(d)
            case .event(let v): e.append(v)
            }
        }
        return (t, e)
    }

    func isCheck(_ t: Transmit, to: SocketAddress) -> Bool {
        t.from == Self.local && t.to == to && PacketKind(classifying: t.bytes) == .stun
    }

    @Test func aQueryGoesToTheGroupAndTheAnswerBecomesAHostCandidateICEChecks() throws {
        let s = try session(mdns: true)
        _ = drain(s)
        try s.applyAnswer(try ChromeFixture.text("chrome-answer-mdns.sdp"), now: t0)
        let (sent, events) = drain(s)
        let queries = sent.filter { $0.from == Self.mdnsSocket }
        #expect(queries.map(\.to) == Array(repeating: SocketAddress(MDNS.ipv4Group, 5353), count: 2))
        #expect(queries.first?.bytes == (try MDNS.query(for: Self.name, id: 0, unicastResponse: false)))
        #expect(events.contains(.needsResolution(hostname: Self.name)))
        #expect(!sent.contains { $0.from == Self.local })   // nothing to check yet
        #expect(s.nextDeadline() == t0 + .seconds(1))       // the first retransmission

        let answer = try MDNSResolverTests.response(Self.name, "192.0.2.2")
        s.handle(.datagram(answer, from: SocketAddress(IPAddress("192.0.2.2")!, 5353), to: Self.mdnsSocket), now: t0 + .milliseconds(30))
        let (_, later) = drain(s)
        #expect(later.contains(.mdnsResolved(hostname: Self.name, addresses: [IPAddress("192.0.2.2")!], fromCache: false)))
        // ICE paces its checks (Ta): the first is due at once.
        #expect(s.nextDeadline() == t0 + .milliseconds(30))
        s.handleTimeout(now: t0 + .milliseconds(30))
        #expect(drain(s).transmits.contains { isCheck($0, to: Self.resolved) })
        #expect(s.statistics.mdnsResolved == 1)
        #expect(s.statistics.mdnsDatagramsIn == 1)
        #expect(s.statistics.datagramsIn == 0)
    }

    @Test func anAnnouncementHeardBeforeTheAnswerResolvesWithoutAQuery() throws {
        let s = try session(mdns: true)
        _ = drain(s)
        let announcement = try MDNSResolverTests.response(Self.name, "192.0.2.2")
        s.handle(.datagram(announcement, from: SocketAddress(IPAddress("192.0.2.2")!, 5353), to: Self.mdnsSocket), now: t0)
        try s.applyAnswer(try ChromeFixture.text("chrome-answer-mdns.sdp"), now: t0 + .milliseconds(200))
        let (sent, events) = drain(s)
        #expect(events.contains(.mdnsResolved(hostname: Self.name, addresses: [IPAddress("192.0.2.2")!], fromCache: true)))
        s.handleTimeout(now: t0 + .milliseconds(200))
        #expect(drain(s).transmits.contains { isCheck($0, to: Self.resolved) })
        // Only the other (IPv6) name is still asked for on the wire.
        let queries = sent.filter { $0.from == Self.mdnsSocket }
        #expect(queries.count == 1)
        #expect(queries.first?.bytes == (try MDNS.query(for: "91c892ea-8a7f-4c84-845f-43e7e8dc3e66.local", id: 0, unicastResponse: false)))
    }

    @Test func withoutAnMDNSSocketNamesAreGivenUpAtOnce() throws {
        let s = try session(mdns: false)
        _ = drain(s)
        try s.applyAnswer(try ChromeFixture.text("chrome-answer-mdns.sdp"), now: t0)
        let (sent, events) = drain(s)
        #expect(sent.isEmpty)
        #expect(events.contains(.mdnsUnresolved(hostname: Self.name)))
        #expect(s.statistics.mdnsUnresolved == 2)
    }

    @Test func anUnansweredNameIsGivenUpAfterFiveSeconds() throws {
        let s = try session(mdns: true)
        try s.applyAnswer(try ChromeFixture.text("chrome-answer-mdns.sdp"), now: t0)
        _ = drain(s)
        var queries = 0
        var now = t0
        while let d = s.nextDeadline(), d <= t0 + .seconds(5) {
            now = d
            s.handleTimeout(now: now)
            let (sent, events) = drain(s)
            queries += sent.filter { $0.from == Self.mdnsSocket }.count
            if events.contains(.mdnsUnresolved(hostname: Self.name)) { break }
        }
        #expect(now == t0 + .seconds(5))
        #expect(queries == 4)   // two names, each asked again after 1 s and 3 s
        #expect(s.statistics.mdnsUnresolved == 2)
    }
}

/// The session keeps the one sans-IO contract (`SansIO` through `DatagramCore`): datagrams
/// and events out of one `poll()` in decision order, then only the deadline.
@Suite struct PeerSessionContractTests {
    /// The shared check on a session given Chrome's answer with a `.local` candidate (a named
    /// method, so `make` applies it: its outputs are the first drained), then an announcement
    /// for another name on the mDNS socket; the deadline is the query's retransmission.
    @Test func theSharedContractHolds() throws {
        let h = PeerSessionMDNSTests()
        let answer = try ChromeFixture.text("chrome-answer-mdns.sdp")
        let v = SansIOContract.violations({
            let s = try! h.session(mdns: true)
            _ = h.drain(s)
            try! s.applyAnswer(answer, now: h.t0)
            return s
        }, inputs: [
            (.datagram(MDNSTests.chromeA, from: SocketAddress(IPAddress("192.0.2.2")!, 5353), to: PeerSessionMDNSTests.mdnsSocket),
             h.t0 + .milliseconds(10)),
        ], same: { datagramOutputKind($0) == datagramOutputKind($1) })
        #expect(v.isEmpty, "\(v)")
    }

    @Test func outputsInDecisionOrderThenOnlyTheDeadlineIsLeft() throws {
        let h = PeerSessionMDNSTests()
        let s = try h.session(mdns: true)
        _ = h.drain(s)
        #expect(s.poll() == nil)
        let before = s.statistics.datagramsOut
        try s.applyAnswer(try ChromeFixture.text("chrome-answer-mdns.sdp"), now: h.t0)
        var outputs: [PeerSession.Output] = []
        while let o = s.poll() { outputs.append(o) }
        #expect(s.poll() == nil)
        // The answer's codec first; then ICE asks for the name, and only then the resolver's
        // query for it goes to the group.
        #expect(outputs.first == .event(.videoCodec(.h264, h264Profile: .constrainedBaseline)))
        let query = try MDNS.query(for: PeerSessionMDNSTests.name, id: 0, unicastResponse: false)
        let asked = try #require(outputs.firstIndex(of: .event(.needsResolution(hostname: PeerSessionMDNSTests.name))))
        let sent = try #require(outputs.firstIndex { if case .transmit(let t) = $0 { t.bytes == query } else { false } })
        #expect(asked < sent)
        let queries = outputs.filter { if case .transmit(let t) = $0 { t.from == PeerSessionMDNSTests.mdnsSocket } else { false } }
        // The deadline, asked after draining: the queries' retransmission.
        let due = try #require(s.nextDeadline())
        #expect(due == h.t0 + .seconds(1))
        s.handleTimeout(now: due)                      // due: the same queries again
        var again: [PeerSession.Output] = []
        while let o = s.poll() { again.append(o) }
        #expect(again == queries)
        #expect(try #require(s.nextDeadline()) > due)
        #expect(s.statistics.datagramsOut - before == queries.count * 2)   // counted as they leave poll()
    }
}
