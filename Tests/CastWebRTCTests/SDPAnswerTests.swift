import CastCore
import Foundation
import Testing
@testable import CastWebRTC

/// Answers produced by Debian's Chromium 156 (headless) to castd's offers; see
/// Fixtures/castd-offer-*.sdp for the offers they answer.
enum ChromeFixture {
    static func text(_ name: String) throws -> String {
        let dir = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
        return try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
    }
}

@Suite struct SDPAnswerTests {
    static let baseline = OfferBuilder.build(SDPFixtures.options())

    @Test func offerFixturesAreWhatTheBuilderProduces() throws {
        #expect(try ChromeFixture.text("castd-offer-baseline.sdp") == Self.baseline.sdp)
        #expect(try ChromeFixture.text("castd-offer-main-audio.sdp")
                == OfferBuilder.build(SDPFixtures.options(main: true, audio: true)).sdp)
        #expect(try ChromeFixture.text("castd-offer-vp8.sdp") == OfferBuilder.build(SDPFixtures.options(vp8: true)).sdp)
    }

    @Test(arguments: ["firefox-answer-vp8.sdp", "firefox-answer-h264-only-rejected.sdp"])
    func firefoxAnswersRoundTripExactly(name: String) throws {
        let text = try ChromeFixture.text(name)
        #expect(try SessionDescription(parsing: text).serialize() == text)
    }

    /// Firefox ESR without H.264 (issue 15) answers the H.264-then-VP8 offer with VP8 and its
    /// RTX, session-level fingerprint, `extmap:4/recvonly`: castd sends VP8.
    @Test func firefoxAnswerWithoutH264NegotiatesVP8() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(vp8: true))
        let a = try AnswerParser.parse(try ChromeFixture.text("firefox-answer-vp8.sdp"), offer: offer)
        #expect(a.video.codec == .vp8)
        #expect(a.video.payloadType == 96)
        #expect(a.video.rtxPayloadType == 97)
        #expect(a.video.profileLevelID == nil)
        #expect(a.video.feedback == ["nack", "nack pli", "ccm fir", "goog-remb", "transport-cc"])
        #expect(a.video.headerExtensions == [HeaderExtensionURI.absSendTime: 2, HeaderExtensionURI.transportWideCC: 3,
                                             HeaderExtensionURI.playoutDelay: 4])
        #expect(a.dtlsRole == .server)
        #expect(a.iceUfrag == "296d698e")
    }

    /// The same Firefox offered H.264 alone rejects the video line (port 0, inactive): a clear
    /// end whose code the session turns into `{"reason":"no_common_codec"}`.
    @Test func firefoxRejectingAnH264OnlyOfferIsNoCommonCodec() throws {
        let e = try #require(throws: CastError.self) {
            try AnswerParser.parse(try ChromeFixture.text("firefox-answer-h264-only-rejected.sdp"), offer: Self.baseline)
        }
        #expect(e.code == .noCommonCodec)
        #expect(e.message.contains("(H.264)"))
    }

    /// RFC 3264 §6.1: the answer's order decides; castd sends its first format that castd offered.
    @Test func theAnswersFirstOfferedCodecIsTheOneSent() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(vp8: true))
        let text = try ChromeFixture.text("chrome-answer-mdns.sdp")
        let h264First = text.replacingOccurrences(of: "SAVPF 102 103", with: "SAVPF 102 103 96 97")
        #expect(try AnswerParser.parse(h264First, offer: offer).video.codec == .h264)
        let vp8First = text.replacingOccurrences(of: "SAVPF 102 103", with: "SAVPF 96 97 102 103")
        let a = try AnswerParser.parse(vp8First, offer: offer)
        #expect(a.video.codec == .vp8)
        #expect(a.video.payloadType == 96)
        #expect(a.video.rtxPayloadType == 97)
    }

    @Test(arguments: ["chrome-answer-mdns.sdp", "chrome-answer-no-mdns.sdp",
                      "chrome-answer-main-audio.sdp", "chrome-answer-rejected-high.sdp"])
    func chromeAnswersRoundTripExactly(name: String) throws {
        let text = try ChromeFixture.text(name)
        #expect(try SessionDescription(parsing: text).serialize() == text)
    }

    @Test func chromeAnswerWithMDNSNegotiatesH264Baseline() throws {
        let a = try AnswerParser.parse(try ChromeFixture.text("chrome-answer-mdns.sdp"), offer: Self.baseline)
        #expect(a.video.payloadType == 102)
        #expect(a.video.rtxPayloadType == 103)
        #expect(a.video.profileLevelID == "42e01f")
        #expect(a.video.mid == "0")
        #expect(a.video.feedback == ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
        #expect(a.video.headerExtensions == [HeaderExtensionURI.absSendTime: 2,
                                             HeaderExtensionURI.transportWideCC: 3,
                                             HeaderExtensionURI.playoutDelay: 4])
        #expect(a.audio == nil)
        #expect(a.dtlsRole == .server)
        #expect(a.remoteFingerprint.algorithm == .sha256)
        #expect(Hex.encode(a.remoteFingerprint.bytes)
                == "f4da467b4ec77cec1c7ae9d586503f9c0394a0992b5b831cdf8d59875c3d3e86")
        #expect(a.iceUfrag == "tXbK")
        #expect(a.icePwd == "nlMQWlQj1QPckRNe8FsavCnH")
        #expect(!a.iceLite)
        #expect(a.mids == ["0"])
        #expect(a.droppedCandidateLines == 0)
        #expect(a.candidates.count == 2)
        let c = a.candidates[0]
        #expect(c.address == .hostname("87c85f0a-3708-455f-894d-a0a402bf58a9.local"))
        #expect(c.address.isMDNS)
        #expect(c.port == 52120)
        #expect(c.priority == 2_113_937_151)
        #expect(c.type == .host)
        #expect(c.generation == 0)
        #expect(c.ext("network-cost") == "999")
        #expect(c.socketAddress == nil)
    }

    @Test func chromeAnswerWithoutMDNSHasIPCandidates() throws {
        let a = try AnswerParser.parse(try ChromeFixture.text("chrome-answer-no-mdns.sdp"), offer: Self.baseline)
        #expect(a.candidates.map { $0.socketAddress?.unredactedText } == ["192.0.2.2:53694", "[fd00::2]:49497"])
        #expect(a.candidates.map(\.foundation) == ["1945708452", "1955285780"])
        #expect(a.dtlsRole == .server)
    }

    @Test func chromeAnswerToMainAndAudioKeepsBaselineFirstAndAcceptsAudio() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(main: true, audio: true))
        let a = try AnswerParser.parse(try ChromeFixture.text("chrome-answer-main-audio.sdp"), offer: offer)
        #expect(a.video.payloadType == 102)
        #expect(a.video.rtxPayloadType == 103)
        #expect(a.audio == .init(mid: "1", payloadType: 111,
                                 headerExtensions: [HeaderExtensionURI.transportWideCC: 3], receiverWantsStereo: false))
        #expect(a.audioRejection == nil)
        #expect(a.mids == ["0", "1"])
        #expect(a.video.headerExtensions.count == 3)
    }

    @Test func chromeRejectingHighProfileIsAClearError() throws {
        let offer = OfferBuilder.build(SDPFixtures.options())
        let text = try ChromeFixture.text("chrome-answer-rejected-high.sdp")
        let e = try #require(throws: CastError.self) { try AnswerParser.parse(text, offer: offer) }
        #expect(e.code == .noCommonCodec)
        #expect(e.message == "the receiver can decode none of castd's video codecs (H.264): it rejected the video m-line")
    }

    @Test func passiveAnswerMakesCastdTheDTLSClient() throws {
        let text = try ChromeFixture.text("chrome-answer-mdns.sdp").replacingOccurrences(of: "a=setup:active", with: "a=setup:passive")
        #expect(try AnswerParser.parse(text, offer: Self.baseline).dtlsRole == .client)
        let bad = text.replacingOccurrences(of: "a=setup:passive", with: "a=setup:actpass")
        #expect(throws: CastError.self) { try AnswerParser.parse(bad, offer: Self.baseline) }
    }

    @Test func answerWithAnUnofferedPayloadTypeIsRefused() throws {
        let text = try ChromeFixture.text("chrome-answer-mdns.sdp")
            .replacingOccurrences(of: "SAVPF 102 103", with: "SAVPF 96 97")
        let e = try #require(throws: CastError.self) { try AnswerParser.parse(text, offer: Self.baseline) }
        #expect(e.code == .noCommonCodec)
    }

    @Test func answerWithoutFingerprintOrWithBadCandidatesIsHandled() throws {
        let text = try ChromeFixture.text("chrome-answer-mdns.sdp")
        let noFP = text.split(separator: "\r\n").filter { !$0.hasPrefix("a=fingerprint") }.joined(separator: "\r\n") + "\r\n"
        #expect(throws: CastError.self) { try AnswerParser.parse(noFP, offer: Self.baseline) }
        let badCand = text.replacingOccurrences(of: "a=ice-ufrag", with: "a=candidate:garbage\r\na=end-of-candidates\r\na=ice-ufrag")
        let a = try AnswerParser.parse(badCand, offer: Self.baseline)
        #expect(a.droppedCandidateLines == 1)
        #expect(a.candidates.count == 2)
        #expect(a.endOfCandidates)
    }

    /// Found by FuzzSDP (Fuzz/Seeds/SDP/ has the input): an extmap whose id is empty, "/"
    /// or "/sendonly" trapped on an empty split; such a line is now skipped like any bad one.
    @Test(arguments: ["/", "/sendonly", "", "x/recvonly"])
    func extmapWithoutAnIdIsSkippedNotATrap(id: String) throws {
        let text = try ChromeFixture.text("chrome-answer-mdns.sdp")
            .replacingOccurrences(of: "a=extmap:4 ", with: "a=extmap:\(id) ")
        let a = try AnswerParser.parse(text, offer: Self.baseline)
        #expect(a.video.headerExtensions == [HeaderExtensionURI.absSendTime: 2, HeaderExtensionURI.transportWideCC: 3])
        let withDirection = try ChromeFixture.text("chrome-answer-mdns.sdp")
            .replacingOccurrences(of: "a=extmap:4 ", with: "a=extmap:4/recvonly ")
        #expect(try AnswerParser.parse(withDirection, offer: Self.baseline).video.headerExtensions[HeaderExtensionURI.playoutDelay] == 4)
    }

    @Test func rejectedOptionalAudioIsNotAnError() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(main: true, audio: true))
        let text = try ChromeFixture.text("chrome-answer-main-audio.sdp").replacingOccurrences(of: "m=audio 9 ", with: "m=audio 0 ")
        let a = try AnswerParser.parse(text, offer: offer)
        #expect(a.audio == nil)
        #expect(a.audioRejection == "the receiver rejected the audio m-line (port 0)")
        #expect(a.video.payloadType == 102)
    }

    /// RFC 3264 §6.1: an `inactive` (or `sendonly`) answer to a send-only line receives nothing.
    @Test(arguments: ["inactive", "sendonly"])
    func audioAnsweredWithoutReceivingIsRejected(direction: String) throws {
        let offer = OfferBuilder.build(SDPFixtures.options(main: true, audio: true))
        let text = try ChromeFixture.text("chrome-answer-main-audio.sdp")
            .replacingOccurrences(of: "a=recvonly\r\na=rtcp-mux\r\na=rtpmap:111", with: "a=\(direction)\r\na=rtcp-mux\r\na=rtpmap:111")
        let a = try AnswerParser.parse(text, offer: offer)
        #expect(a.audio == nil)
        #expect(a.audioRejection == "the receiver answered the audio m-line \(direction)")
        #expect(a.video.payloadType == 102)
    }

    @Test func audioAnswerWithoutOpusIsRejectedAndStereoIsRead() throws {
        let offer = OfferBuilder.build(SDPFixtures.options(main: true, audio: true))
        let text = try ChromeFixture.text("chrome-answer-main-audio.sdp")
        let noOpus = try AnswerParser.parse(text.replacingOccurrences(of: "m=audio 9 UDP/TLS/RTP/SAVPF 111", with: "m=audio 9 UDP/TLS/RTP/SAVPF 0"), offer: offer)
        #expect(noOpus.audio == nil)
        #expect(noOpus.audioRejection == "the receiver's audio answer has no Opus payload type castd offered")
        let stereo = try AnswerParser.parse(text.replacingOccurrences(of: "a=fmtp:111 minptime=10;useinbandfec=1",
                                                                      with: "a=fmtp:111 minptime=10; stereo=1;useinbandfec=1"), offer: offer)
        #expect(stereo.audio?.receiverWantsStereo == true)
    }
}

/// spec §7 with `--h264-profile`: castd offers High (106/107) and Constrained Baseline
/// (102/103) and VP8; the payload type the answer takes decides the profile the encoder makes.
@Suite struct H264ProfileAnswerTests {
    static func offer(_ profiles: [H264ProfileLevel]) -> Offer {
        var o = SDPFixtures.options(vp8: true)
        o.h264Profiles = profiles
        return OfferBuilder.build(o)
    }

    /// Chromium's answer with its video section rewritten: the H.264 payload types and lines
    /// castd's fixture answer has, moved to `pt` with `profile`, in the order of `formats`.
    static func answer(h264 pt: UInt8, profile: String, formats: String) throws -> String {
        try ChromeFixture.text("chrome-answer-mdns.sdp")
            .replacingOccurrences(of: "SAVPF 102 103", with: "SAVPF \(formats)")
            .replacingOccurrences(of: "a=rtpmap:102 ", with: "a=rtpmap:\(pt) ")
            .replacingOccurrences(of: "a=rtcp-fb:102 ", with: "a=rtcp-fb:\(pt) ")
            .replacingOccurrences(of: "a=fmtp:102 ", with: "a=fmtp:\(pt) ")
            .replacingOccurrences(of: "a=rtpmap:103 ", with: "a=rtpmap:\(pt + 1) ")
            .replacingOccurrences(of: "a=fmtp:103 apt=102", with: "a=fmtp:\(pt + 1) apt=\(pt)")
            .replacingOccurrences(of: "profile-level-id=42e01f", with: "profile-level-id=\(profile)")
    }

    @Test func anAnswerWithOnlyConstrainedBaselineGetsBaseline() throws {
        let a = try AnswerParser.parse(try Self.answer(h264: 102, profile: "42e01f", formats: "102 103"),
                                       offer: Self.offer([.high, .constrainedBaseline]))
        #expect(a.video.codec == .h264)
        #expect(a.video.payloadType == 102)
        #expect(a.video.rtxPayloadType == 103)
        #expect(a.video.h264Profile == .constrainedBaseline)
    }

    @Test func anAnswerTakingHighGetsHigh() throws {
        let a = try AnswerParser.parse(try Self.answer(h264: 106, profile: "640c1f", formats: "106 107"),
                                       offer: Self.offer([.high, .constrainedBaseline]))
        #expect(a.video.payloadType == 106)
        #expect(a.video.rtxPayloadType == 107)
        #expect(a.video.profileLevelID == "640c1f")
        #expect(a.video.h264Profile == .high)
        // Offered after Baseline, High is still what an answer listing only it gets.
        let b = try AnswerParser.parse(try Self.answer(h264: 106, profile: "640c1f", formats: "106 107"),
                                       offer: Self.offer([.constrainedBaseline, .high]))
        #expect(b.video.h264Profile == .high)
    }

    /// aiortc answers the H.264 formats it decodes (42001f, 42e01f) in the offer's order, then VP8:
    /// for High-then-Baseline it takes 102 and VP8 only, so it gets Constrained Baseline.
    @Test func anAiortcStyleAnswerGetsBaseline() throws {
        var text = try Self.answer(h264: 102, profile: "42e01f", formats: "102 103 96 97")
        text = text.replacingOccurrences(of: "a=fmtp:103 apt=102\r\n",
                                         with: "a=fmtp:103 apt=102\r\na=rtpmap:96 VP8/90000\r\na=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=96\r\n")
        let a = try AnswerParser.parse(text, offer: Self.offer([.high, .constrainedBaseline]))
        #expect(a.video.codec == .h264)
        #expect(a.video.h264Profile == .constrainedBaseline)
    }

    /// Firefox ESR without H.264 takes VP8 out of the same offer; no H.264 profile is negotiated.
    @Test func aFirefoxAnswerGetsVP8() throws {
        let a = try AnswerParser.parse(try ChromeFixture.text("firefox-answer-vp8.sdp"),
                                       offer: Self.offer([.high, .constrainedBaseline]))
        #expect(a.video.codec == .vp8)
        #expect(a.video.h264Profile == nil)
    }

    @Test func profileLevelIDsNameTheirProfiles() {
        #expect(H264ProfileLevel(profileLevelID: "42e01f") == .constrainedBaseline)
        #expect(H264ProfileLevel(profileLevelID: "42C01F") == .constrainedBaseline)
        #expect(H264ProfileLevel(profileLevelID: "42001f") == nil)   // Baseline, not constrained
        #expect(H264ProfileLevel(profileLevelID: "640c1f") == .high)
        #expect(H264ProfileLevel(profileLevelID: "4d001f") == .main)
        #expect(H264ProfileLevel(profileLevelID: "f4001f") == nil)
        #expect(H264ProfileLevel(profileLevelID: "640c") == nil)
    }
}
