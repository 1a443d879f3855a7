import CastCore
import Testing
@testable import CastWebRTC

@Suite struct ICECandidateTests {
    /// Trickled by Chromium 156 (onicecandidate) for the fixtures' answers.
    static let chromeTrickled = [
        "candidate:1411999973 1 udp 2113937151 87c85f0a-3708-455f-894d-a0a402bf58a9.local 52120 typ host generation 0 ufrag tXbK network-cost 999",
        "candidate:1945708452 1 udp 2113937151 192.0.2.2 53694 typ host generation 0 ufrag +cA8 network-cost 999",
        "candidate:1955285780 1 udp 2113942271 fd00::2 49497 typ host generation 0 ufrag +cA8 network-cost 999",
    ]

    @Test(arguments: chromeTrickled + [
        "candidate:842163049 1 udp 1677729535 203.0.113.7 61234 typ srflx raddr 192.0.2.2 rport 53694 generation 0 ufrag +cA8 network-id 1 network-cost 10",
        "candidate:3 1 tcp 1518280447 192.0.2.2 9 typ host tcptype active generation 0 ufrag +cA8 network-id 1",
        "candidate:4 2 UDP 16777215 198.51.100.1 3478 typ relay raddr 0.0.0.0 rport 0",
    ])
    func candidateLinesRoundTripExactly(line: String) throws {
        let c = try ICECandidate(parsing: line)
        #expect(c.attributeValue == line)
        #expect(try ICECandidate(parsing: "a=" + line) == c)
    }

    @Test func fieldsAreParsed() throws {
        let c = try ICECandidate(parsing: "candidate:842163049 1 udp 1677729535 203.0.113.7 61234 typ srflx raddr 192.0.2.2 rport 53694 generation 0 ufrag +cA8 network-id 1 network-cost 10")
        #expect(c.foundation == "842163049")
        #expect(c.component == 1)
        #expect(c.isUDP)
        #expect(c.priority == 1_677_729_535)
        #expect(c.socketAddress == SocketAddress("203.0.113.7:61234"))
        #expect(c.type == .srflx)
        #expect(c.relatedAddress == "192.0.2.2")
        #expect(c.relatedPort == 53694)
        #expect(c.generation == 0)
        #expect(c.ufrag == "+cA8")
        #expect(c.networkID == 1)
        #expect(c.tcpType == nil)
        let t = try ICECandidate(parsing: "candidate:3 1 TCP 1518280447 192.0.2.2 9 typ host tcptype passive")
        #expect(!t.isUDP)
        #expect(t.tcpType == "passive")
    }

    @Test func malformedLinesThrow() {
        for bad in [
            "", "candidate:", "candidate:1 1 udp 1 1.2.3.4 5 typ",
            "candidate:1 1 udp 1 1.2.3.4 5 type host",
            "candidate:1 1 udp 1 1.2.3.4 5 typ foo",
            "candidate:1 0 udp 1 1.2.3.4 5 typ host",
            "candidate:1 1 udp 0 1.2.3.4 5 typ host",
            "candidate:1 1 udp 1 1.2.3.4 65536 typ host",
            "candidate:1 1 udp 4294967296 1.2.3.4 5 typ host",
            "candidate:a_b 1 udp 1 1.2.3.4 5 typ host",
            "candidate:1 1 udp 1 1.2.3.4 5 typ host generation",
            "candidate:1 1 udp 1 1.2.3.4 5 typ srflx raddr 1.2.3.4 rport x",
        ] {
            #expect(throws: CastError.self, "\(bad)") { try ICECandidate(parsing: bad) }
        }
    }

    @Test func priorityFormulaFollowsRFC8445() {
        // 2^24·126 + 2^8·65535 + 255
        #expect(ICECandidate.priority(type: .host, localPreference: 65535) == 2_130_706_431)
        #expect(ICECandidate.priority(type: .srflx, localPreference: 65535) == 1_694_498_815)
        #expect(ICECandidate.priority(type: .prflx, localPreference: 0) == 1_845_494_015)
        #expect(ICECandidate.priority(type: .relay, localPreference: 10, component: 2) == 2814)
    }
}
