import CastCore

/// An RTP packet (RFC 3550 §5.1): header, payload and optional padding.
///
/// The payload is held as a packetizer lays it out, without copying (issue 19): a
/// payload header of up to 8 bytes inline (`payloadHead`: an FU-A indicator and header,
/// a VP8 descriptor, RTX's OSN in front of either) and the codec's bytes as a slice of
/// the encoded picture (`payloadBody`). The bytes are copied once, when the packet is
/// serialised. `payload` joins the two into an array for readers that want one.
public struct RTPPacket: Sendable {
    public var header: RTPHeader
    public private(set) var payloadHead: RTPPayloadHead
    public private(set) var payloadBody: ArraySlice<UInt8>
    /// Padding bytes after the payload, the last of which holds their count
    /// (RFC 3550 §5.1, P bit). 0 means no padding.
    public var paddingLength: UInt8

    public init(header: RTPHeader, payload: [UInt8], paddingLength: UInt8 = 0) {
        self.init(header: header, head: RTPPayloadHead(), body: payload[...], paddingLength: paddingLength)
    }

    /// A packet whose payload is `head` followed by `body` (a slice of a larger buffer,
    /// which the packet keeps alive).
    public init(header: RTPHeader, head: RTPPayloadHead, body: ArraySlice<UInt8>, paddingLength: UInt8 = 0) {
        self.header = header
        self.payloadHead = head
        self.payloadBody = body
        self.paddingLength = paddingLength
    }

    /// The payload as one array (allocates; the send path writes head and body instead).
    public var payload: [UInt8] {
        get {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(payloadLength)
            bytes.append(contentsOf: payloadHead)
            bytes.append(contentsOf: payloadBody)
            return bytes
        }
        set {
            payloadHead = RTPPayloadHead()
            payloadBody = newValue[...]
        }
    }

    public var payloadLength: Int { payloadHead.count + payloadBody.count }

    /// Bytes this packet occupies on the wire (before SRTP).
    public var encodedLength: Int { header.encodedLength + payloadLength + Int(paddingLength) }

    public func serialize() throws -> [UInt8] {
        var w = ByteWriter(capacity: encodedLength)
        try header.write(into: &w, padding: paddingLength > 0)
        writeBody(into: &w)
        return w.bytes
    }

    /// The wire bytes with `extensions` in place of `header.extensions`, in one buffer
    /// with `trailerCapacity` bytes of spare capacity after them, so that SRTP can
    /// append its tag in place (`SRTPProtector.trailerCapacity`): the one allocation of
    /// a packet on the send path. Built in `buffer`'s storage when it has the room and
    /// nothing else references it (a `BufferPool`'s, given back after an earlier packet
    /// was sent, and moved in here): then no allocation at all (issue 19).
    public func serialize(extensions: RTPInlineExtensions, trailerCapacity: Int,
                          into buffer: consuming [UInt8] = []) throws -> [UInt8] {
        var h = header
        h.extensions = nil
        let length = h.encodedLength + extensions.encodedLength + payloadLength + Int(paddingLength)
        var w = ByteWriter(reusing: consume buffer, capacity: length + max(0, trailerCapacity))
        try h.write(into: &w, padding: paddingLength > 0, inlineExtensions: extensions.isEmpty ? nil : extensions)
        writeBody(into: &w)
        return w.take()
    }

    private func writeBody(into w: inout ByteWriter) {
        for b in payloadHead { w.u8(b) }   // not a generic append: unoptimised, that allocates per byte
        w.append(payloadBody)
        if paddingLength > 0 {
            w.zeros(Int(paddingLength) - 1)
            w.u8(paddingLength)
        }
    }

    /// Parses a packet. Malformed input throws `CastError` (`.malformed` or
    /// `.truncated`); it never traps. The payload is a slice of `bytes`.
    public static func parse(_ bytes: [UInt8]) throws -> RTPPacket {
        var r = ByteReader(bytes)
        let (header, padded) = try RTPHeader.read(from: &r)
        var body = r.rest()
        var pad: UInt8 = 0
        if padded {
            // RFC 3550 §5.1: the last octet counts the padding, itself included.
            guard let last = body.last, last > 0, Int(last) <= body.count else {
                throw CastError(.malformed, "RTP padding count does not fit the packet")
            }
            pad = last
            body = body.dropLast(Int(last))
        }
        return RTPPacket(header: header, head: RTPPayloadHead(), body: body, paddingLength: pad)
    }
}

extension RTPPacket: Equatable {
    /// Equal when header, payload bytes and padding are, however the payload is split.
    public static func == (a: RTPPacket, b: RTPPacket) -> Bool {
        a.header == b.header && a.paddingLength == b.paddingLength && a.payloadLength == b.payloadLength
            && a.payload == b.payload
    }
}

/// Up to 8 payload-header bytes held inline in an `RTPPacket`, so that a packetizer's
/// FU-A or VP8 header, and RTX's OSN in front of it, need no array of their own.
public struct RTPPayloadHead: RandomAccessCollection, Equatable, Sendable {
    public static let capacity = 8
    /// The bytes from the most significant end; the bits past `count` bytes are zero.
    private var word: UInt64 = 0
    public private(set) var count = 0

    public init() {}

    /// nil when `bytes` holds more than `capacity` bytes.
    public init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count <= Self.capacity else { return nil }
        for b in bytes { append(b) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(i: Int) -> UInt8 {
        precondition(i >= 0 && i < count, "payload head index \(i) out of range 0..<\(count)")
        return UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * i))
    }

    /// Adds a byte at the end; false (and nothing added) when full.
    @discardableResult
    public mutating func append(_ byte: UInt8) -> Bool {
        guard count < Self.capacity else { return false }
        word |= UInt64(byte) << UInt64(56 - 8 * count)
        count += 1
        return true
    }

    /// These bytes with a big-endian 16-bit value in front (RTX's OSN, RFC 4588 §4);
    /// nil when that would pass `capacity`.
    public func prepending(_ value: UInt16) -> RTPPayloadHead? {
        guard count + 2 <= Self.capacity else { return nil }
        var h = RTPPayloadHead()
        h.word = UInt64(value) << 48 | word >> 16
        h.count = count + 2
        return h
    }
}
