import CastCore
import CastOpenSSL

extension CastError.Code {
    /// The answer is valid SDP but negotiates nothing castd can send (rejected m-line,
    /// unknown codec, missing fingerprint …).
    public static let negotiationFailed = Self("negotiation-failed")
    /// The receiver can decode none of the video codecs castd offered (it rejected the
    /// video m-line or answered only payload types castd did not offer).
    public static let noCommonCodec = Self("no-common-codec")
}

/// castd's DTLS role, from the answer's `a=setup` (RFC 8842 §5.3, RFC 4145 §4).
public enum DTLSRole: Equatable, Sendable {
    /// The answerer said `active`: it connects, castd is the DTLS server (Chrome's usual choice).
    case server
    /// The answerer said `passive`: castd sends the ClientHello.
    case client
}

/// What the receiver's answer settled.
public struct NegotiatedAnswer: Equatable, Sendable {
    public struct Video: Equatable, Sendable {
        public var mid: String
        /// The codec the answer chose (its first format castd offered, RFC 3264 §6.1).
        public var codec: VideoCodec
        public var payloadType: UInt8
        public var rtxPayloadType: UInt8?
        /// The answer's `profile-level-id` for that payload type, as it wrote it.
        public var profileLevelID: String?
        /// The H.264 profile castd offered under the chosen payload type, which the encoder
        /// must produce (nil for VP8).
        public var h264Profile: H264ProfileLevel? = nil
        /// `rtcp-fb` values the answer kept for the chosen payload type ("nack", "nack pli", …).
        public var feedback: [String]
        /// Negotiated one-byte header extension ids by URI.
        public var headerExtensions: [String: Int]
    }

    public struct Audio: Equatable, Sendable {
        public var mid: String
        public var payloadType: UInt8
        /// Negotiated one-byte header extension ids by URI (transport-wide-cc, when kept).
        public var headerExtensions: [String: Int] = [:]
        /// The answer's fmtp for Opus asks for stereo (RFC 7587 §6.1 `stereo=1`);
        /// castd sends stereo either way, a receiver without it may decode mono.
        public var receiverWantsStereo = false
    }

    public var video: Video
    /// nil when audio was not offered or the receiver rejected it.
    public var audio: Audio?
    /// Why the offered audio m-line is not used (a sentence; nil when it was not offered or was accepted).
    public var audioRejection: String? = nil
    public var dtlsRole: DTLSRole
    public var remoteFingerprint: CertificateFingerprint
    public var iceUfrag: String
    public var icePwd: String
    public var iceLite: Bool
    /// `a=candidate` lines embedded in the answer (unparseable ones are dropped and counted).
    public var candidates: [ICECandidate]
    public var droppedCandidateLines: Int
    public var endOfCandidates: Bool
    /// The mid of each m-line, by index (sdpMLineIndex → sdpMid).
    public var mids: [String]
}

/// Reads an answer against the offer castd sent (RFC 8829 §5.10, RFC 3264 §6).
public enum AnswerParser {
    public static func parse(_ sdp: String, offer: Offer) throws -> NegotiatedAnswer {
        let d = try SessionDescription(parsing: sdp)
        let offered = offer.description.media
        guard d.media.count == offered.count else {
            throw CastError(.negotiationFailed, "the answer has \(d.media.count) m-lines for the offer's \(offered.count)")
        }
        var mids: [String] = []
        for (i, m) in d.media.enumerated() {
            guard m.kind == offered[i].kind else {
                throw CastError(.negotiationFailed, "answer m-line \(i) is \(m.kind), the offer's is \(offered[i].kind)")
            }
            mids.append(m.mid ?? offered[i].mid ?? "\(i)")
        }

        let vm = d.media[0]
        if vm.isRejected {
            throw CastError(.noCommonCodec, "the receiver can decode none of castd's video codecs (\(offeredNames(offer))): it rejected the video m-line")
        }
        let video = try negotiateVideo(vm, offer: offer)

        var audio: NegotiatedAnswer.Audio?
        var audioRejection: String?
        if d.media.count > 1 {
            switch negotiateAudio(d.media[1], mid: mids[1], offer: offer) {
            case .success(let a): audio = a
            case .failure(let why): audioRejection = why.message
            }
        }

        // Transport attributes: media level wins, session level is the fallback (BUNDLE: the
        // first m-line's transport applies to all, RFC 8843 §7.3.3).
        func transport(_ name: String) -> String? { vm.value(name) ?? d.value(name) }
        guard let setup = transport("setup") else {
            throw CastError(.negotiationFailed, "the answer has no a=setup")
        }
        let role: DTLSRole
        switch setup {
        case "active": role = .server
        case "passive": role = .client
        default:
            throw CastError(.negotiationFailed, "the answer's a=setup:\(setup) is not active or passive (RFC 8842 §5.3)")
        }
        guard let fp = transport("fingerprint") else {
            throw CastError(.negotiationFailed, "the answer has no a=fingerprint; DTLS cannot be authenticated")
        }
        let fingerprint = try CertificateFingerprint(sdp: fp)
        guard let ufrag = transport("ice-ufrag"), let pwd = transport("ice-pwd") else {
            throw CastError(.negotiationFailed, "the answer has no ICE credentials")
        }
        // RFC 8839 §5.4: ufrag 4–256 chars, pwd 22–256 chars.
        guard (4...256).contains(ufrag.count), (22...256).contains(pwd.count) else {
            throw CastError(.negotiationFailed, "the answer's ICE ufrag or pwd has an invalid length")
        }

        var candidates: [ICECandidate] = []
        var dropped = 0
        for v in vm.values("candidate") {
            if let c = try? ICECandidate(parsing: v) { candidates.append(c) } else { dropped += 1 }
        }
        var answer = NegotiatedAnswer(
            video: video, audio: audio, dtlsRole: role, remoteFingerprint: fingerprint,
            iceUfrag: ufrag, icePwd: pwd, iceLite: d.has("ice-lite"),
            candidates: candidates, droppedCandidateLines: dropped,
            endOfCandidates: vm.has("end-of-candidates") || d.has("end-of-candidates"), mids: mids)
        answer.audioRejection = audioRejection
        return answer
    }

    struct Rejection: Error { var message: String }

    /// The audio m-line's outcome: accepted with Opus, or rejected (port 0, RFC 3264 §6;
    /// `inactive` or `sendonly`, RFC 3264 §6.1; no Opus among its formats). A rejected
    /// audio line never fails the negotiation: video goes on alone.
    static func negotiateAudio(_ m: MediaDescription, mid: String, offer: Offer) -> Result<NegotiatedAnswer.Audio, Rejection> {
        if m.isRejected { return .failure(Rejection(message: "the receiver rejected the audio m-line (port 0)")) }
        if m.direction == "inactive" || m.direction == "sendonly" {
            return .failure(Rejection(message: "the receiver answered the audio m-line \(m.direction)"))
        }
        guard let pt = m.formats.lazy.compactMap({ UInt8($0) })
            .first(where: { p in offer.audioCodecs.contains { $0.payloadType == p } }) else {
            return .failure(Rejection(message: "the receiver's audio answer has no Opus payload type castd offered"))
        }
        let fmtp = m.values("fmtp").first { $0.hasPrefix("\(pt) ") } ?? ""
        let stereo = fmtp.split(separator: " ", maxSplits: 1).dropFirst().first?
            .split(separator: ";").contains { $0.filter { $0 != " " } == "stereo=1" } ?? false
        return .success(.init(mid: mid, payloadType: pt, headerExtensions: headerExtensions(of: m, offer: offer),
                              receiverWantsStereo: stereo))
    }

    /// Extensions castd offered, with the ids the answer gives them (RFC 8285 §6).
    static func headerExtensions(of m: MediaDescription, offer: Offer) -> [String: Int] {
        var ext: [String: Int] = [:]
        for v in m.values("extmap") {
            let p = v.split(separator: " ")
            // `id[/direction]`; a value like "/" has no id at all (found by FuzzSDP).
            guard p.count >= 2, let idText = p[0].split(separator: "/", omittingEmptySubsequences: false).first,
                  let id = Int(idText), (1...14).contains(id) else { continue }
            let uri = String(p[1])
            if offer.headerExtensions.contains(where: { $0.uri == uri }) { ext[uri] = id }
        }
        return ext
    }

    /// "H.264, VP8": what was offered, for the sentence.
    static func offeredNames(_ offer: Offer) -> String {
        var names: [String] = []
        for c in offer.videoCodecs.compactMap(\.videoCodec) where !names.contains(c.displayName) { names.append(c.displayName) }
        return names.joined(separator: ", ")
    }

    static func negotiateVideo(_ m: MediaDescription, offer: Offer) throws -> NegotiatedAnswer.Video {
        if m.direction == "sendonly" {
            throw CastError(.negotiationFailed, "the receiver answered the video m-line sendonly; it must receive")
        }
        if m.direction == "inactive" {
            throw CastError(.negotiationFailed, "the receiver answered the video m-line inactive")
        }
        // The first answered format that castd offered as a video codec is the one to send (RFC 3264 §6.1).
        let answered = m.formats.compactMap { UInt8($0) }
        guard let codec = answered.lazy.compactMap({ pt in offer.videoCodecs.first { $0.payloadType == pt && $0.videoCodec != nil } }).first,
              let videoCodec = codec.videoCodec else {
            throw CastError(.noCommonCodec, "the receiver can decode none of castd's video codecs (\(offeredNames(offer))): no offered payload type in its answer")
        }
        var rtx: UInt8?
        if let r = codec.rtxPayloadType, answered.contains(r) {
            // Confirm apt= in the answer when present; Chrome echoes it.
            let apt = m.values("fmtp").first { $0.hasPrefix("\(r) ") }
            if apt == nil || apt == "\(r) apt=\(codec.payloadType)" { rtx = r }
        }
        let fmtp = m.values("fmtp").first { $0.hasPrefix("\(codec.payloadType) ") }
        let profile = fmtp.flatMap { f -> String? in
            f.split(separator: " ", maxSplits: 1).dropFirst().first?.split(separator: ";")
                .first { $0.hasPrefix("profile-level-id=") }
                .map { String($0.dropFirst("profile-level-id=".count)) }
        }
        let fb = m.values("rtcp-fb").compactMap { v -> String? in
            let p = v.split(separator: " ", maxSplits: 1)
            guard p.count == 2, p[0] == "\(codec.payloadType)" || p[0] == "*" else { return nil }
            return String(p[1])
        }
        return .init(mid: m.mid ?? "0", codec: videoCodec, payloadType: codec.payloadType, rtxPayloadType: rtx,
                     profileLevelID: profile, h264Profile: codec.h264Profile, feedback: fb,
                     headerExtensions: headerExtensions(of: m, offer: offer))
    }
}
