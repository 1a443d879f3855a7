import CastCore
import CastMedia
import CastSystem

/// `--encoder vaapi|x264|auto` (the H.264 encoders; VP8 has only libvpx).
public enum EncoderPreference: String, Sendable, CaseIterable {
    /// The probe table in order, falling back to the next entry on failure.
    case auto
    /// Only VA-API; its failure is an error (the user asked for hardware explicitly).
    case vaapi
    /// Only x264.
    case x264
}

/// One row of the probe table: a kind and how to open it.
public struct EncoderCandidate: Sendable {
    public var kind: EncoderKind
    public var open: @Sendable (EncoderConfig) throws -> any VideoEncoder

    public init(kind: EncoderKind, open: @escaping @Sendable (EncoderConfig) throws -> any VideoEncoder) {
        self.kind = kind
        self.open = open
    }
}

/// The encoders as a probe-ordered table of data (Sunshine's habit), and the
/// runtime fallback: a failure at start or mid-stream moves to the next row
/// with an IDR and one log line, and the stream goes on. Owned by the encode thread.
public final class EncoderChain {
    /// What every row of this chain produces (the negotiated codec).
    public let codec: VideoCodec
    public private(set) var current: (any VideoEncoder)?
    public private(set) var config: EncoderConfig
    /// Rows not yet tried, in order.
    private var remaining: [EncoderCandidate]
    private let log: (LogLine) -> Void
    private let preference: EncoderPreference
    /// Conversion targets, one per input format, reused frame after frame.
    private var images: [PixelFormat: PlanarImage] = [:]
    public private(set) var fallbacks = 0
    /// How long the last `encode` spent converting the pixels and in the encoder (the daemon's stage counters).
    public private(set) var lastConvertTime = Duration.zero
    public private(set) var lastEncodeTime = Duration.zero
    private let clock = SystemMonotonicClock()
    /// The two-thread converter, started at the first frame (a chain that never encodes starts no thread).
    private var converter: SplitConverter? = nil

    /// VA-API first (the GPU does the work), then x264 (always there).
    public static let standardTable: [EncoderCandidate] = [
        EncoderCandidate(kind: .vaapi) { config in try VAAPIEncoder(config: config) },
        EncoderCandidate(kind: .x264) { config in try X264Encoder(config: config) },
    ]

    /// VP8 (the fallback codec, spec §7): libvpx only.
    public static let vp8Table: [EncoderCandidate] = [
        EncoderCandidate(kind: .libvpx) { config in try VP8Encoder(config: config) },
    ]

    /// The probe table of a codec.
    public static func standardTable(for codec: VideoCodec) -> [EncoderCandidate] {
        switch codec {
        case .h264: standardTable
        case .vp8: vp8Table
        }
    }

    /// `preference` picks among the H.264 rows; a VP8 chain has libvpx alone and ignores it.
    public init(codec: VideoCodec = .h264, preference: EncoderPreference, config: EncoderConfig,
                table: [EncoderCandidate]? = nil, log: @escaping (LogLine) -> Void) {
        let table = (table ?? Self.standardTable(for: codec)).filter { $0.kind.codec == codec }
        switch (codec, preference) {
        case (.vp8, _), (_, .auto): remaining = table
        case (_, .vaapi): remaining = table.filter { $0.kind == .vaapi }
        case (_, .x264): remaining = table.filter { $0.kind == .x264 }
        }
        self.codec = codec
        self.config = config
        self.preference = preference
        self.log = log
    }

    deinit { converter?.stop() }

    /// Opens the first row that works. Throws only when no row does.
    public func start() throws {
        try advance(after: nil, reason: nil)
    }

    private func advance(after failed: EncoderKind?, reason: String?) throws {
        var reasons: [String] = reason.map { [$0] } ?? []
        var unavailable: [EncoderKind] = []
        while !remaining.isEmpty {
            let row = remaining.removeFirst()
            do {
                let enc = try row.open(config)
                if let failed {
                    fallbacks += 1
                    log(LogLine(.warning, "encoder_fallback", [("from", failed.rawValue), ("to", row.kind.rawValue),
                                                               ("reason", reasons.last ?? "")]))
                } else {
                    // At start, a row that could not open is a fallback too: say from what.
                    var fields: [(String, CustomStringConvertible)] = [
                        ("kind", row.kind.rawValue), ("codec", codec), ("size", config.size),
                        ("fps", config.frameRate), ("bitrate", config.bitrate)]
                    if !unavailable.isEmpty { fields.append(("fell_back_from", unavailable.map(\.rawValue).joined(separator: ","))) }
                    log(LogLine(.info, "encoder_started", fields))
                }
                enc.requestKeyframe()  // a new encoder's first picture must be an IDR for the receiver
                current = enc
                rateBufferFrames = 1   // a new encoder opens with the one-frame buffer
                return
            } catch {
                log(LogLine(.info, "encoder_unavailable", [("kind", row.kind.rawValue), ("reason", "\(error)")]))
                reasons.append("\(error)")
                unavailable.append(row.kind)
            }
        }
        current = nil
        let why = reasons.isEmpty ? "the table is empty" : reasons.joined(separator: "; ")
        if preference == .vaapi && codec == .h264 {
            throw CastError(.encoderUnavailable,
                            "--encoder vaapi allows only VA-API, which cannot encode here: \(why). Use --encoder auto to fall back to x264.")
        }
        throw CastError(.encoderUnavailable, "no \(codec == .h264 ? "H.264" : "VP8") encoder could start: " + why)
    }

    /// Converts a packed frame of `config.size` to the current encoder's
    /// format and encodes it; on an encoder failure, moves to the next row
    /// and encodes the same frame there (as an IDR).
    ///
    /// `pixelsRead`, when given, is called exactly once, as soon as `pixels`
    /// will not be read again: right after the conversion when no row is left
    /// to fall back to (the capture slot can then take the next frame while
    /// this one is encoded; issue 19), else before this returns or throws.
    public func encode(pixels: UnsafeRawPointer, frame: Frame,
                       pixelsRead: (() -> Void)? = nil) throws -> EncodedAccessUnit? {
        precondition(frame.size == config.size, "scale to \(config.size) before encoding (got \(frame.size))")
        var owed = pixelsRead
        func letGo() {
            owed?()
            owed = nil
        }
        defer { letGo() }
        while let enc = current {
            let image = self.image(for: enc.inputFormat)
            let t0 = clock.now()
            // BT.709 for H.264 (its VUI says so), BT.601 for VP8 (what its decoders assume).
            if converter == nil { converter = SplitConverter() }
            converter!.convert(from: pixels, format: frame.format, size: frame.size, stride: frame.stride, to: image,
                               matrix: enc.codec == .vp8 ? .bt601 : .bt709)
            let t1 = clock.now()
            if remaining.isEmpty { letGo() }
            do {
                let au = try enc.encode(image, pts: frame.captureTime)
                lastConvertTime = t1 - t0
                lastEncodeTime = clock.now() - t1
                return au
            } catch {
                current = nil
                try advance(after: enc.kind, reason: "\(error)")
            }
        }
        throw CastError(.encoderUnavailable, "no encoder is running")
    }

    public func requestKeyframe() { current?.requestKeyframe() }

    public func setBitrate(_ bps: Int) throws {
        config.bitrate = bps
        try current?.setBitrate(bps)
    }

    public func setFrameRate(_ fps: Int) throws {
        config.frameRate = fps
        try current?.setFrameRate(fps)
    }

    /// The current encoder's rate buffer in frames (`VideoEncoder.setRateBuffer`); 1 again
    /// whenever another row takes over.
    public private(set) var rateBufferFrames = 1

    public func setRateBuffer(frames: Int) throws {
        rateBufferFrames = frames
        try current?.setRateBuffer(frames: frames)
    }

    private func image(for format: PixelFormat) -> PlanarImage {
        if let img = images[format], img.size == config.size { return img }
        let img = PlanarImage(format: format, size: config.size)
        images[format] = img
        return img
    }
}
