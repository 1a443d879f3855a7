import CastCore
import COpenSSL

/// Checks the DTLS peer's certificate against the fingerprint from its SDP
/// (RFC 8122 §5, RFC 8827 §6.5): WebRTC certificates are self-signed, so
/// no chain is checked; the certificate is accepted if and only if its
/// hash equals the announced fingerprint. Runs inside OpenSSL's verify
/// callback, so a mismatch aborts the handshake with a `bad_certificate`
/// alert before any key is derived.
final class PeerVerifier {
    let expected: CertificateFingerprint
    private(set) var checked = false
    private(set) var mismatch = false

    init(expected: CertificateFingerprint) { self.expected = expected }

    func check(der: [UInt8]) -> Bool {
        let ok = expected.matches(der: der)
        checked = true
        if !ok { mismatch = true }
        return ok
    }

    /// `SSL_verify_cb`. The verifier is found through the SSL's app data (ex_data 0).
    static let callback: @convention(c) (Int32, OpaquePointer?) -> Int32 = { _, store in
        guard let store,
              let sslRaw = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()),
              let raw = SSL_get_ex_data(OpaquePointer(sslRaw), 0) else { return 0 }
        let verifier = Unmanaged<PeerVerifier>.fromOpaque(raw).takeUnretainedValue()
        // Only the certificate the peer authenticates with (depth 0) is
        // named by the fingerprint; anything above it is irrelevant.
        guard X509_STORE_CTX_get_error_depth(store) == 0 else { return 1 }
        guard let cert = X509_STORE_CTX_get_current_cert(store),
              let der = try? Certificate.encode(cert), verifier.check(der: der) else {
            X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
            return 0
        }
        return 1
    }
}
