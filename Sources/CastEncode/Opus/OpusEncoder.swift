import CastCore
import COpus

/// libopus's encoder, configured for desktop ("app") audio sent over WebRTC.
///
/// Input: interleaved 32-bit float PCM at 48 kHz (PipeWire's F32LE), one
/// frame (`samplesPerChannel × channels` values) per call. Output: one Opus
/// packet per frame, to go into one RTP packet (RFC 7587 §4.2).
///
/// Defaults and why (measured figures are in docs/audio.md):
/// - 48 kHz stereo: the receiver's Opus decoder runs at 48 kHz (RFC 7587 §7:
///   `opus/48000/2` whatever the content), so no resampling anywhere.
/// - 20 ms frames: 10 ms frames save 10 ms of packetization delay but double
///   the packet rate (100/s): about 25 kbit/s more IP/UDP/RTP/SRTP overhead.
/// - `OPUS_APPLICATION_AUDIO` at 128 kbit/s: music, film and game audio, not
///   speech. RESTRICTED_LOWDELAY saves 4 ms of lookahead (2.5 ms instead of
///   6.5 ms) but has no SILK layer, so in-band FEC cannot work in it.
/// - In-band FEC on (RFC 6716 §2.1.7 LBRR). libopus only codes LBRR in SILK
///   or hybrid mode, and picks those for music only when the expected loss is
///   high enough; `setExpectedPacketLoss` is fed from the receiver's reports, so
///   a clean link keeps full-band CELT and a lossy one gets FEC.
/// - DTX off: silence keeps its 50 packets/s, so the receiver's jitter buffer
///   and the RTCP sender reports keep running (lip sync after a pause).
///
/// One owner (the audio thread); not `Sendable`.
public final class OpusAudioEncoder {
    public enum Application: String, Sendable, CaseIterable {
        /// Best quality for music at a given rate; 6.5 ms lookahead.
        case audio
        /// CELT only, 2.5 ms lookahead, no in-band FEC.
        case restrictedLowDelay
    }

    public struct Settings: Sendable, Equatable {
        public static let sampleRate = 48_000
        public var channels: Int
        /// 10 or 20 ms (2.5, 5, 40, 60 are Opus frame sizes too; castd does not use them).
        public var frameDuration: Duration
        public var bitsPerSecond: Int
        public var application: Application
        public var inbandFEC: Bool
        /// The loss the encoder plans for, 0…100 (`OPUS_SET_PACKET_LOSS_PERC`).
        public var expectedPacketLossPercent: Int
        public var dtx: Bool
        /// 0…10; 10 is libopus's default.
        public var complexity: Int

        public init(channels: Int = 2, frameDuration: Duration = .milliseconds(20), bitsPerSecond: Int = 128_000,
                    application: Application = .audio, inbandFEC: Bool = true, expectedPacketLossPercent: Int = 0,
                    dtx: Bool = false, complexity: Int = 10) {
            self.channels = channels
            self.frameDuration = frameDuration
            self.bitsPerSecond = bitsPerSecond
            self.application = application
            self.inbandFEC = inbandFEC
            self.expectedPacketLossPercent = expectedPacketLossPercent
            self.dtx = dtx
            self.complexity = complexity
        }

        /// Samples per channel in one frame (960 for 20 ms at 48 kHz).
        public var samplesPerChannel: Int {
            Int(frameDuration.components.seconds) * Self.sampleRate
                + Int(frameDuration.components.attoseconds / 1_000_000_000) * Self.sampleRate / 1_000_000_000
        }
    }

    /// RFC 6716 §3.2.1: a packet is at most 1275 bytes of frame data plus its TOC and lengths.
    static let maxPacketBytes = 1500

    public private(set) var settings: Settings
    /// Samples per channel the encoder delays its input by (its lookahead).
    public let lookahead: Int
    private let encoder: OpaquePointer
    private var scratch: [UInt8]

    public init(settings: Settings = Settings()) throws {
        guard settings.channels == 1 || settings.channels == 2 else {
            throw CastError(.usage, "Opus: \(settings.channels) channels; castd encodes mono or stereo")
        }
        guard [120, 240, 480, 960, 1920, 2880].contains(settings.samplesPerChannel) else {
            throw CastError(.usage, "Opus: a \(settings.frameDuration) frame is not an Opus frame size (RFC 6716 §2.1.4: 2.5 to 60 ms)")
        }
        let app: Int32 = switch settings.application {
        case .audio: castd_opus_application_audio()
        case .restrictedLowDelay: castd_opus_application_restricted_lowdelay()
        }
        var err: Int32 = 0
        guard let e = opus_encoder_create(Int32(Settings.sampleRate), Int32(settings.channels), app, &err), err == OPUS_OK else {
            throw CastError(.encoder, "Opus: cannot create an encoder (\(Self.describe(err)))")
        }
        encoder = e
        self.settings = settings
        scratch = [UInt8](repeating: 0, count: Self.maxPacketBytes)
        var la: Int32 = 0
        _ = castd_opus_get_lookahead(e, &la)
        lookahead = Int(la)
        do {
            try check(castd_opus_set_signal(e, castd_opus_signal_music()), "signal type")
            try check(castd_opus_set_vbr(e, 1), "VBR")
            try check(castd_opus_set_complexity(e, Int32(max(0, min(10, settings.complexity)))), "complexity")
            try check(castd_opus_set_dtx(e, settings.dtx ? 1 : 0), "DTX")
            try check(castd_opus_set_inband_fec(e, settings.inbandFEC ? 1 : 0), "in-band FEC")
            try setBitrate(settings.bitsPerSecond)
            try setExpectedPacketLoss(percent: settings.expectedPacketLossPercent)
        } catch {
            opus_encoder_destroy(e)
            throw error
        }
    }

    deinit { opus_encoder_destroy(encoder) }

    /// Changes the bitrate for the next frame on (rate control may lower it under congestion).
    /// RFC 7587 §3.1.1: Opus runs from 6 to 510 kbit/s.
    public func setBitrate(_ bitsPerSecond: Int) throws {
        let bps = max(6_000, min(510_000, bitsPerSecond))
        try check(castd_opus_set_bitrate(encoder, Int32(bps)), "bitrate \(bps)")
        settings.bitsPerSecond = bps
    }

    /// The loss rate FEC should plan for (from RTCP fraction lost), 0…100.
    public func setExpectedPacketLoss(percent: Int) throws {
        let p = max(0, min(100, percent))
        try check(castd_opus_set_packet_loss_perc(encoder, Int32(p)), "expected packet loss \(p) %")
        settings.expectedPacketLossPercent = p
    }

    /// The bitrate libopus reports it is using.
    public var currentBitrate: Int {
        var b: Int32 = 0
        _ = castd_opus_get_bitrate(encoder, &b)
        return Int(b)
    }

    /// Values in one frame: `samplesPerChannel × channels`.
    public var frameValues: Int { settings.samplesPerChannel * settings.channels }

    /// Encodes one frame of interleaved float samples (nominally −1…1) into one Opus packet.
    public func encode(_ pcm: UnsafeBufferPointer<Float>) throws -> [UInt8] {
        guard pcm.count == frameValues, let base = pcm.baseAddress else {
            throw CastError(.usage, "Opus: a frame is \(frameValues) interleaved samples, got \(pcm.count)")
        }
        let n = scratch.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let dst = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
            return opus_encode_float(encoder, base, Int32(settings.samplesPerChannel), dst, Int32(out.count))
        }
        guard n > 0 else { throw CastError(.encoder, "Opus: encoding a frame failed (\(Self.describe(n)))") }
        return Array(scratch[0..<Int(n)])
    }

    public func encode(_ pcm: [Float]) throws -> [UInt8] {
        try pcm.withUnsafeBufferPointer { try encode($0) }
    }

    private func check(_ result: Int32, _ what: String) throws {
        guard result == OPUS_OK else { throw CastError(.encoder, "Opus: cannot set \(what) (\(Self.describe(result)))") }
    }

    static func describe(_ code: Int32) -> String { String(cString: opus_strerror(code)) }

    /// The libopus version ("1.3.1"), for `castd doctor`.
    public static var libraryVersion: String {
        let s = String(cString: opus_get_version_string())   // "libopus 1.3.1"
        return s.hasPrefix("libopus ") ? String(s.dropFirst(8)) : s
    }
}

/// How a packet was coded, from its TOC byte (RFC 6716 §3.1).
public enum OpusPacketMode: String, Sendable {
    case silk, hybrid, celt

    /// The mode of a packet; nil for an empty one.
    public init?(packet: [UInt8]) {
        guard let toc = packet.first else { return nil }
        let config = toc >> 3
        self = config < 12 ? .silk : config < 16 ? .hybrid : .celt
    }
}
