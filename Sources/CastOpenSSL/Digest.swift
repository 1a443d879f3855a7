import COpenSSL

/// Hashes and MACs from OpenSSL's EVP interface: SHA-1 (WebSocket accept,
/// STUN MESSAGE-INTEGRITY), SHA-256 (DTLS fingerprints, QR token hashes),
/// SHA-384/SHA-512 (certificate fingerprints a peer may announce, RFC 8122 §5).
/// The only place castd calls OpenSSL's digest functions.
public enum Digest: Sendable, CaseIterable {
    case sha1, sha256, sha384, sha512

    var md: OpaquePointer {
        switch self {
        case .sha1: return EVP_sha1()
        case .sha256: return EVP_sha256()
        case .sha384: return EVP_sha384()
        case .sha512: return EVP_sha512()
        }
    }

    public var length: Int {
        switch self {
        case .sha1: return 20
        case .sha256: return 32
        case .sha384: return 48
        case .sha512: return 64
        }
    }

    public func hash<C: Collection>(_ data: C) -> [UInt8] where C.Element == UInt8 {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let input = Array(data)
        let ok = input.withUnsafeBytes { buf in
            EVP_Digest(buf.baseAddress, buf.count, &out, &len, md, nil)
        }
        precondition(ok == 1, "EVP_Digest failed: OpenSSL is broken")
        return Array(out.prefix(Int(len)))
    }

    public func hmac<K: Collection, C: Collection>(key: K, _ data: C) -> [UInt8]
    where K.Element == UInt8, C.Element == UInt8 {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let k = Array(key), d = Array(data)
        let r = k.withUnsafeBytes { kb in
            d.withUnsafeBytes { db in
                HMAC(md, kb.baseAddress, Int32(kb.count),
                     db.baseAddress?.assumingMemoryBound(to: UInt8.self), db.count, &out, &len)
            }
        }
        precondition(r != nil, "HMAC failed: OpenSSL is broken")
        return Array(out.prefix(Int(len)))
    }
}

/// Cryptographically secure random bytes (ICE credentials, SSRCs, WebSocket keys, masks).
public enum SecureRandom {
    public static func bytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        guard n > 0 else { return out }
        let r = RAND_bytes(&out, Int32(n))
        precondition(r == 1, "RAND_bytes failed: no entropy")
        return out
    }

    public static func uint32() -> UInt32 {
        let b = bytes(4)
        return UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8 | UInt32(b[3])
    }

    public static func uint16() -> UInt16 {
        let b = bytes(2)
        return UInt16(b[0]) << 8 | UInt16(b[1])
    }
}

extension Digest {
    /// MD5, kept out of the `Digest` cases on purpose: it is only for the STUN long-term
    /// credential key, which RFC 8489 §9.2.2 fixes as MD5(username ":" realm ":" password)
    /// for MESSAGE-INTEGRITY. Nothing new should use it.
    public static func md5<C: Collection>(_ data: C) -> [UInt8] where C.Element == UInt8 {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let input = Array(data)
        let ok = input.withUnsafeBytes { buf in
            EVP_Digest(buf.baseAddress, buf.count, &out, &len, EVP_md5(), nil)
        }
        precondition(ok == 1, "EVP_Digest(MD5) failed: OpenSSL is broken")
        return Array(out.prefix(Int(len)))
    }
}
