import CastCore
import COpenSSL

/// HMAC-SHA1 (RFC 2104) with the key's inner and outer pad states computed once, so that
/// each message costs two SHA-1 runs and no allocation (issue 19: SRTP's authentication
/// tag, RFC 3711 §4.2.1). The states are plain structs copied per message; they are
/// wiped in `deinit`. Not thread-safe: one owner.
public final class HMACSHA1 {
    public static let length = 20
    /// SHA-1's block size (FIPS 180-4 §5.1.1), the pad length of RFC 2104 §2.
    private static let blockSize = 64

    private var inner = SHA_CTX()
    private var outer = SHA_CTX()
    /// The inner digest of the message in flight.
    private var scratch = [UInt8](repeating: 0, count: HMACSHA1.length)

    public init(key: Redacted<[UInt8]>) {
        // RFC 2104 §2: a key longer than the block is hashed first; shorter ones are zero-padded.
        var k = key.unredacted.count > Self.blockSize ? Digest.sha1.hash(key.unredacted) : key.unredacted
        k += [UInt8](repeating: 0, count: Self.blockSize - k.count)
        var pad = k.map { $0 ^ 0x36 }
        _ = castd_sha1_init(&inner)
        _ = castd_sha1_update(&inner, pad, pad.count)
        pad = k.map { $0 ^ 0x5c }
        _ = castd_sha1_init(&outer)
        _ = castd_sha1_update(&outer, pad, pad.count)
        for i in k.indices { k[i] = 0 }
        for i in pad.indices { pad[i] = 0 }
    }

    deinit {
        withUnsafeMutableBytes(of: &inner) { OPENSSL_cleanse($0.baseAddress, $0.count) }
        withUnsafeMutableBytes(of: &outer) { OPENSSL_cleanse($0.baseAddress, $0.count) }
    }

    /// The MAC of `first` followed by `second` (SRTP: the packet, then the ROC), its first
    /// `tag.count` bytes (at most 20) written to `tag`.
    public func authenticate(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer,
                             into tag: UnsafeMutableRawBufferPointer) {
        var c = inner
        _ = castd_sha1_update(&c, first.baseAddress, first.count)
        _ = castd_sha1_update(&c, second.baseAddress, second.count)
        scratch.withUnsafeMutableBufferPointer { d in
            _ = castd_sha1_final(d.baseAddress, &c)
            var o = outer
            _ = castd_sha1_update(&o, d.baseAddress, d.count)
            _ = castd_sha1_final(d.baseAddress, &o)
            tag.copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(d)[0..<min(tag.count, d.count)]))
        }
        withUnsafeMutableBytes(of: &c) { OPENSSL_cleanse($0.baseAddress, $0.count) }
    }
}

extension HMACSHA1 {
    /// One-shot HMAC-SHA1 (RFC 2104) of `first`, `second` and `third` in order, under
    /// `key`, with the pads on the stack: the 20 returned bytes are its one allocation
    /// (OpenSSL's one-shot `HMAC` makes and frees a MAC context each call). For messages
    /// whose key changes from one to the next (STUN's MESSAGE-INTEGRITY, issue 19).
    public static func mac(key: [UInt8], _ first: UnsafeRawBufferPointer,
                           _ second: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
                           _ third: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: length) { out, count in
            withUnsafeTemporaryAllocation(byteCount: blockSize, alignment: 8) { pad in
                let p = pad.baseAddress!
                pad.initializeMemory(as: UInt8.self, repeating: 0)
                var c = SHA_CTX()
                key.withUnsafeBytes { k in
                    if k.count > blockSize {   // RFC 2104 §2: a longer key is hashed first
                        _ = castd_sha1_init(&c)
                        _ = castd_sha1_update(&c, k.baseAddress, k.count)
                        _ = castd_sha1_final(p.assumingMemoryBound(to: UInt8.self), &c)
                    } else if let base = k.baseAddress {
                        p.copyMemory(from: base, byteCount: k.count)
                    }
                }
                for i in 0..<blockSize { p.storeBytes(of: p.load(fromByteOffset: i, as: UInt8.self) ^ 0x36, toByteOffset: i, as: UInt8.self) }
                _ = castd_sha1_init(&c)
                _ = castd_sha1_update(&c, p, blockSize)
                if first.count > 0 { _ = castd_sha1_update(&c, first.baseAddress, first.count) }
                if second.count > 0 { _ = castd_sha1_update(&c, second.baseAddress, second.count) }
                if third.count > 0 { _ = castd_sha1_update(&c, third.baseAddress, third.count) }
                _ = castd_sha1_final(out.baseAddress, &c)
                // 0x36 ^ 0x5c: the inner pad becomes the outer one.
                for i in 0..<blockSize { p.storeBytes(of: p.load(fromByteOffset: i, as: UInt8.self) ^ 0x6a, toByteOffset: i, as: UInt8.self) }
                _ = castd_sha1_init(&c)
                _ = castd_sha1_update(&c, p, blockSize)
                _ = castd_sha1_update(&c, out.baseAddress, length)
                _ = castd_sha1_final(out.baseAddress, &c)
                OPENSSL_cleanse(p, blockSize)
                withUnsafeMutableBytes(of: &c) { OPENSSL_cleanse($0.baseAddress, $0.count) }
            }
            count = length
        }
    }
}
