import CastOpenSSL

/// Versions of the crypto libraries under the WebRTC transport, for `castd doctor`: OpenSSL
/// only, since SRTP and SRTCP are castd's own on it (issue 19: libsrtp is the tests' oracle).
public enum CryptoLibraries {
    public static var openSSL: String { OpenSSLVersion.string }
}
