import CastCore

/// Wraps retransmissions in an RTX stream (RFC 4588 §4): own SSRC, payload type
/// and sequence numbers; the payload is the original sequence number (OSN)
/// followed by the original payload. Timestamp and marker are kept.
///
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                         RTP Header                            |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |            OSN                |                               |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               |
/// |                  Original RTP Packet Payload                  |
public struct RTXEncoder: Sendable {
    public let ssrc: UInt32
    public let payloadType: UInt8
    public private(set) var nextSequenceNumber: UInt16

    public init(ssrc: UInt32, payloadType: UInt8, initialSequenceNumber: UInt16) {
        self.ssrc = ssrc
        self.payloadType = payloadType
        self.nextSequenceNumber = initialSequenceNumber
    }

    public mutating func wrap(_ original: RTPPacket) -> RTPPacket {
        var h = original.header
        h.ssrc = ssrc
        h.payloadType = payloadType
        h.sequenceNumber = nextSequenceNumber
        h.csrcs = original.header.csrcs
        nextSequenceNumber &+= 1
        let osn = original.header.sequenceNumber
        // Padding is not carried over: it belongs to the original packet's size. The OSN
        // goes in front of the original's inline payload head, so the payload is not
        // copied here (it is written once, when the packet is serialised).
        if let head = original.payloadHead.prepending(osn) {
            return RTPPacket(header: h, head: head, body: original.payloadBody)
        }
        return RTPPacket(header: h, payload: [UInt8(osn >> 8), UInt8(osn & 0xff)] + original.payload)
    }

    /// The original packet back from an RTX packet (for tests and receivers).
    public static func unwrap(_ rtx: RTPPacket, originalSSRC: UInt32, originalPayloadType: UInt8) throws -> RTPPacket {
        let payload = rtx.payload
        guard payload.count >= 2 else { throw CastError(.malformed, "RTX packet shorter than its 2-byte OSN") }
        var h = rtx.header
        h.ssrc = originalSSRC
        h.payloadType = originalPayloadType
        h.sequenceNumber = UInt16(payload[0]) << 8 | UInt16(payload[1])
        return RTPPacket(header: h, payload: Array(payload.dropFirst(2)))
    }
}
