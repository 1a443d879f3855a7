import CastCore

/// The STUN attributes castd reads and writes (RFC 8489 §14, RFC 8445 §16.1,
/// RFC 8656 §18 for TURN).
/// Any other attribute is kept as `.other` so that a message survives a
/// parse/serialize round trip byte for byte.
///
///     0                   1                   2                   3
///     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |         Type                  |            Length             |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |                         Value (variable)                ....
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///
/// Length excludes the padding to the next 32-bit boundary (§14).
public enum StunAttribute: Equatable, Sendable {
    case mappedAddress(SocketAddress)
    case xorMappedAddress(SocketAddress)
    case username(String)
    case messageIntegrity([UInt8])
    case messageIntegritySHA256([UInt8])
    case fingerprint(UInt32)
    case errorCode(code: Int, reason: String)
    case unknownAttributes([UInt16])
    case software(String)
    case priority(UInt32)
    case useCandidate
    case iceControlled(tieBreaker: UInt64)
    case iceControlling(tieBreaker: UInt64)
    /// RFC 8489 §14.9: kept as text for messages; the long-term key hashes its UTF-8 bytes.
    case realm(String)
    /// RFC 8489 §14.10: opaque bytes, echoed exactly as the server sent them.
    case nonce([UInt8])
    /// RFC 8489 §14.11: the algorithm number and its parameters.
    case passwordAlgorithm(StunPasswordAlgorithm)
    /// RFC 8489 §14.12: what the server offers, in its order.
    case passwordAlgorithms([StunPasswordAlgorithm])
    /// RFC 8656 §18.1: the channel number in the high 16 bits, then RFFU (zero).
    case channelNumber(UInt16)
    /// RFC 8656 §18.2: seconds.
    case lifetime(UInt32)
    /// RFC 8656 §18.3: XOR'd like XOR-MAPPED-ADDRESS.
    case xorPeerAddress(SocketAddress)
    /// RFC 8656 §18.4: the application data of a Send or Data indication.
    case data([UInt8])
    /// RFC 8656 §18.5.
    case xorRelayedAddress(SocketAddress)
    /// RFC 8656 §18.6: the IP protocol number (17 = UDP), then 24 RFFU bits.
    case requestedTransport(UInt8)
    /// RFC 8656 §18.8: empty.
    case dontFragment
    case other(type: UInt16, value: [UInt8])

    /// Attribute type codepoints (IANA "STUN Attributes").
    public enum Kind {
        public static let mappedAddress: UInt16 = 0x0001
        public static let username: UInt16 = 0x0006
        public static let messageIntegrity: UInt16 = 0x0008
        public static let errorCode: UInt16 = 0x0009
        public static let unknownAttributes: UInt16 = 0x000A
        public static let messageIntegritySHA256: UInt16 = 0x001C
        public static let xorMappedAddress: UInt16 = 0x0020
        public static let priority: UInt16 = 0x0024
        public static let useCandidate: UInt16 = 0x0025
        public static let software: UInt16 = 0x8022
        public static let fingerprint: UInt16 = 0x8028
        public static let iceControlled: UInt16 = 0x8029
        public static let iceControlling: UInt16 = 0x802A
        // RFC 8489 §18.3.1 and RFC 8656 §18 (IANA "STUN Attributes").
        public static let channelNumber: UInt16 = 0x000C
        public static let lifetime: UInt16 = 0x000D
        public static let xorPeerAddress: UInt16 = 0x0012
        public static let data: UInt16 = 0x0013
        public static let realm: UInt16 = 0x0014
        public static let nonce: UInt16 = 0x0015
        public static let xorRelayedAddress: UInt16 = 0x0016
        public static let requestedTransport: UInt16 = 0x0019
        public static let dontFragment: UInt16 = 0x001A
        public static let passwordAlgorithm: UInt16 = 0x001D
        public static let passwordAlgorithms: UInt16 = 0x8002
    }

    public var type: UInt16 {
        switch self {
        case .mappedAddress: return Kind.mappedAddress
        case .xorMappedAddress: return Kind.xorMappedAddress
        case .username: return Kind.username
        case .messageIntegrity: return Kind.messageIntegrity
        case .messageIntegritySHA256: return Kind.messageIntegritySHA256
        case .fingerprint: return Kind.fingerprint
        case .errorCode: return Kind.errorCode
        case .unknownAttributes: return Kind.unknownAttributes
        case .software: return Kind.software
        case .priority: return Kind.priority
        case .useCandidate: return Kind.useCandidate
        case .iceControlled: return Kind.iceControlled
        case .iceControlling: return Kind.iceControlling
        case .realm: return Kind.realm
        case .nonce: return Kind.nonce
        case .passwordAlgorithm: return Kind.passwordAlgorithm
        case .passwordAlgorithms: return Kind.passwordAlgorithms
        case .channelNumber: return Kind.channelNumber
        case .lifetime: return Kind.lifetime
        case .xorPeerAddress: return Kind.xorPeerAddress
        case .data: return Kind.data
        case .xorRelayedAddress: return Kind.xorRelayedAddress
        case .requestedTransport: return Kind.requestedTransport
        case .dontFragment: return Kind.dontFragment
        case .other(let t, _): return t
        }
    }

    /// The value bytes (without header and padding). XOR'd addresses need the
    /// transaction id (RFC 8489 §14.2).
    func encodeValue(transactionID: StunTransactionID) -> [UInt8] {
        switch self {
        case .mappedAddress(let a): return Self.encodeAddress(a, xor: nil)
        case .xorMappedAddress(let a), .xorPeerAddress(let a), .xorRelayedAddress(let a):
            return Self.encodeAddress(a, xor: transactionID)
        case .username(let s), .software(let s), .realm(let s): return Array(s.utf8)
        case .messageIntegrity(let b), .messageIntegritySHA256(let b), .nonce(let b), .data(let b): return b
        case .fingerprint(let v), .priority(let v), .lifetime(let v):
            var w = ByteWriter(capacity: 4); w.u32(v); return w.bytes
        case .errorCode(let code, let reason):
            // §14.8: 21 reserved bits, class (hundreds, 3 bits), number (0–99).
            var w = ByteWriter(capacity: 4 + reason.utf8.count)
            w.u16(0); w.u8(UInt8((code / 100) & 0x7)); w.u8(UInt8(code % 100)); w.append(reason.utf8)
            return w.bytes
        case .unknownAttributes(let types):
            var w = ByteWriter(capacity: types.count * 2)
            for t in types { w.u16(t) }
            return w.bytes
        case .useCandidate, .dontFragment: return []
        case .channelNumber(let n):
            var w = ByteWriter(capacity: 4); w.u16(n); w.u16(0); return w.bytes
        case .requestedTransport(let p): return [p, 0, 0, 0]
        case .passwordAlgorithm(let a):
            var w = ByteWriter(capacity: 4 + a.parameters.count); a.write(to: &w); return w.bytes
        case .passwordAlgorithms(let list):
            var w = ByteWriter(capacity: 8 * list.count)
            for a in list { a.write(to: &w) }
            return w.bytes
        case .iceControlled(let t), .iceControlling(let t):
            var w = ByteWriter(capacity: 8); w.u64(t); return w.bytes
        case .other(_, let v): return v
        }
    }

    /// §14.1 / §14.2:
    ///    |0 0 0 0 0 0 0 0|    Family     |         (X-)Port              |
    ///    |                 (X-)Address (32 bits or 128 bits)             |
    static func encodeAddress(_ a: SocketAddress, xor tid: StunTransactionID?) -> [UInt8] {
        var w = ByteWriter(capacity: 20)
        w.u8(0)
        w.u8(a.ip.isIPv6 ? 0x02 : 0x01)
        var addr = a.ip.bytes
        if let tid {
            w.u16(a.port ^ UInt16(StunMessage.magicCookie >> 16))
            let mask = StunMessage.magicCookieBytes + tid.bytes
            for i in addr.indices { addr[i] ^= mask[i] }
        } else {
            w.u16(a.port)
        }
        w.append(addr)
        return w.bytes
    }

    static func decodeAddress(_ v: ArraySlice<UInt8>, xor tid: StunTransactionID?) throws -> SocketAddress {
        var r = ByteReader(Array(v))
        _ = try r.u8("the address reserved byte")
        let family = try r.u8("the address family")
        var port = try r.u16("the port")
        let n: Int
        switch family {
        case 0x01: n = 4
        case 0x02: n = 16
        default: throw CastError(.malformed, "STUN address family \(family) is neither IPv4 (1) nor IPv6 (2)")
        }
        guard r.remaining == n else {
            throw CastError(.malformed, "STUN address of family \(family) has \(r.remaining) address bytes, expected \(n)")
        }
        var addr = Array(try r.take(n, "the address"))
        if let tid {
            port ^= UInt16(StunMessage.magicCookie >> 16)
            let mask = StunMessage.magicCookieBytes + tid.bytes
            for i in addr.indices { addr[i] ^= mask[i] }
        }
        return SocketAddress(IPAddress(bytes: addr)!, port)
    }

    static func decode(type: UInt16, value v: ArraySlice<UInt8>, transactionID: StunTransactionID) throws -> StunAttribute {
        func exact(_ n: Int, _ name: String) throws {
            guard v.count == n else {
                throw CastError(.malformed, "STUN \(name) has length \(v.count), expected \(n)")
            }
        }
        func u32() -> UInt32 { v.reduce(0) { $0 << 8 | UInt32($1) } }
        func u64() -> UInt64 { v.reduce(0) { $0 << 8 | UInt64($1) } }
        switch type {
        case Kind.mappedAddress: return .mappedAddress(try decodeAddress(v, xor: nil))
        case Kind.xorMappedAddress: return .xorMappedAddress(try decodeAddress(v, xor: transactionID))
        case Kind.xorPeerAddress: return .xorPeerAddress(try decodeAddress(v, xor: transactionID))
        case Kind.xorRelayedAddress: return .xorRelayedAddress(try decodeAddress(v, xor: transactionID))
        case Kind.realm: return .realm(String(decoding: v, as: UTF8.self))
        case Kind.nonce: return .nonce(Array(v))
        case Kind.data: return .data(Array(v))
        case Kind.lifetime: try exact(4, "LIFETIME"); return .lifetime(u32())
        case Kind.dontFragment: try exact(0, "DONT-FRAGMENT"); return .dontFragment
        case Kind.channelNumber:
            try exact(4, "CHANNEL-NUMBER")
            return .channelNumber(UInt16(v[v.startIndex]) << 8 | UInt16(v[v.startIndex + 1]))
        case Kind.requestedTransport:
            try exact(4, "REQUESTED-TRANSPORT")
            return .requestedTransport(v[v.startIndex])
        case Kind.passwordAlgorithm:
            var r = ByteReader(Array(v))
            let a = try StunPasswordAlgorithm.read(&r)
            guard r.isAtEnd else { throw CastError(.malformed, "STUN PASSWORD-ALGORITHM has \(r.remaining) trailing bytes") }
            return .passwordAlgorithm(a)
        case Kind.passwordAlgorithms:
            var r = ByteReader(Array(v))
            var list: [StunPasswordAlgorithm] = []
            while !r.isAtEnd { list.append(try StunPasswordAlgorithm.read(&r)) }
            return .passwordAlgorithms(list)
        case Kind.username:
            guard v.count <= 763 else { throw CastError(.malformed, "STUN USERNAME longer than 763 bytes (RFC 8489 §14.3)") }
            return .username(String(decoding: v, as: UTF8.self))
        case Kind.software: return .software(String(decoding: v, as: UTF8.self))
        case Kind.messageIntegrity: try exact(20, "MESSAGE-INTEGRITY"); return .messageIntegrity(Array(v))
        case Kind.messageIntegritySHA256:
            // §14.6: 16 to 32 bytes, a multiple of 4.
            guard v.count >= 16, v.count <= 32, v.count % 4 == 0 else {
                throw CastError(.malformed, "STUN MESSAGE-INTEGRITY-SHA256 has length \(v.count)")
            }
            return .messageIntegritySHA256(Array(v))
        case Kind.fingerprint: try exact(4, "FINGERPRINT"); return .fingerprint(u32())
        case Kind.priority: try exact(4, "PRIORITY"); return .priority(u32())
        case Kind.useCandidate: try exact(0, "USE-CANDIDATE"); return .useCandidate
        case Kind.iceControlled: try exact(8, "ICE-CONTROLLED"); return .iceControlled(tieBreaker: u64())
        case Kind.iceControlling: try exact(8, "ICE-CONTROLLING"); return .iceControlling(tieBreaker: u64())
        case Kind.errorCode:
            guard v.count >= 4 else { throw CastError(.malformed, "STUN ERROR-CODE shorter than 4 bytes") }
            let s = v.startIndex
            // §14.8: the number is 0–99; anything else cannot be a code.
            guard v[s + 3] <= 99 else { throw CastError(.malformed, "STUN ERROR-CODE number \(v[s + 3]) is above 99") }
            let code = Int(v[s + 2] & 0x7) * 100 + Int(v[s + 3])
            return .errorCode(code: code, reason: String(decoding: v.dropFirst(4), as: UTF8.self))
        case Kind.unknownAttributes:
            guard v.count % 2 == 0 else { throw CastError(.malformed, "STUN UNKNOWN-ATTRIBUTES has odd length \(v.count)") }
            var out: [UInt16] = []
            var i = v.startIndex
            while i < v.endIndex { out.append(UInt16(v[i]) << 8 | UInt16(v[i + 1])); i += 2 }
            return .unknownAttributes(out)
        default:
            return .other(type: type, value: Array(v))
        }
    }
}


/// One entry of PASSWORD-ALGORITHM(S) (RFC 8489 §14.11, §14.12):
///
///    |          Algorithm            |  Algorithm Parameters Length  |
///    |                    Algorithm Parameters (variable)           ...
///
/// The parameters are padded to 4 bytes inside the attribute.
public struct StunPasswordAlgorithm: Equatable, Sendable {
    public var number: UInt16
    public var parameters: [UInt8]

    /// RFC 8489 §18.5 (IANA "STUN Password Algorithms").
    public static let md5 = StunPasswordAlgorithm(number: 0x0001, parameters: [])
    public static let sha256 = StunPasswordAlgorithm(number: 0x0002, parameters: [])

    public init(number: UInt16, parameters: [UInt8]) {
        self.number = number
        self.parameters = parameters
    }

    func write(to w: inout ByteWriter) {
        w.u16(number)
        w.u16(UInt16(truncatingIfNeeded: parameters.count))
        w.append(parameters)
        w.zeros((4 - parameters.count % 4) % 4)
    }

    static func read(_ r: inout ByteReader) throws -> StunPasswordAlgorithm {
        let number = try r.u16("a password algorithm")
        let n = Int(try r.u16("a password algorithm parameters length"))
        let p = Array(try r.take(n, "password algorithm parameters"))
        try r.skip((4 - n % 4) % 4, "password algorithm padding")
        return StunPasswordAlgorithm(number: number, parameters: p)
    }
}
