import CastCore
import CastOpenSSL

/// A DTLS certificate fingerprint (RFC 8122 §5): `a=fingerprint:sha-256 AB:CD:…`.
public struct OfferOptions: Sendable {
    public var iceUfrag: String
    public var icePwd: String
    /// Our certificate's fingerprint (`a=fingerprint`, RFC 8122).
    public var fingerprint: CertificateFingerprint
    /// One stream id for every track (spec §7: the receiver builds its view from streams[0]).
    public var streamID: String
    public var videoTrackID: String
    public var cname: String
    public var videoSSRC: UInt32
    public var rtxSSRC: UInt32
    /// Offer H.264 Main (4d001f) as well, after Constrained Baseline; only when the encoder can produce it.
    public var encoderCanDoMain: Bool = false
    /// The H.264 profiles to offer, in castd's order of preference (`--h264-profile`):
    /// Constrained Baseline alone, or High and Constrained Baseline in either order.
    public var h264Profiles: [H264ProfileLevel] = [.constrainedBaseline]
    /// The video codecs to offer, in castd's order of preference (spec §7: H.264, then VP8).
    public var videoCodecs: [VideoCodec] = VideoCodec.allCases
    /// Optional send-only audio m-line (off by default, spec §7).
    public var audio: AudioOffer?
    public var sessionID: UInt64
    public var sessionVersion: UInt64 = 2

    public struct AudioOffer: Sendable {
        public var trackID: String
        public var ssrc: UInt32
        public init(trackID: String, ssrc: UInt32) { self.trackID = trackID; self.ssrc = ssrc }
    }

    public init(iceUfrag: String, icePwd: String, fingerprint: CertificateFingerprint, streamID: String,
                videoTrackID: String, cname: String, videoSSRC: UInt32, rtxSSRC: UInt32, sessionID: UInt64) {
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.fingerprint = fingerprint
        self.streamID = streamID
        self.videoTrackID = videoTrackID
        self.cname = cname
        self.videoSSRC = videoSSRC
        self.rtxSSRC = rtxSSRC
        self.sessionID = sessionID
    }
}

/// A codec castd can send, with its RTX companion.
public struct OfferedCodec: Equatable, Sendable {
    public var payloadType: UInt8
    public var rtxPayloadType: UInt8?
    public var name: String
    public var clockRate: Int
    public var channels: Int?
    public var fmtp: String?
    public var feedback: [String]

    /// The video codec this entry stands for (nil for audio).
    public var videoCodec: VideoCodec? {
        switch name.uppercased() {
        case "H264": .h264
        case "VP8": .vp8
        default: nil
        }
    }

    /// The H.264 profile this payload type stands for, from its `profile-level-id` (nil for other codecs).
    public var h264Profile: H264ProfileLevel? {
        guard videoCodec == .h264 else { return nil }
        let id = fmtp?.split(separator: ";").first { $0.hasPrefix("profile-level-id=") }?.dropFirst("profile-level-id=".count)
        return id.flatMap { H264ProfileLevel(profileLevelID: String($0)) }
    }
}

/// RTP header extensions castd offers (RFC 8285 one-byte ids).
public enum HeaderExtensionURI {
    public static let absSendTime = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    public static let transportWideCC = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    public static let playoutDelay = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"
}

/// The offer as sent, plus the plan needed to read the answer.
public struct Offer: Sendable {
    public var description: SessionDescription
    public var videoCodecs: [OfferedCodec]
    public var audioCodecs: [OfferedCodec]
    public var headerExtensions: [(id: Int, uri: String)]
    public var sdp: String { description.serialize() }
}

/// Builds castd's offer (spec §7, RFC 8829 §5.2.1): BUNDLE with one send-only
/// video m-line, H.264 (the profiles of `OfferOptions.h264Profiles`, each its own
/// payload type, in that order), then VP8 as the fallback (receivers without H.264:
/// Firefox ESR, open-source Chromium), each with its RTX; rtcp-mux/rsize, trickle.
/// Only codecs castd can send are listed: no VP9.
public enum OfferBuilder {
    public static let h264Baseline = h264(.constrainedBaseline, payloadType: 102)
    public static let h264Main = h264(.main, payloadType: 104)
    /// Constrained High (640c1f): x264 with CABAC and the 8×8 transform.
    public static let h264High = h264(.high, payloadType: 106)

    /// The payload type (and the next one for its RTX) of a profile.
    static func h264(_ profile: H264ProfileLevel, payloadType: UInt8) -> OfferedCodec {
        OfferedCodec(payloadType: payloadType, rtxPayloadType: payloadType + 1, name: "H264", clockRate: 90000, channels: nil,
                     fmtp: "profile-level-id=\(profile.profileLevelID);level-asymmetry-allowed=1;packetization-mode=1",
                     feedback: ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
    }

    static func h264(_ profile: H264ProfileLevel) -> OfferedCodec {
        switch profile {
        case .constrainedBaseline: h264Baseline
        case .main: h264Main
        case .high: h264High
        }
    }
    /// RFC 7741 §6.1: VP8/90000; max-fs/max-fr are the receiver's to state, not ours.
    public static let vp8 = OfferedCodec(
        payloadType: 96, rtxPayloadType: 97, name: "VP8", clockRate: 90000, channels: nil,
        fmtp: nil, feedback: ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
    /// RFC 7587 §6.1: opus/48000/2 always; `stereo=1` asks the receiver to decode
    /// (and keep) two channels, `sprop-stereo=1` says castd sends stereo (desktop
    /// audio is stereo); `useinbandfec=1` because the encoder codes LBRR (§3.2) once
    /// the receiver reports loss; `minptime=10` leaves 10 ms frames open.
    public static let opus = OfferedCodec(
        payloadType: 111, rtxPayloadType: nil, name: "opus", clockRate: 48000, channels: 2,
        fmtp: "minptime=10;useinbandfec=1;stereo=1;sprop-stereo=1", feedback: ["transport-cc"])
    public static let headerExtensions: [(id: Int, uri: String)] = [
        (2, HeaderExtensionURI.absSendTime),
        (3, HeaderExtensionURI.transportWideCC),
        (4, HeaderExtensionURI.playoutDelay),
    ]

    public static func build(_ o: OfferOptions) -> Offer {
        var video: [OfferedCodec] = []
        for codec in o.videoCodecs {
            switch codec {
            case .h264:
                var profiles = o.h264Profiles.isEmpty ? [.constrainedBaseline] : o.h264Profiles
                if o.encoderCanDoMain, !profiles.contains(.main) {
                    profiles.insert(.main, at: (profiles.firstIndex(of: .constrainedBaseline) ?? profiles.count - 1) + 1)
                }
                for p in profiles where !video.contains(h264(p)) { video.append(h264(p)) }
            case .vp8: video.append(vp8)
            }
        }
        let audio = o.audio == nil ? [] : [opus]
        var mids = ["0"]
        if o.audio != nil { mids.append("1") }

        var session = SessionDescription(
            origin: "- \(o.sessionID) \(o.sessionVersion) IN IP4 127.0.0.1",
            attributes: [
                SDPAttribute("group", "BUNDLE " + mids.joined(separator: " ")),
                SDPAttribute("msid-semantic", " WMS \(o.streamID)"),
            ])
        var v = mediaSection(kind: "video", mid: "0", codecs: video, extensions: headerExtensions, o: o)
        v.attributes.append(SDPAttribute("ssrc-group", "FID \(o.videoSSRC) \(o.rtxSSRC)"))
        for ssrc in [o.videoSSRC, o.rtxSSRC] {
            v.attributes.append(SDPAttribute("ssrc", "\(ssrc) cname:\(o.cname)"))
            v.attributes.append(SDPAttribute("ssrc", "\(ssrc) msid:\(o.streamID) \(o.videoTrackID)"))
        }
        v.attributes.insert(SDPAttribute("msid", "\(o.streamID) \(o.videoTrackID)"),
                            at: v.attributes.firstIndex { $0.name == "rtcp-mux" }!)
        session.media.append(v)
        if let a = o.audio {
            var m = mediaSection(kind: "audio", mid: "1", codecs: audio,
                                 extensions: [(3, HeaderExtensionURI.transportWideCC)], o: o)
            m.attributes.insert(SDPAttribute("msid", "\(o.streamID) \(a.trackID)"),
                                at: m.attributes.firstIndex { $0.name == "rtcp-mux" }!)
            m.attributes.removeAll { $0.name == "rtcp-rsize" }
            m.attributes.append(SDPAttribute("ssrc", "\(a.ssrc) cname:\(o.cname)"))
            m.attributes.append(SDPAttribute("ssrc", "\(a.ssrc) msid:\(o.streamID) \(a.trackID)"))
            session.media.append(m)
        }
        return Offer(description: session, videoCodecs: video, audioCodecs: audio, headerExtensions: headerExtensions)
    }

    static func mediaSection(kind: String, mid: String, codecs: [OfferedCodec],
                             extensions: [(id: Int, uri: String)], o: OfferOptions) -> MediaDescription {
        var formats: [String] = []
        for c in codecs {
            formats.append("\(c.payloadType)")
            if let r = c.rtxPayloadType { formats.append("\(r)") }
        }
        // Port 9 and 0.0.0.0 with trickle ICE (RFC 8829 §5.2.1, RFC 8840 §4.1.1).
        var m = MediaDescription(kind: kind, port: 9, proto: "UDP/TLS/RTP/SAVPF", formats: formats,
                                 lines: [SDPLine("c", "IN IP4 0.0.0.0")])
        var a: [SDPAttribute] = [
            SDPAttribute("rtcp", "9 IN IP4 0.0.0.0"),
            SDPAttribute("ice-ufrag", o.iceUfrag),
            SDPAttribute("ice-pwd", o.icePwd),
            SDPAttribute("ice-options", "trickle"),
            SDPAttribute("fingerprint", o.fingerprint.sdpValue),
            SDPAttribute("setup", "actpass"),   // RFC 8842 §5.2: the offerer must offer actpass
            SDPAttribute("mid", mid),
        ]
        for e in extensions { a.append(SDPAttribute("extmap", "\(e.id) \(e.uri)")) }
        a += [SDPAttribute("sendonly"), SDPAttribute("rtcp-mux"), SDPAttribute("rtcp-rsize")]
        for c in codecs {
            let enc = c.channels.map { "\(c.name)/\(c.clockRate)/\($0)" } ?? "\(c.name)/\(c.clockRate)"
            a.append(SDPAttribute("rtpmap", "\(c.payloadType) \(enc)"))
            for fb in c.feedback { a.append(SDPAttribute("rtcp-fb", "\(c.payloadType) \(fb)")) }
            if let f = c.fmtp { a.append(SDPAttribute("fmtp", "\(c.payloadType) \(f)")) }
            if let r = c.rtxPayloadType {
                a.append(SDPAttribute("rtpmap", "\(r) rtx/\(c.clockRate)"))
                a.append(SDPAttribute("fmtp", "\(r) apt=\(c.payloadType)"))
            }
        }
        m.attributes = a
        return m
    }
}
