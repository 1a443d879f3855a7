import COpenSSL

/// The OpenSSL library castd runs with, for `castd doctor`.
public enum OpenSSLVersion {
    public static var string: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }
}
