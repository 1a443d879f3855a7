import CastCore
import COpenSSL

/// The one place an `SSL_CTX` is set up, for both of `SSLEngine`'s kinds: the protocol and
/// its versions, our certificate and key, how the peer is verified, the cipher list and the
/// use_srtp profiles. `build()` returns the context and one `SSL` made from it, which the
/// caller owns (and frees, `SSL` first); on any failure both are freed before it throws.
struct SSLContextBuilder {
    enum Method {
        /// DTLS, either role.
        case dtls
        /// A TLS client.
        case tlsClient

        var name: String { self == .dtls ? "DTLS" : "TLS" }
    }

    /// How the peer's certificate is checked.
    enum Verify {
        /// Required and decided by `PeerVerifier`'s callback alone (the SDP fingerprint).
        case fingerprint
        /// The server's chain against these trust anchors (the name is set on the `SSL`).
        case chain(SSLEngine.Trust)
    }

    var method: Method
    var minVersion: Int
    var maxVersion: Int? = nil
    var certificate: Certificate? = nil
    var ciphers: String? = nil
    /// OpenSSL names, best first; nil: no use_srtp.
    var srtpProfiles: String? = nil
    var verify: Verify

    func build() throws -> (ctx: OpaquePointer, ssl: OpaquePointer) {
        let proto = method == .dtls ? DTLS_method() : TLS_client_method()
        guard let ctx = SSL_CTX_new(proto) else { throw OpenSSLError.drain("SSL_CTX_new(\(method.name))") }
        do {
            try configure(ctx)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        guard let ssl = SSL_new(ctx) else {
            SSL_CTX_free(ctx)
            throw OpenSSLError.drain("SSL_new(\(method.name))")
        }
        return (ctx, ssl)
    }

    private func configure(_ ctx: OpaquePointer) throws {
        guard SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, minVersion, nil) == 1,
              maxVersion.map({ SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, $0, nil) == 1 }) ?? true else {
            throw OpenSSLError.drain(method == .dtls ? "limiting DTLS to 1.2" : "requiring TLS 1.2")
        }
        if let certificate {
            guard SSL_CTX_use_certificate(ctx, certificate.x509) == 1,
                  SSL_CTX_use_PrivateKey(ctx, certificate.key) == 1,
                  SSL_CTX_check_private_key(ctx) == 1 else {
                throw OpenSSLError.drain("loading the \(method.name) certificate")
            }
        }
        if let ciphers {
            guard SSL_CTX_set_cipher_list(ctx, ciphers) == 1 else {
                throw OpenSSLError.drain("setting the \(method.name) cipher list")
            }
        }
        if let srtpProfiles {
            // Returns 0 on success (sic).
            guard SSL_CTX_set_tlsext_use_srtp(ctx, srtpProfiles) == 0 else {
                throw OpenSSLError.drain("enabling use_srtp")
            }
        }
        switch verify {
        case .fingerprint:
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, PeerVerifier.callback)
        case .chain(let trust):
            switch trust {
            case .system:
                try Self.loadSystemStore(ctx)
            case .pem(let pem):
                try Self.addTrustAnchors(pem, to: ctx)
            case .systemAnd(let pem):
                try Self.loadSystemStore(ctx)
                try Self.addTrustAnchors(pem, to: ctx)
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        }
    }

    private static func loadSystemStore(_ ctx: OpaquePointer) throws {
        guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
            throw OpenSSLError.drain("loading the system CA store")
        }
    }

    static func addTrustAnchors(_ pem: String, to ctx: OpaquePointer) throws {
        let bytes = Array(pem.utf8)
        guard let store = SSL_CTX_get_cert_store(ctx) else { throw OpenSSLError.drain("SSL_CTX_get_cert_store") }
        var added = 0
        try bytes.withUnsafeBytes { buf in
            guard let bio = BIO_new_mem_buf(buf.baseAddress, Int32(buf.count)) else {
                throw OpenSSLError.drain("BIO_new_mem_buf")
            }
            defer { BIO_free(bio) }
            while let x = PEM_read_bio_X509(bio, nil, nil, nil) {
                defer { X509_free(x) }
                guard X509_STORE_add_cert(store, x) == 1 else { throw OpenSSLError.drain("adding a trust anchor") }
                added += 1
            }
        }
        ERR_clear_error()  // PEM_read_bio_X509's end-of-input "no start line"
        guard added > 0 else { throw CastError(.malformed, "no PEM certificate in the trust anchors given") }
    }
}
