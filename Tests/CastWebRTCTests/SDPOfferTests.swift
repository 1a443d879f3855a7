import CastCore
import Testing
import CastOpenSSL
@testable import CastWebRTC

enum SDPFixtures {
    static let fingerprint = CertificateFingerprint(algorithm: .sha256, bytes: Array(0..<32))
    /// H.264 only unless `vp8`: the Chrome fixtures answered castd's offers from before VP8.
    static func options(main: Bool = false, audio: Bool = false, vp8: Bool = false) -> OfferOptions {
        var o = OfferOptions(iceUfrag: "cAsT", icePwd: "castdIcePasswordFor22chars", fingerprint: fingerprint,
                             streamID: "castd", videoTrackID: "screen", cname: "castdcname0000001",
                             videoSSRC: 1_111_111_111, rtxSSRC: 2_222_222_222, sessionID: 4_611_731_400_430_051_336)
        o.encoderCanDoMain = main
        o.videoCodecs = vp8 ? [.h264, .vp8] : [.h264]
        if audio { o.audio = .init(trackID: "app-audio", ssrc: 3_333_333_333) }
        return o
    }

    /// The exact offer castd sends for `options()`; this text is also what the Chrome
    /// fixtures (chrome-answer-*.sdp) answered.
    static let baselineOffer = [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0",
        "a=msid-semantic: WMS castd",
        "m=video 9 UDP/TLS/RTP/SAVPF 102 103",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=ice-ufrag:cAsT",
        "a=ice-pwd:castdIcePasswordFor22chars",
        "a=ice-options:trickle",
        "a=fingerprint:sha-256 00:01:02:03:04:05:06:07:08:09:0A:0B:0C:0D:0E:0F:10:11:12:13:14:15:16:17:18:19:1A:1B:1C:1D:1E:1F",
        "a=setup:actpass",
        "a=mid:0",
        "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time",
        "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01",
        "a=extmap:4 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay",
        "a=sendonly",
        "a=msid:castd screen",
        "a=rtcp-mux",
        "a=rtcp-rsize",
        "a=rtpmap:102 H264/90000",
        "a=rtcp-fb:102 goog-remb",
        "a=rtcp-fb:102 transport-cc",
        "a=rtcp-fb:102 ccm fir",
        "a=rtcp-fb:102 nack",
        "a=rtcp-fb:102 nack pli",
        "a=fmtp:102 profile-level-id=42e01f;level-asymmetry-allowed=1;packetization-mode=1",
        "a=rtpmap:103 rtx/90000",
        "a=fmtp:103 apt=102",
        "a=ssrc-group:FID 1111111111 2222222222",
        "a=ssrc:1111111111 cname:castdcname0000001",
        "a=ssrc:1111111111 msid:castd screen",
        "a=ssrc:2222222222 cname:castdcname0000001",
        "a=ssrc:2222222222 msid:castd screen",
    ].joined(separator: "\r\n") + "\r\n"
}

@Suite struct SDPOfferTests {
    @Test func baselineOfferIsExact() {
        let offer = OfferBuilder.build(SDPFixtures.options())
        #expect(offer.sdp == SDPFixtures.baselineOffer)
    }

    @Test func offerNeverListsACodecCastdCannotSend() {
        let sdp = OfferBuilder.build(SDPFixtures.options(main: true, audio: true, vp8: true)).sdp
        for bad in ["VP9", "AV1", "red/", "ulpfec", "640c", "profile-level-id=64"] {
            #expect(!sdp.contains(bad), "offer contains \(bad)")
        }
        let base = OfferBuilder.build(SDPFixtures.options()).sdp
        #expect(!base.contains("4d001f"))
        #expect(!base.contains("m=audio"))
    }

    @Test func mainProfileIsOfferedAfterBaselineWhenTheEncoderCan() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(main: true))
        let v = offer.description.media[0]
        #expect(v.formats == ["102", "103", "104", "105"])
        #expect(v.values("fmtp") == [
            "102 profile-level-id=42e01f;level-asymmetry-allowed=1;packetization-mode=1",
            "103 apt=102",
            "104 profile-level-id=4d001f;level-asymmetry-allowed=1;packetization-mode=1",
            "105 apt=104",
        ])
    }

    /// spec §7 (`--h264-profile`): High (640c1f) and Constrained Baseline (42e01f), each its
    /// own payload type with its RTX, in the order asked, then VP8.
    @Test func highAndBaselineAreOfferedInTheOrderAsked() throws {
        var o = SDPFixtures.options(vp8: true)
        o.h264Profiles = [.high, .constrainedBaseline]
        let offer = OfferBuilder.build(o)
        let v = offer.description.media[0]
        #expect(v.formats == ["106", "107", "102", "103", "96", "97"])
        #expect(v.values("rtpmap") == ["106 H264/90000", "107 rtx/90000", "102 H264/90000", "103 rtx/90000",
                                       "96 VP8/90000", "97 rtx/90000"])
        #expect(v.values("fmtp") == [
            "106 profile-level-id=640c1f;level-asymmetry-allowed=1;packetization-mode=1",
            "107 apt=106",
            "102 profile-level-id=42e01f;level-asymmetry-allowed=1;packetization-mode=1",
            "103 apt=102",
            "97 apt=96",
        ])
        #expect(v.values("rtcp-fb").filter { $0.hasPrefix("106 ") } == ["106 goog-remb", "106 transport-cc", "106 ccm fir", "106 nack", "106 nack pli"])
        #expect(offer.videoCodecs.map(\.h264Profile) == [.high, .constrainedBaseline, nil])
        o.h264Profiles = [.constrainedBaseline, .high]
        #expect(OfferBuilder.build(o).description.media[0].formats == ["102", "103", "106", "107", "96", "97"])
        // Main, where an encoder can do it, still follows Constrained Baseline.
        o.encoderCanDoMain = true
        #expect(OfferBuilder.build(o).description.media[0].formats == ["102", "103", "104", "105", "106", "107", "96", "97"])
    }

    /// spec §7: H.264 first, then VP8 as the fallback, each with its RTX (RFC 4588 apt).
    @Test func vp8IsOfferedAfterH264WithItsOwnRTXAndFeedback() throws {
        #expect(OfferOptions(iceUfrag: "u", icePwd: "p", fingerprint: SDPFixtures.fingerprint, streamID: "s",
                             videoTrackID: "t", cname: "c", videoSSRC: 1, rtxSSRC: 2, sessionID: 1).videoCodecs == [.h264, .vp8])
        let offer = OfferBuilder.build(SDPFixtures.options(vp8: true))
        let v = offer.description.media[0]
        #expect(v.formats == ["102", "103", "96", "97"])
        #expect(v.values("rtpmap") == ["102 H264/90000", "103 rtx/90000", "96 VP8/90000", "97 rtx/90000"])
        #expect(v.values("fmtp").last == "97 apt=96")
        #expect(v.values("rtcp-fb").filter { $0.hasPrefix("96 ") } == ["96 goog-remb", "96 transport-cc", "96 ccm fir", "96 nack", "96 nack pli"])
        #expect(offer.videoCodecs.compactMap(\.videoCodec) == [.h264, .vp8])
        // Only VP8 (a test, or a sender without H.264): one codec, its RTX.
        var o = SDPFixtures.options()
        o.videoCodecs = [.vp8]
        #expect(OfferBuilder.build(o).description.media[0].formats == ["96", "97"])
    }

    @Test func audioMLineIsSendOnlyInTheSameStreamAndBundle() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(audio: true))
        let d = offer.description
        #expect(d.value("group") == "BUNDLE 0 1")
        #expect(d.media.count == 2)
        let a = d.media[1]
        #expect(a.kind == "audio")
        #expect(a.formats == ["111"])
        #expect(a.mid == "1")
        #expect(a.direction == "sendonly")
        #expect(a.value("msid") == "castd app-audio")
        #expect(a.value("rtpmap") == "111 opus/48000/2")
        // RFC 7587 §6.1: stereo both ways, in-band FEC, 10 ms frames allowed.
        #expect(a.value("fmtp") == "111 minptime=10;useinbandfec=1;stereo=1;sprop-stereo=1")
        // draft-holmer-rmcat-transport-wide-cc-extensions-01: audio counts in the congestion estimate too.
        #expect(a.values("extmap") == ["3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"])
        #expect(a.values("rtcp-fb") == ["111 transport-cc"])
        #expect(a.values("ssrc") == ["3333333333 cname:castdcname0000001", "3333333333 msid:castd app-audio"])
    }

    @Test func offerRoundTripsThroughTheParser() throws {
        let text = OfferBuilder.build(SDPFixtures.options(main: true, audio: true)).sdp
        let parsed = try SessionDescription(parsing: text)
        #expect(parsed.serialize() == text)
        #expect(parsed == OfferBuilder.build(SDPFixtures.options(main: true, audio: true)).description)
    }

    @Test func fingerprintParsesAndChecksLength() throws {
        let f = try CertificateFingerprint(sdp: "sha-256 00:01:02:03:04:05:06:07:08:09:0A:0B:0C:0D:0E:0F:10:11:12:13:14:15:16:17:18:19:1A:1B:1C:1D:1E:1F")
        #expect(f == SDPFixtures.fingerprint)
        #expect(throws: CastError.self) { try CertificateFingerprint(sdp: "sha-256 00:01") }
        #expect(throws: CastError.self) { try CertificateFingerprint(sdp: "sha-256 0001") }
        #expect(throws: CastError.self) { try CertificateFingerprint(sdp: "sha-256") }
    }

    @Test func parserKeepsUnknownLinesAndAcceptsBareLF() throws {
        let text = "v=0\no=- 1 1 IN IP4 0.0.0.0\ns=-\ni=info\nt=0 0\na=x-custom:42\na=flag\nm=application 0 UDP/DTLS/SCTP webrtc-datachannel\nb=AS:30\na=weird\n"
        let d = try SessionDescription(parsing: text)
        #expect(d.lines == [SDPLine("i", "info"), SDPLine("t", "0 0")])
        #expect(d.attributes == [SDPAttribute("x-custom", "42"), SDPAttribute("flag")])
        #expect(d.media[0].isRejected)
        #expect(d.media[0].lines == [SDPLine("b", "AS:30")])
        #expect(d.serialize() == text.replacingOccurrences(of: "\n", with: "\r\n"))
    }

    @Test func aLoneCarriageReturnIsPartOfTheValue() throws {
        // Found by the fuzzer: "x\r" + CRLF must come back as "x\r", not "x".
        let text = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\na=x:y\r\r\n"
        let d = try SessionDescription(parsing: text)
        #expect(d.attributes == [SDPAttribute("x", "y\r")])
        #expect(d.serialize() == text)
        #expect(try SessionDescription(parsing: d.serialize()) == d)
    }

    @Test func parserRejectsWhatIsNotSDP() {
        func code(_ s: String) -> CastError.Code? {
            do { _ = try SessionDescription(parsing: s); return nil } catch let e as CastError { return e.code } catch { return nil }
        }
        #expect(code("") == .malformed)
        #expect(code("v=1\r\no=-\r\ns=-\r\n") == .malformed)
        #expect(code("v=0\r\no=-\r\ns=-\r\nhello\r\n") == .malformed)
        #expect(code("v=0\r\ns=-\r\nt=0 0\r\n") == .malformed)
        #expect(code("v=0\r\no=-\r\ns=-\r\nm=video x RTP 1\r\n") == .malformed)
        #expect(code("v=0\r\no=-\r\ns=-\r\nm=video\r\n") == .malformed)
        #expect(code("v=0\r\no=-\r\ns=-\r\nv=0\r\n") == .malformed)
        #expect(code("v=0\r\no=-\r\ns=-\r\nm=video 9/2 RTP/AVP 96\r\n") == nil)
    }
}
