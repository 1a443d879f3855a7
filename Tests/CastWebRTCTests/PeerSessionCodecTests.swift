import CastCore
import CastOpenSSL
import Testing
@testable import CastWebRTC

/// Issue 15: the session offers H.264 then VP8 and builds its sender for the codec the
/// answer chose, reporting it (event and statistics) so the pipeline can follow.
@Suite struct PeerSessionCodecTests {
    static let cert = try! Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)
    let t0 = Instant.zero + .seconds(10)

    func session(codecs: [VideoCodec] = VideoCodec.allCases) throws -> PeerSession {
        var rng = SeededRandom(seed: 11)
        var c = PeerSession.Configuration(wallclockOffset: .zero)
        c.videoCodecs = codecs
        return try PeerSession(configuration: c, certificate: Self.cert, random: &rng)
    }

    func events(_ s: PeerSession) -> [PeerSession.Event] {
        var e: [PeerSession.Event] = []
        while let x = s.poll() { if case .event(let v) = x { e.append(v) } }
        return e
    }

    @Test func firefoxsAnswerMakesAVP8SenderAndSaysSo() throws {
        let s = try session()
        #expect(s.offerSDP.contains("m=video 9 UDP/TLS/RTP/SAVPF 102 103 96 97"))
        _ = events(s)
        try s.applyAnswer(try ChromeFixture.text("firefox-answer-vp8.sdp"), now: t0)
        #expect(events(s).contains(.videoCodec(.vp8, h264Profile: nil)))
        #expect(s.statistics.codec == .vp8)
    }

    @Test func chromesAnswerKeepsH264() throws {
        let s = try session()
        try s.applyAnswer(try ChromeFixture.text("chrome-answer-mdns.sdp"), now: t0)
        #expect(events(s).contains(.videoCodec(.h264, h264Profile: .constrainedBaseline)))
        #expect(s.statistics.codec == .h264)
    }

    @Test func anOfferOfH264AloneThatFirefoxRejectsFailsWithNoCommonCodec() throws {
        let s = try session(codecs: [.h264])
        #expect(!s.offerSDP.contains("VP8"))
        let e = try #require(throws: CastError.self) {
            try s.applyAnswer(try ChromeFixture.text("firefox-answer-h264-only-rejected.sdp"), now: t0)
        }
        #expect(e.code == .noCommonCodec)
        #expect(s.statistics.codec == nil)
    }
}
