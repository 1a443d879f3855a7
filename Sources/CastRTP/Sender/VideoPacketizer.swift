import CastCore

/// The packetizer of the negotiated codec, as the video sender sees it: one
/// encoded picture (an H.264 access unit in Annex B, or one VP8 frame) in,
/// RTP packets and whether it was a keyframe out.
public enum VideoPacketizer: Sendable {
    case h264(H264Packetizer)
    case vp8(VP8Packetizer)

    /// A packetizer for `codec` with the given starts (RFC 3550 §5.1: random).
    public init(codec: VideoCodec, configuration: PacketizerConfiguration, ssrc: UInt32,
                random: inout some RandomNumberGenerator) throws {
        let seq = UInt16.random(in: 0...UInt16.max, using: &random)
        let ts = UInt32.random(in: 0...UInt32.max, using: &random)
        switch codec {
        case .h264:
            self = .h264(try H264Packetizer(configuration: configuration, ssrc: ssrc,
                                            initialSequenceNumber: seq, initialTimestamp: ts))
        case .vp8:
            self = .vp8(try VP8Packetizer(configuration: configuration, ssrc: ssrc, initialSequenceNumber: seq,
                                          initialTimestamp: ts,
                                          initialPictureID: UInt16.random(in: 0...VP8Packetizer.pictureIDMask, using: &random)))
        }
    }

    public var codec: VideoCodec {
        switch self {
        case .h264: .h264
        case .vp8: .vp8
        }
    }

    public var configuration: PacketizerConfiguration {
        switch self {
        case .h264(let p): p.configuration
        case .vp8(let p): p.configuration
        }
    }

    public var ssrc: UInt32 {
        switch self {
        case .h264(let p): p.ssrc
        case .vp8(let p): p.ssrc
        }
    }

    /// The sequence number the next packet will carry.
    public var nextSequenceNumber: UInt16 {
        switch self {
        case .h264(let p): p.nextSequenceNumber
        case .vp8(let p): p.nextSequenceNumber
        }
    }

    /// Whether an encoded picture of this codec is a keyframe, read from its bytes
    /// (H.264: an IDR slice NAL unit; VP8: the P bit of the frame tag, RFC 6386 §9.1).
    public func isKeyframe(_ picture: [UInt8]) -> Bool {
        switch self {
        case .h264:
            // Scanned in place (no array of units): the sender asks this of every picture.
            var scan = AnnexBScanner(picture)
            while let n = scan.next() { if n.type == H264NALUnit.idrSlice { return true } }
            return false
        case .vp8:
            return VP8Packetizer.isKeyframe(picture)
        }
    }

    /// Packetizes one encoded picture.
    public mutating func packetize(_ picture: [UInt8], captureTime: Instant) throws -> (packets: [RTPPacket], isKeyframe: Bool) {
        var packets: [RTPPacket] = []
        let isKeyframe = try packetize(picture, captureTime: captureTime, into: &packets)
        return (packets, isKeyframe)
    }

    /// Packetizes one encoded picture onto the end of `packets` (the sender reuses one
    /// array for every picture); returns whether it is a keyframe.
    public mutating func packetize(_ picture: [UInt8], captureTime: Instant, into packets: inout [RTPPacket]) throws -> Bool {
        switch self {
        case .h264(var p):
            let out = try p.packetize(accessUnit: picture, captureTime: captureTime, into: &packets)
            self = .h264(p)
            return out.isKeyframe
        case .vp8(var p):
            let out = p.packetize(frame: picture, captureTime: captureTime, into: &packets)
            self = .vp8(p)
            return out.isKeyframe
        }
    }
}
