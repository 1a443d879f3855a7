import CastCore
import COpenSSL

/// AES-128 in GCM, keyed once: one `EVP_CIPHER_CTX` kept for the key's life and
/// given a new IV per message, so that sealing allocates nothing (issue 19: SRTP's
/// AEAD_AES_128_GCM, RFC 7714). The one owner of its context (freed, with the key
/// schedule wiped, in `deinit`). Not thread-safe: one owner.
public final class AES128GCM {
    /// RFC 7714 §8.1 / NIST SP 800-38D: a 96-bit IV, a 128-bit tag.
    public static let ivLength = 12
    public static let tagLength = 16

    private let ctx: OpaquePointer

    public init(key: Redacted<[UInt8]>) throws {
        guard key.unredacted.count == 16 else { throw CastError(.openssl, "AES-128-GCM needs a 16-byte key") }
        ctx = try AES128.context("AES-128-GCM", key: key)
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// Encrypts `text` where it lies and writes the tag over `tag`'s first 16 bytes;
    /// `aad` is authenticated, not encrypted. `iv` is 12 bytes.
    public func seal(iv: UnsafeRawPointer, aad: UnsafeRawBufferPointer, text: UnsafeMutableRawBufferPointer,
                     tag: UnsafeMutableRawPointer) throws {
        var n: Int32 = 0
        guard EVP_EncryptInit_ex2(ctx, nil, nil, iv.assumingMemoryBound(to: UInt8.self), nil) == 1,
              aad.isEmpty || EVP_EncryptUpdate(ctx, nil, &n, aad.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                               Int32(aad.count)) == 1 else {
            throw OpenSSLError.drain("AES-128-GCM setup")
        }
        if let p = text.baseAddress?.assumingMemoryBound(to: UInt8.self), !text.isEmpty {
            guard EVP_EncryptUpdate(ctx, p, &n, p, Int32(text.count)) == 1 else { throw OpenSSLError.drain("AES-128-GCM encryption") }
        }
        // GCM is a stream mode: Final writes no bytes, it computes the tag.
        guard EVP_EncryptFinal_ex(ctx, nil, &n) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagLength), tag) == 1 else {
            throw OpenSSLError.drain("AES-128-GCM tag")
        }
    }

    /// Checks the 16-byte `tag` over `aad`, `aad2` (authenticated in that order) and
    /// `text`, decrypting `text` where it lies; false when the tag does not match, and then
    /// `text` holds bytes that must not be used. `iv` is 12 bytes. (SRTCP's inbound side,
    /// RFC 7714 §9.) A context sealed with before may open: the key stays, the direction
    /// is set per message.
    public func open(iv: UnsafeRawPointer, aad: UnsafeRawBufferPointer, _ aad2: UnsafeRawBufferPointer,
                     text: UnsafeMutableRawBufferPointer, tag: UnsafeRawPointer) throws -> Bool {
        var n: Int32 = 0
        guard EVP_DecryptInit_ex2(ctx, nil, nil, iv.assumingMemoryBound(to: UInt8.self), nil) == 1,
              aad.isEmpty || EVP_DecryptUpdate(ctx, nil, &n, aad.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                               Int32(aad.count)) == 1,
              aad2.isEmpty || EVP_DecryptUpdate(ctx, nil, &n, aad2.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                                Int32(aad2.count)) == 1 else {
            throw OpenSSLError.drain("AES-128-GCM setup")
        }
        if let p = text.baseAddress?.assumingMemoryBound(to: UInt8.self), !text.isEmpty {
            guard EVP_DecryptUpdate(ctx, p, &n, p, Int32(text.count)) == 1 else { throw OpenSSLError.drain("AES-128-GCM decryption") }
        }
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagLength), UnsafeMutableRawPointer(mutating: tag)) == 1 else {
            throw OpenSSLError.drain("AES-128-GCM tag")
        }
        // A tag that does not match is a refusal, not an error: nothing may stay queued for
        // the next OpenSSL caller on this thread (the DTLS engine reads the queue).
        guard EVP_DecryptFinal_ex(ctx, nil, &n) == 1 else {
            ERR_clear_error()
            return false
        }
        return true
    }
}

/// AES-128 in counter mode, keyed once: one `EVP_CIPHER_CTX` given a new initial counter
/// block per message, so that each message allocates nothing (issue 19: SRTP's AES-CM,
/// RFC 3711 §4.1.1, and its key derivation PRF, §4.3.3). The one owner of its context.
public final class AES128Counter {
    private let ctx: OpaquePointer

    public init(key: Redacted<[UInt8]>) throws {
        guard key.unredacted.count == 16 else { throw CastError(.openssl, "AES-128-CTR needs a 16-byte key") }
        ctx = try AES128.context("AES-128-CTR", key: key)
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// XORs the keystream that starts at the 16-byte counter block `iv` into `bytes`.
    /// The counter runs over the whole block, big-endian, as RFC 3711 §4.1.1 counts
    /// (at most 2^16 blocks per message there, so only the low 16 bits move).
    public func apply(iv: UnsafeRawPointer, to bytes: UnsafeMutableRawBufferPointer) throws {
        guard let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), !bytes.isEmpty else { return }
        var n: Int32 = 0
        guard EVP_EncryptInit_ex2(ctx, nil, nil, iv.assumingMemoryBound(to: UInt8.self), nil) == 1,
              EVP_EncryptUpdate(ctx, p, &n, p, Int32(bytes.count)) == 1 else {
            throw OpenSSLError.drain("AES-128-CTR")
        }
    }

    /// `count` bytes of keystream from the counter block `iv` (key derivation; not per packet).
    public func keystream(iv: [UInt8], count: Int) throws -> [UInt8] {
        precondition(iv.count == 16, "an AES counter block is 16 bytes")
        var out = [UInt8](repeating: 0, count: count)
        try iv.withUnsafeBytes { ivb in
            try out.withUnsafeMutableBytes { try apply(iv: ivb.baseAddress!, to: $0) }
        }
        return out
    }
}

enum AES128 {
    /// A context for `name` (fetched from the default provider once) with `key` set.
    static func context(_ name: String, key: Redacted<[UInt8]>) throws -> OpaquePointer {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else { throw OpenSSLError.drain("fetching \(name)") }
        defer { EVP_CIPHER_free(cipher) }   // the context keeps its own reference
        guard let ctx = EVP_CIPHER_CTX_new() else { throw OpenSSLError.drain("EVP_CIPHER_CTX_new") }
        let ok = key.unredacted.withUnsafeBufferPointer { EVP_EncryptInit_ex2(ctx, cipher, $0.baseAddress, nil, nil) }
        guard ok == 1 else {
            EVP_CIPHER_CTX_free(ctx)
            throw OpenSSLError.drain("keying \(name)")
        }
        return ctx
    }
}
