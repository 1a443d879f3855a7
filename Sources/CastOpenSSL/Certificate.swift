import CastCore
import COpenSSL

/// An ECDSA P-256 key and a self-signed X.509 certificate, generated once per
/// run for DTLS (RFC 8827 §6.5: WebRTC endpoints authenticate with
/// self-signed certificates whose fingerprints travel in the SDP).
///
/// The one owner of its `EVP_PKEY` and `X509`; both are freed in `deinit`.
/// Immutable after `init`, so it may be shared between engines.
public final class Certificate: @unchecked Sendable {
    let key: OpaquePointer   // EVP_PKEY*
    let x509: OpaquePointer  // X509*
    /// The DER encoding, which is what fingerprints hash (RFC 8122 §5).
    public let der: [UInt8]

    /// Generates a new key pair and certificate.
    /// - Parameters:
    ///   - commonName: the subject and issuer CN. Browsers ignore it.
    ///   - notBeforeUnix: the start of validity, in Unix seconds; the owner
    ///     passes the wall clock (backdated by a day against clock skew).
    ///   - lifetime: validity length; short, since the certificate lives for one run.
    public init(commonName: String = "castd", notBeforeUnix: Int, lifetime: Duration = .seconds(30 * 86_400)) throws {
        // Key: EC on prime256v1 (RFC 8827 §6.5 requires ECDSA P-256 support).
        guard let pctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw OpenSSLError.drain("EVP_PKEY_CTX_new_id(EC)") }
        defer { EVP_PKEY_CTX_free(pctx) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(pctx) == 1,
              EVP_PKEY_CTX_set_ec_paramgen_curve_nid(pctx, NID_X9_62_prime256v1) == 1,
              EVP_PKEY_keygen(pctx, &pkey) == 1, let key = pkey else {
            throw OpenSSLError.drain("generating an ECDSA P-256 key")
        }
        guard let x = X509_new() else {
            EVP_PKEY_free(key)
            throw OpenSSLError.drain("X509_new")
        }
        do {
            try Self.fill(x, key: key, commonName: commonName, notBeforeUnix: notBeforeUnix, lifetime: lifetime)
            self.der = try Self.encode(x)
        } catch {
            X509_free(x)
            EVP_PKEY_free(key)
            throw error
        }
        self.key = key
        self.x509 = x
    }

    deinit {
        X509_free(x509)
        EVP_PKEY_free(key)
    }

    /// The fingerprint SDP announces for this certificate.
    public func fingerprint(_ algorithm: Digest = .sha256) -> CertificateFingerprint {
        CertificateFingerprint(algorithm: algorithm, der: der)
    }

    /// The serial number (random, 63 bits).
    public var serial: UInt64 {
        var v: UInt64 = 0
        ASN1_INTEGER_get_uint64(&v, X509_get0_serialNumber(x509))
        return v
    }

    /// The subject's common name.
    public var commonName: String? {
        guard let name = X509_get_subject_name(x509) else { return nil }
        var buf = [CChar](repeating: 0, count: 256)
        let n = X509_NAME_get_text_by_NID(name, NID_commonName, &buf, Int32(buf.count))
        return n < 0 ? nil : String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Validity as Unix seconds (notBefore, notAfter).
    public var validity: (notBefore: Int, notAfter: Int)? {
        guard let nb = Self.unix(X509_get0_notBefore(x509)), let na = Self.unix(X509_get0_notAfter(x509)) else { return nil }
        return (nb, na)
    }

    private static func unix(_ t: UnsafePointer<ASN1_TIME>?) -> Int? {
        var tm = tm()
        guard let t, ASN1_TIME_to_tm(t, &tm) == 1 else { return nil }
        return timegm(&tm)
    }

    private static func fill(_ x: OpaquePointer, key: OpaquePointer, commonName: String, notBeforeUnix: Int, lifetime: Duration) throws {
        // X.509 v3 (version field value 2); a positive random 63-bit serial.
        var serial: UInt64 = 0
        for b in SecureRandom.bytes(8) { serial = serial << 8 | UInt64(b) }
        serial &= 0x7fff_ffff_ffff_ffff
        if serial == 0 { serial = 1 }
        guard X509_set_version(x, 2) == 1,
              ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial) == 1 else {
            throw OpenSSLError.drain("setting the certificate version and serial")
        }
        var start = time_t(notBeforeUnix)
        let seconds = Int(lifetime.totalNanoseconds / 1_000_000_000)
        guard X509_time_adj_ex(X509_getm_notBefore(x), 0, 0, &start) != nil,
              X509_time_adj_ex(X509_getm_notAfter(x), 0, seconds, &start) != nil else {
            throw OpenSSLError.drain("setting the certificate validity")
        }
        guard let name = X509_get_subject_name(x),
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0) == 1,
              X509_set_issuer_name(x, name) == 1,
              X509_set_pubkey(x, key) == 1 else {
            throw OpenSSLError.drain("setting the certificate name and key")
        }
        guard X509_sign(x, key, EVP_sha256()) > 0 else { throw OpenSSLError.drain("signing the certificate") }
    }

    static func encode(_ x: OpaquePointer) throws -> [UInt8] {
        let n = i2d_X509(x, nil)
        guard n > 0 else { throw OpenSSLError.drain("encoding the certificate") }
        var out = [UInt8](repeating: 0, count: Int(n))
        let written = out.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = buf.baseAddress
            return i2d_X509(x, &p)
        }
        guard written == n else { throw OpenSSLError.drain("encoding the certificate") }
        return out
    }
}
