import CastOpenSSL
import CSRTP

/// Versions of the crypto libraries under the WebRTC transport, for `castd doctor`.
public enum CryptoLibraries {
    public static var openSSL: String { OpenSSLVersion.string }
    public static var libsrtp: String { String(cString: srtp_get_version_string()) }
}
