import Testing
import COpenSSL
import CastCore
@testable import CastOpenSSL
import TLSTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The one `SSL_CTX` set-up behind both kinds of `SSLEngine`.
@Suite struct SSLContextBuilderTests {
    static func free(_ built: (ctx: OpaquePointer, ssl: OpaquePointer)) {
        SSL_free(built.ssl)
        SSL_CTX_free(built.ctx)
    }

    @Test func dtlsContextHasTheCertificateCiphersSRTPAndFingerprintVerification() throws {
        let cert = try Certificate(notBeforeUnix: Int(time(nil)) - 86_400)
        let built = try SSLContextBuilder(method: .dtls, minVersion: Int(DTLS1_2_VERSION), maxVersion: Int(DTLS1_2_VERSION),
                                          certificate: cert, ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256",
                                          srtpProfiles: "SRTP_AES128_CM_SHA1_80", verify: .fingerprint).build()
        defer { Self.free(built) }
        #expect(SSL_CTX_get_verify_mode(built.ctx) == SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT)
        #expect(SSL_CTX_get0_certificate(built.ctx) != nil)
        // The TLS 1.2 suites are ours, in our order (TLS 1.3's own suites, "TLS_…", come first and are not set here).
        var names: [String] = []
        while let n = SSL_get_cipher_list(built.ssl, Int32(names.count)) { names.append(String(cString: n)) }
        #expect(names.filter { !$0.hasPrefix("TLS_") } == ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"])
        #expect(SSL_get_srtp_profiles(built.ssl) != nil)
        #expect(SSL_CTX_ctrl(built.ctx, SSL_CTRL_GET_MIN_PROTO_VERSION, 0, nil) == Int(DTLS1_2_VERSION))
        #expect(SSL_CTX_ctrl(built.ctx, SSL_CTRL_GET_MAX_PROTO_VERSION, 0, nil) == Int(DTLS1_2_VERSION))
    }

    @Test func tlsClientContextVerifiesTheChainWithoutCertificateOrSRTP() throws {
        let pki = try TestPKI()
        let built = try SSLContextBuilder(method: .tlsClient, minVersion: Int(TLS1_2_VERSION), verify: .chain(.pem(pki.caPEM))).build()
        defer { Self.free(built) }
        #expect(SSL_CTX_get_verify_mode(built.ctx) == SSL_VERIFY_PEER)
        #expect(SSL_CTX_get0_certificate(built.ctx) == nil)
        #expect(SSL_get_srtp_profiles(built.ssl) == nil)
        #expect(SSL_CTX_ctrl(built.ctx, SSL_CTRL_GET_MIN_PROTO_VERSION, 0, nil) == Int(TLS1_2_VERSION))
        #expect(SSL_CTX_ctrl(built.ctx, SSL_CTRL_GET_MAX_PROTO_VERSION, 0, nil) == 0)   // no upper bound
    }

    @Test func failuresThrowTheirSentence() {
        #expect(throws: CastError(.malformed, "no PEM certificate in the trust anchors given")) {
            _ = try SSLContextBuilder(method: .tlsClient, minVersion: Int(TLS1_2_VERSION), verify: .chain(.pem("not a certificate"))).build()
        }
        do {
            _ = try SSLContextBuilder(method: .dtls, minVersion: Int(DTLS1_2_VERSION), ciphers: "NO-SUCH-CIPHER",
                                      verify: .fingerprint).build()
            Issue.record("an unknown cipher list was accepted")
        } catch {
            #expect("\(error)".contains("setting the DTLS cipher list"))
        }
    }
}
