import COpenSSL
import CSRTP

/// Versions of the crypto libraries under the WebRTC transport, for `castd doctor`.
public enum CryptoLibraries {
    public static var openSSL: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }
    public static var libsrtp: String { String(cString: srtp_get_version_string()) }
}
