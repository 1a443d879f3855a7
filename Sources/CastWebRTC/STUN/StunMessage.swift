import CastCore
import CastOpenSSL

/// The 96-bit STUN transaction id (RFC 8489 §5).
public struct StunTransactionID: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 12 else { return nil }
        self.bytes = bytes
    }

    init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// §5: "uniformly and randomly chosen from the interval 0 .. 2**96-1".
    public static func random() -> StunTransactionID { StunTransactionID(unchecked: SecureRandom.bytes(12)) }

    public var description: String { Hex.encode(bytes) }
}

/// STUN message class (RFC 8489 §5).
public enum StunClass: UInt8, Sendable {
    case request = 0b00, indication = 0b01, successResponse = 0b10, errorResponse = 0b11
}

/// A STUN message: header plus attributes in wire order.
///
///     0                   1                   2                   3
///     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |0 0|     STUN Message Type     |         Message Length        |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |                         Magic Cookie                          |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |                     Transaction ID (96 bits)                  |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///
/// Message type bits (§5): M11..M7 C1 M6..M4 C0 M3..M0.
public struct StunMessage: Equatable, Sendable {
    public static let magicCookie: UInt32 = 0x2112_A442
    static let magicCookieBytes: [UInt8] = [0x21, 0x12, 0xA4, 0x42]
    /// RFC 8489 §14.7: the CRC-32 is XOR'ed with 0x5354554e ("STUN").
    static let fingerprintXor: UInt32 = 0x5354_554E
    public static let bindingMethod: UInt16 = 0x001
    // RFC 8656 §17 (IANA "STUN Methods").
    public static let allocateMethod: UInt16 = 0x003
    public static let refreshMethod: UInt16 = 0x004
    public static let sendMethod: UInt16 = 0x006
    public static let dataMethod: UInt16 = 0x007
    public static let createPermissionMethod: UInt16 = 0x008
    public static let channelBindMethod: UInt16 = 0x009

    public var method: UInt16
    public var messageClass: StunClass
    public var transactionID: StunTransactionID
    public var attributes: [StunAttribute]

    /// The bytes this message was decoded from (nil for messages built locally);
    /// integrity and fingerprint are verified over them.
    public private(set) var raw: [UInt8]?
    /// Offset of the MESSAGE-INTEGRITY attribute header in `raw`.
    private var integrityOffset: Int?
    /// Offset of the MESSAGE-INTEGRITY-SHA256 attribute header in `raw`.
    private var integritySHA256Offset: Int?
    /// Offset of the FINGERPRINT attribute header in `raw`.
    private var fingerprintOffset: Int?

    public init(method: UInt16 = StunMessage.bindingMethod, class messageClass: StunClass,
                transactionID: StunTransactionID, attributes: [StunAttribute] = []) {
        self.method = method
        self.messageClass = messageClass
        self.transactionID = transactionID
        self.attributes = attributes
    }

    public static func == (a: StunMessage, b: StunMessage) -> Bool {
        a.method == b.method && a.messageClass == b.messageClass
            && a.transactionID == b.transactionID && a.attributes == b.attributes
    }

    var messageType: UInt16 {
        let m = method & 0x0FFF, c = UInt16(messageClass.rawValue)
        return (m & 0x0F80) << 2 | (c & 0b10) << 7 | (m & 0x0070) << 1 | (c & 0b01) << 4 | (m & 0x000F)
    }

    // MARK: Encoding

    /// Serializes the attributes, then appends MESSAGE-INTEGRITY (HMAC-SHA1 keyed
    /// with `integrityKey`, §14.5) and FINGERPRINT (§14.7) when asked. Padding is zeros.
    /// For ICE the key is the peer's password (short-term credentials, §9.1.1).
    /// With `sha256`, MESSAGE-INTEGRITY-SHA256 (HMAC-SHA256, §14.6) replaces MESSAGE-INTEGRITY,
    /// as a client must once the server offered SHA-256 in PASSWORD-ALGORITHMS (§9.2.5).
    public func encode(integrityKey: [UInt8]? = nil, sha256: Bool = false, fingerprint: Bool = false) -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        w.u16(messageType)
        w.u16(0)
        w.u32(Self.magicCookie)
        w.append(transactionID.bytes)
        for a in attributes { Self.append(a, to: &w, transactionID: transactionID) }
        if let key = integrityKey, sha256 {
            // §14.6: like MESSAGE-INTEGRITY, over a length that ends just after this 36-byte attribute.
            w.set16(UInt16(w.count - 20 + 36), at: 2)
            let mac = Digest.sha256.hmac(key: key, w.bytes)
            Self.append(.messageIntegritySHA256(mac), to: &w, transactionID: transactionID)
        } else if let key = integrityKey {
            // §14.5: the length field counts up to and including MESSAGE-INTEGRITY.
            w.set16(UInt16(w.count - 20 + 24), at: 2)
            let mac = w.bytes.withUnsafeBytes { HMACSHA1.mac(key: key, $0) }
            Self.append(.messageIntegrity(mac), to: &w, transactionID: transactionID)
        }
        if fingerprint {
            w.set16(UInt16(w.count - 20 + 8), at: 2)
            let crc = CRC32.checksum(w.bytes) ^ Self.fingerprintXor
            Self.append(.fingerprint(crc), to: &w, transactionID: transactionID)
        }
        w.set16(UInt16(w.count - 20), at: 2)
        return w.bytes
    }

    private static func append(_ a: StunAttribute, to w: inout ByteWriter, transactionID: StunTransactionID) {
        let value = a.encodeValue(transactionID: transactionID)
        w.u16(a.type)
        w.u16(UInt16(value.count))
        w.append(value)
        w.zeros((4 - value.count % 4) % 4)
    }

    // MARK: Decoding

    /// A cheap test (RFC 8489 §5, RFC 7983): top two bits zero, magic cookie present,
    /// length a multiple of four that matches the datagram.
    public static func looksLikeStun(_ d: [UInt8]) -> Bool {
        guard d.count >= 20, d[0] & 0xC0 == 0, d[4] == 0x21, d[5] == 0x12, d[6] == 0xA4, d[7] == 0x42 else {
            return false
        }
        let len = Int(d[2]) << 8 | Int(d[3])
        return len % 4 == 0 && len == d.count - 20
    }

    /// Parses one datagram. Throws `.malformed`/`.truncated` on anything that is not
    /// a well-formed STUN message; never traps.
    public init(decoding d: [UInt8]) throws {
        guard d.count >= 20 else { throw CastError(.truncated, "STUN message shorter than its 20-byte header") }
        var r = ByteReader(d)
        let type = try r.u16()
        guard type & 0xC000 == 0 else { throw CastError(.malformed, "STUN message type has its top bits set") }
        let length = Int(try r.u16())
        guard try r.u32() == Self.magicCookie else { throw CastError(.malformed, "STUN magic cookie missing") }
        guard length % 4 == 0 else { throw CastError(.malformed, "STUN length \(length) is not a multiple of 4") }
        guard length == d.count - 20 else {
            throw CastError(.malformed, "STUN length \(length) does not match the \(d.count - 20) bytes after the header")
        }
        let tid = StunTransactionID(unchecked: Array(try r.take(12)))
        method = (type & 0x3E00) >> 2 | (type & 0x00E0) >> 1 | (type & 0x000F)
        messageClass = StunClass(rawValue: UInt8((type & 0x0100) >> 7 | (type & 0x0010) >> 4))!
        transactionID = tid
        attributes = []
        raw = d
        while !r.isAtEnd {
            let start = r.offset
            let t = try r.u16("an attribute type")
            let n = Int(try r.u16("an attribute length"))
            let v = try r.take(n, "an attribute value")
            try r.skip((4 - n % 4) % 4, "attribute padding")
            // §14.7: nothing may follow FINGERPRINT.
            if fingerprintOffset != nil {
                throw CastError(.malformed, "STUN attribute 0x\(String(t, radix: 16)) follows FINGERPRINT")
            }
            let a = try StunAttribute.decode(type: t, value: v, transactionID: tid)
            switch a {
            case .messageIntegrity:
                if integrityOffset == nil { integrityOffset = start }
            case .fingerprint:
                fingerprintOffset = start
            case .messageIntegritySHA256:
                if integritySHA256Offset == nil { integritySHA256Offset = start }
            default:
                // §14.5: attributes after MESSAGE-INTEGRITY (other than the SHA256 variant and
                // FINGERPRINT) are ignored by the receiver; we drop them so no one acts on them.
                if integrityOffset != nil, t != StunAttribute.Kind.messageIntegritySHA256 { continue }
            }
            attributes.append(a)
        }
    }

    /// True when the message carries FINGERPRINT and it matches (§14.7).
    public var hasValidFingerprint: Bool {
        guard let raw, let off = fingerprintOffset else { return false }
        let want = CRC32.checksum(raw[0..<off]) ^ Self.fingerprintXor
        for case .fingerprint(let got) in attributes { return got == want }
        return false
    }

    public var hasFingerprint: Bool { fingerprintOffset != nil }
    public var hasIntegrity: Bool { integrityOffset != nil }
    public var hasIntegritySHA256: Bool { integritySHA256Offset != nil }

    /// Checks MESSAGE-INTEGRITY with `key` (§14.5): HMAC-SHA1 over the message up to
    /// the attribute, with the header length adjusted to end just after it.
    public func verifyIntegrity(key: [UInt8]) -> Bool {
        verifyMAC(at: integrityOffset, size: 24, digest: .sha1, key: key) { a in
            if case .messageIntegrity(let b) = a { return b } else { return nil }
        }
    }

    /// Checks MESSAGE-INTEGRITY-SHA256 with `key` (§14.6), the same way with HMAC-SHA256.
    /// A truncated MAC (16 to 28 bytes) is compared on its length.
    public func verifyIntegritySHA256(key: [UInt8]) -> Bool {
        guard let got = attributes.lazy.compactMap({ a -> [UInt8]? in
            if case .messageIntegritySHA256(let b) = a { return b } else { return nil }
        }).first else { return false }
        return verifyMAC(at: integritySHA256Offset, size: 4 + got.count, digest: .sha256, key: key) { a in
            if case .messageIntegritySHA256(let b) = a { return b } else { return nil }
        }
    }

    private func verifyMAC(at offset: Int?, size: Int, digest: Digest, key: [UInt8],
                           value: (StunAttribute) -> [UInt8]?) -> Bool {
        guard let raw, let off = offset, off >= 20, off <= raw.count else { return false }
        let len = UInt16(off - 20 + size)
        let full: [UInt8]
        if digest == .sha1 {
            // The message up to the attribute with its length field replaced, fed in three
            // parts rather than copied (issue 19).
            full = raw.withUnsafeBytes { r in
                withUnsafeBytes(of: len.bigEndian) { l in
                    HMACSHA1.mac(key: key, UnsafeRawBufferPointer(rebasing: r[0..<2]), l,
                                 UnsafeRawBufferPointer(rebasing: r[4..<off]))
                }
            }
        } else {
            var prefix = Array(raw[0..<off])
            prefix[2] = UInt8(len >> 8); prefix[3] = UInt8(len & 0xff)
            full = digest.hmac(key: key, prefix)
        }
        guard let got = attributes.lazy.compactMap(value).first, got.count <= full.count, !got.isEmpty else { return false }
        let mac = full.prefix(got.count)
        // Constant-time comparison: a timing side channel would leak the MAC.
        var diff: UInt8 = 0
        for (a, b) in zip(mac, got) { diff |= a ^ b }
        return diff == 0
    }

    // MARK: Attribute accessors

    public var username: String? {
        for case .username(let u) in attributes { return u }
        return nil
    }
    public var priority: UInt32? {
        for case .priority(let p) in attributes { return p }
        return nil
    }
    public var useCandidate: Bool { attributes.contains(.useCandidate) }
    public var iceControlling: UInt64? {
        for case .iceControlling(let t) in attributes { return t }
        return nil
    }
    public var iceControlled: UInt64? {
        for case .iceControlled(let t) in attributes { return t }
        return nil
    }
    public var xorMappedAddress: SocketAddress? {
        for case .xorMappedAddress(let a) in attributes { return a }
        for case .mappedAddress(let a) in attributes { return a }
        return nil
    }
    public var realm: String? {
        for case .realm(let r) in attributes { return r }
        return nil
    }
    public var nonce: [UInt8]? {
        for case .nonce(let n) in attributes { return n }
        return nil
    }
    public var lifetime: UInt32? {
        for case .lifetime(let l) in attributes { return l }
        return nil
    }
    public var xorRelayedAddress: SocketAddress? {
        for case .xorRelayedAddress(let a) in attributes { return a }
        return nil
    }
    public var xorPeerAddress: SocketAddress? {
        for case .xorPeerAddress(let a) in attributes { return a }
        return nil
    }
    public var dataValue: [UInt8]? {
        for case .data(let d) in attributes { return d }
        return nil
    }
    public var passwordAlgorithms: [StunPasswordAlgorithm]? {
        for case .passwordAlgorithms(let l) in attributes { return l }
        return nil
    }
    public var errorCode: (code: Int, reason: String)? {
        for case .errorCode(let c, let r) in attributes { return (c, r) }
        return nil
    }
    /// Comprehension-required attributes (type < 0x8000, §14) that castd does not know;
    /// a request carrying any gets a 420 response listing them.
    public var unknownComprehensionRequired: [UInt16] {
        attributes.compactMap { a in
            if case .other(let t, _) = a, t < 0x8000 { return t } else { return nil }
        }
    }
}
