import CastCore

/// Turns VP8 frames (one encoded frame each, as libvpx emits them) into RTP
/// packets (RFC 7741): every packet starts with a 4-byte payload descriptor
/// carrying a 15-bit PictureID; the frame is cut into near-equal pieces that
/// fit the payload budget; the marker goes on the last packet of the frame;
/// 90 kHz timestamps from the capture time. Pure: randomness arrives at init,
/// time as a parameter.
///
/// The frame is sent as one partition (partition index 0, S set only on its
/// first packet), as libwebrtc does without partitioned output: RFC 7741 §4.4
/// lets a packetizer ignore partition boundaries.
public struct VP8Packetizer: Sendable {
    public typealias Configuration = PacketizerConfiguration

    /// What one frame became.
    public struct Output: Equatable, Sendable {
        public var packets: [RTPPacket]
        /// The frame is a key frame (P bit 0 in the VP8 payload header).
        public var isKeyframe: Bool
        /// The PictureID the frame's packets carry.
        public var pictureID: UInt16
    }

    /// The payload descriptor castd writes (RFC 7741 §4.2, Figure 2), X, I and M set:
    ///
    ///       0 1 2 3 4 5 6 7
    ///      +-+-+-+-+-+-+-+-+
    ///      |X|R|N|S|R| PID |   X=1, N=0, S on the frame's first packet, PID=0
    ///      +-+-+-+-+-+-+-+-+
    ///   X: |I|L|T|K| RSV   |   I=1 (PictureID present), L=T=K=0
    ///      +-+-+-+-+-+-+-+-+
    ///   I: |M| PictureID   |   M=1: the PictureID has 15 bits
    ///      +-+-+-+-+-+-+-+-+
    ///      |   PictureID   |
    ///      +-+-+-+-+-+-+-+-+
    public static let descriptorLength = 4
    /// §4.2: the 15-bit PictureID wraps to 0 after 0x7FFF.
    public static let pictureIDMask: UInt16 = 0x7fff

    public let configuration: Configuration
    public let ssrc: UInt32
    /// The sequence number the next packet gets.
    public private(set) var nextSequenceNumber: UInt16
    /// The PictureID the next frame gets.
    public private(set) var nextPictureID: UInt16
    /// RTP timestamp of the first frame (random, RFC 3550 §5.1).
    public let initialTimestamp: UInt32
    /// Capture time of the first frame: the origin of the 90 kHz clock.
    public private(set) var timeOrigin: Instant?

    public init(configuration: Configuration, ssrc: UInt32, initialSequenceNumber: UInt16,
                initialTimestamp: UInt32, initialPictureID: UInt16) throws {
        // The descriptor plus at least one byte of frame.
        guard configuration.payloadBudget >= Self.descriptorLength + 1 else {
            throw CastError(.usage, "an MTU of \(configuration.mtu) leaves \(configuration.payloadBudget) bytes of RTP payload; VP8 needs at least \(Self.descriptorLength + 1)")
        }
        self.configuration = configuration
        self.ssrc = ssrc
        self.nextSequenceNumber = initialSequenceNumber
        self.initialTimestamp = initialTimestamp
        self.nextPictureID = initialPictureID & Self.pictureIDMask
    }

    /// The 90 kHz RTP timestamp of a capture time (RFC 7741 §4.1), wrapping mod 2^32.
    public mutating func timestamp(for captureTime: Instant) -> UInt32 {
        let origin = timeOrigin ?? captureTime
        timeOrigin = origin
        return RTPClock.videoTimestamp(for: captureTime, origin: origin, initial: initialTimestamp)
    }

    /// RFC 7741 §4.3 (and RFC 6386 §9.1): the first byte of a VP8 frame is
    /// `Size0(3) | H | VER(3) | P`; P = 0 marks a key frame.
    public static func isKeyframe(_ frame: some Collection<UInt8>) -> Bool {
        guard let first = frame.first else { return false }
        return first & 0x01 == 0
    }

    /// Packetizes one VP8 frame. An empty frame gives no packets (and uses no PictureID).
    public mutating func packetize(frame: [UInt8], captureTime: Instant) -> Output {
        var packets: [RTPPacket] = []
        let out = packetize(frame: frame, captureTime: captureTime, into: &packets)
        return Output(packets: packets, isKeyframe: out.isKeyframe, pictureID: out.pictureID)
    }

    /// Packetizes one VP8 frame onto the end of `packets`: each payload is the
    /// descriptor, inline, and a slice of `frame` (nothing copied, issue 19).
    public mutating func packetize(frame: [UInt8], captureTime: Instant, into packets: inout [RTPPacket])
        -> (isKeyframe: Bool, pictureID: UInt16) {
        let picture = nextPictureID
        guard !frame.isEmpty else { return (false, picture) }
        nextPictureID = (nextPictureID &+ 1) & Self.pictureIDMask
        let ts = timestamp(for: captureTime)

        // Near-equal pieces (libwebrtc does the same): the last packet is not a
        // runt, so no packet is much later on the wire than the others.
        let room = configuration.payloadBudget - Self.descriptorLength
        let count = (frame.count + room - 1) / room
        let base = frame.count / count, extra = frame.count % count

        packets.reserveCapacity(packets.count + count)
        var start = 0
        for k in 0..<count {
            let size = base + (k < extra ? 1 : 0)
            var head = RTPPayloadHead()
            head.append(0x80 | (k == 0 ? 0x10 : 0))          // X, S on the first packet, PID 0
            head.append(0x80)                                 // I
            head.append(0x80 | UInt8(picture >> 8))           // M, PictureID high 7 bits
            head.append(UInt8(truncatingIfNeeded: picture))   // PictureID low 8 bits
            let h = RTPHeader(marker: k == count - 1, payloadType: configuration.payloadType,
                              sequenceNumber: nextSequenceNumber, timestamp: ts, ssrc: ssrc)
            nextSequenceNumber &+= 1
            packets.append(RTPPacket(header: h, head: head, body: frame[start..<(start + size)]))
            start += size
        }
        return (Self.isKeyframe(frame), picture)
    }
}
