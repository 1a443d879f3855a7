import CastCore

/// One RFC 8285 header-extension element: a local identifier negotiated in SDP
/// (`a=extmap`) and its bytes.
public struct RTPHeaderExtension: Equatable, Sendable {
    public var id: UInt8
    public var data: [UInt8]

    public init(id: UInt8, data: [UInt8]) {
        self.id = id
        self.data = data
    }
}

/// The extension block of an RTP header (RFC 3550 §5.3.1), read as RFC 8285
/// elements when its profile says so, kept as opaque bytes otherwise.
public enum RTPExtensionBlock: Equatable, Sendable {
    /// RFC 8285 §4.2, profile 0xBEDE: ids 1…14, 1…16 data bytes.
    case oneByte([RTPHeaderExtension])
    /// RFC 8285 §4.3, profile 0x100 + 4 application bits: ids 1…255, 0…255 bytes.
    case twoByte(appBits: UInt8, [RTPHeaderExtension])
    /// Any other profile: its 16-bit identifier and the raw words.
    case opaque(profile: UInt16, data: [UInt8])

    public static let oneByteProfile: UInt16 = 0xBEDE
    public static let twoByteProfile: UInt16 = 0x1000

    /// The elements of an RFC 8285 block (empty for an opaque one).
    public var elements: [RTPHeaderExtension] {
        switch self {
        case .oneByte(let e), .twoByte(_, let e): return e
        case .opaque: return []
        }
    }

    /// The element with this id, if present.
    public func element(id: UInt8) -> [UInt8]? {
        elements.first(where: { $0.id == id })?.data
    }

    /// Picks the one-byte form when every element allows it (RFC 8285 §4.1.1:
    /// the one-byte form is preferred; the two-byte form is needed for ids above
    /// 14, empty elements or more than 16 bytes).
    public static func best(for elements: [RTPHeaderExtension]) -> RTPExtensionBlock {
        let fitsOneByte = elements.allSatisfy { (1...14).contains($0.id) && (1...16).contains($0.data.count) }
        return fitsOneByte ? .oneByte(elements) : .twoByte(appBits: 0, elements)
    }

    /// Bytes this block occupies in a header, including its 4-byte preamble and padding.
    public var encodedLength: Int {
        let body: Int
        switch self {
        case .oneByte(let e): body = e.reduce(0) { $0 + 1 + $1.data.count }
        case .twoByte(_, let e): body = e.reduce(0) { $0 + 2 + $1.data.count }
        case .opaque(_, let d): body = d.count
        }
        return 4 + (body + 3) / 4 * 4
    }

    //  0                   1                   2                   3
    //  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    // +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    // |      defined by profile       |           length              |
    // +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    // |                        header extension                       |
    // (RFC 3550 §5.3.1; length counts 32-bit words after this preamble)
    func write(into w: inout ByteWriter) throws {
        let start = w.count
        switch self {
        case .oneByte(let elements):
            w.u16(Self.oneByteProfile)
            w.u16(0)
            for e in elements {
                // RFC 8285 §4.2: id 0 is padding and 15 is reserved; len field is length-1.
                guard (1...14).contains(e.id), (1...16).contains(e.data.count) else {
                    throw CastError(.usage, "a one-byte RTP header extension needs an id in 1…14 and 1…16 bytes (id \(e.id), \(e.data.count) bytes)")
                }
                w.u8(e.id << 4 | UInt8(e.data.count - 1))
                w.append(e.data)
            }
        case .twoByte(let appBits, let elements):
            w.u16(Self.twoByteProfile | UInt16(appBits & 0x0f))
            w.u16(0)
            for e in elements {
                guard e.id != 0, e.data.count <= 255 else {
                    throw CastError(.usage, "a two-byte RTP header extension needs an id in 1…255 and at most 255 bytes (id \(e.id), \(e.data.count) bytes)")
                }
                w.u8(e.id)
                w.u8(UInt8(e.data.count))
                w.append(e.data)
            }
        case .opaque(let profile, let data):
            w.u16(profile)
            w.u16(0)
            w.append(data)
        }
        let body = w.count - start - 4
        let padded = (body + 3) / 4 * 4
        w.zeros(padded - body)
        guard padded / 4 <= Int(UInt16.max) else {
            throw CastError(.usage, "RTP header extension block too long (\(padded) bytes)")
        }
        w.set16(UInt16(padded / 4), at: start + 2)
    }

    /// Parses the block after the fixed header. Tolerant (RFC 8285 §4.1.2): padding
    /// bytes are skipped anywhere, id 15 in the one-byte form ends parsing, and an
    /// element running past the block is an error.
    static func read(from r: inout ByteReader) throws -> RTPExtensionBlock {
        let profile = try r.u16("the RTP extension profile")
        let words = try r.u16("the RTP extension length")
        let body = Array(try r.take(Int(words) * 4, "the RTP header extension"))
        if profile == oneByteProfile {
            var out: [RTPHeaderExtension] = []
            var i = 0
            while i < body.count {
                let b = body[i]
                let id = b >> 4
                if id == 0 { i += 1; continue }      // padding byte
                if id == 15 { break }                 // reserved: stop processing
                let len = Int(b & 0x0f) + 1
                guard i + 1 + len <= body.count else {
                    throw CastError(.malformed, "RTP one-byte header extension element \(id) runs past its block")
                }
                out.append(RTPHeaderExtension(id: id, data: Array(body[(i + 1)..<(i + 1 + len)])))
                i += 1 + len
            }
            return .oneByte(out)
        }
        if profile & 0xfff0 == twoByteProfile {
            var out: [RTPHeaderExtension] = []
            var i = 0
            while i < body.count {
                let id = body[i]
                if id == 0 { i += 1; continue }       // padding byte
                guard i + 2 <= body.count else {
                    throw CastError(.malformed, "RTP two-byte header extension element \(id) has no length byte")
                }
                let len = Int(body[i + 1])
                guard i + 2 + len <= body.count else {
                    throw CastError(.malformed, "RTP two-byte header extension element \(id) runs past its block")
                }
                out.append(RTPHeaderExtension(id: id, data: Array(body[(i + 2)..<(i + 2 + len)])))
                i += 2 + len
            }
            return .twoByte(appBits: UInt8(profile & 0x0f), out)
        }
        return .opaque(profile: profile, data: body)
    }
}

/// Values of the header extensions castd writes. Each is identified in SDP by
/// its URI; the numeric id comes from the negotiated `a=extmap`.
public enum RTPExtensionValue {
    public static let absSendTimeURI = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    public static let transportCCURI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    public static let playoutDelayURI = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"

    /// abs-send-time: 24 bits, seconds in 6.18 fixed point, wrapping every 64 s.
    /// Only differences matter to the receiver, so any monotonic origin works.
    public static func absSendTime(_ t: Instant) -> [UInt8] {
        let v = absSendTimeValue(t)
        return [UInt8(v >> 16), UInt8((v >> 8) & 0xff), UInt8(v & 0xff)]
    }

    /// abs-send-time as its 24-bit value (the send path stamps it without an array).
    public static func absSendTimeValue(_ t: Instant) -> UInt32 {
        let ns = UInt64(bitPattern: t.nanoseconds)
        let secs = ns / 1_000_000_000
        let frac = ((ns % 1_000_000_000) << 18) / 1_000_000_000
        return UInt32(truncatingIfNeeded: (secs << 18) | frac) & 0xff_ffff
    }

    /// Reads abs-send-time back as 6.18 fixed-point units.
    public static func parseAbsSendTime(_ d: [UInt8]) throws -> UInt32 {
        guard d.count == 3 else { throw CastError(.malformed, "abs-send-time needs 3 bytes, got \(d.count)") }
        return UInt32(d[0]) << 16 | UInt32(d[1]) << 8 | UInt32(d[2])
    }

    /// transport-wide-cc: a 16-bit transport-wide sequence number.
    public static func transportSequence(_ s: UInt16) -> [UInt8] { [UInt8(s >> 8), UInt8(s & 0xff)] }

    public static func parseTransportSequence(_ d: [UInt8]) throws -> UInt16 {
        guard d.count == 2 else { throw CastError(.malformed, "transport-wide-cc needs 2 bytes, got \(d.count)") }
        return UInt16(d[0]) << 8 | UInt16(d[1])
    }

    /// playout-delay: 12-bit minimum and maximum, in 10 ms units (0…40.95 s).
    public static func playoutDelay(minimum: Duration, maximum: Duration) -> [UInt8] {
        let v = playoutDelayValue(minimum: minimum, maximum: maximum)
        return [UInt8(v >> 16), UInt8((v >> 8) & 0xff), UInt8(v & 0xff)]
    }

    /// playout-delay as its 24-bit value: minimum in the high 12 bits, maximum in the low 12.
    public static func playoutDelayValue(minimum: Duration, maximum: Duration) -> UInt32 {
        func units(_ d: Duration) -> UInt32 {
            UInt32(clamping: max(0, min(4095, d.totalNanoseconds / 10_000_000)))
        }
        return units(minimum) << 12 | units(maximum)
    }

    /// The (minimum, maximum) playout delay in 10 ms units.
    public static func parsePlayoutDelay(_ d: [UInt8]) throws -> (minimum: UInt16, maximum: UInt16) {
        guard d.count == 3 else { throw CastError(.malformed, "playout-delay needs 3 bytes, got \(d.count)") }
        return (UInt16(d[0]) << 4 | UInt16(d[1] >> 4), UInt16(d[1] & 0x0f) << 8 | UInt16(d[2]))
    }
}
