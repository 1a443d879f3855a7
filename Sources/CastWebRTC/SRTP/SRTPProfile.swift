import CastCore

extension CastError.Code {
    /// An SRTP/SRTCP packet or key refused for another reason (length, version, limits).
    public static let srtp = Self("srtp")
    /// An SRTP/SRTCP packet failed authentication (tampered, wrong key).
    public static let srtpAuthentication = Self("srtp-auth")
    /// An SRTP/SRTCP packet was replayed or is too old for the window (RFC 3711 §3.3.2).
    public static let srtpReplay = Self("srtp-replay")
}

/// The SRTP protection profiles castd negotiates in DTLS use_srtp, best first.
public enum SRTPProfile: UInt16, Sendable, CaseIterable, CustomStringConvertible {
    /// RFC 5764 §4.1.2: SRTP_AES128_CM_HMAC_SHA1_80 (AES-CM, 80-bit HMAC-SHA1 tag).
    case aes128CmHmacSha1_80 = 0x0001
    /// RFC 7714 §14.2: SRTP_AEAD_AES_128_GCM (16-byte tag).
    case aeadAes128Gcm = 0x0007

    /// Master key length in bytes (RFC 5764 §4.1.2, RFC 7714 §12).
    public var keyLength: Int { 16 }

    /// Master salt length in bytes: 112 bits for AES-CM, 96 for GCM (RFC 7714 §12).
    public var saltLength: Int {
        switch self {
        case .aes128CmHmacSha1_80: return 14
        case .aeadAes128Gcm: return 12
        }
    }

    /// Bytes to pull from the DTLS exporter: a key and a salt per direction (RFC 5764 §4.2).
    public var exporterLength: Int { 2 * (keyLength + saltLength) }

    /// OpenSSL's name, as in `SSL_CTX_set_tlsext_use_srtp`.
    public var openSSLName: String {
        switch self {
        case .aes128CmHmacSha1_80: return "SRTP_AES128_CM_SHA1_80"
        case .aeadAes128Gcm: return "SRTP_AEAD_AES_128_GCM"
        }
    }

    public var description: String { openSSLName }

    /// The use_srtp offer castd makes: GCM first (cheaper, and what Chrome prefers).
    public static let offer = [SRTPProfile.aeadAes128Gcm, .aes128CmHmacSha1_80]
}
