import CastCore
import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

extension CastError.Code {
    /// The TLS/DTLS handshake failed (alert, protocol error, missing use_srtp).
    public static let handshake = Self("handshake")
    /// The server's TLS certificate was not accepted (chain, hostname, expiry).
    public static let certificate = Self("certificate")
    /// The DTLS handshake went unanswered through every retransmission.
    public static let handshakeTimeout = Self("handshake-timeout")
    /// An operation that needs a connected engine was called before or after.
    public static let notConnected = Self("not-connected")
}

/// TLS or DTLS on OpenSSL, sans IO: bytes in with `feed`, bytes out with
/// `pollOutgoing`, time in with `now`. OpenSSL never sees a socket; it reads
/// and writes a `PacketPipe`, which keeps datagram boundaries for DTLS.
///
/// The one owner of its `SSL_CTX` and `SSL` (freed in `deinit`). Not
/// thread-safe: one owner drives it (rule 2, docs/architecture.md).
///
/// Usage: `start(now:)`, then after every `feed`/`handleTimeout`/
/// `writeApplication` drain `pollOutgoing()` and `readApplication()`, check
/// `state`, and call `handleTimeout` again at `nextDeadline()`.
public final class SSLEngine {
    public enum Role: Sendable, Equatable { case client, server }

    public enum State: Equatable, Sendable {
        case idle, handshaking, connected
        case failed(CastError)
        /// The peer sent close_notify, or `close()` was called.
        case closed
    }

    /// Where a TLS client's trust anchors come from.
    public enum Trust: Sendable {
        /// The system CA store (OpenSSL's default paths, /etc/ssl/certs on Debian).
        case system
        /// Only these PEM certificates (tests, private deployments).
        case pem(String)
        /// The system CA store and these PEM certificates besides (castd's
        /// development flag: a backend with a self-signed certificate).
        case systemAnd(String)
    }

    /// DTLS-SRTP configuration (RFC 5763 §5, RFC 5764 §4.1).
    public struct DTLSOptions: Sendable {
        public var role: Role
        public var certificate: Certificate
        /// From the peer's SDP `a=fingerprint`; nothing else authenticates it.
        public var remoteFingerprint: CertificateFingerprint
        /// Largest datagram OpenSSL may write (UDP payload).
        public var mtu: Int
        /// OpenSSL names, best first; nil disables use_srtp.
        public var srtpProfiles: String?
        public var schedule: DTLSRetransmitSchedule

        public init(role: Role, certificate: Certificate, remoteFingerprint: CertificateFingerprint,
                    mtu: Int = 1200,
                    srtpProfiles: String? = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80",
                    schedule: DTLSRetransmitSchedule = .init()) {
            self.role = role
            self.certificate = certificate
            self.remoteFingerprint = remoteFingerprint
            self.mtu = mtu
            self.srtpProfiles = srtpProfiles
            self.schedule = schedule
        }
    }

    public let isDTLS: Bool
    public let role: Role
    public private(set) var state: State = .idle

    private let ctx: OpaquePointer
    private let ssl: OpaquePointer
    private let pipe: PacketPipe
    private let verifier: PeerVerifier?
    private let requireSRTP: Bool
    private let hostname: String?
    private let timerControlled: Bool
    private var schedule: DTLSRetransmitSchedule
    private var received: [[UInt8]] = []

    // MARK: - Construction

    /// A DTLS 1.2 endpoint for WebRTC: certificate required both ways and
    /// checked only against `remoteFingerprint`; use_srtp offered/selected.
    public init(dtls options: DTLSOptions) throws {
        isDTLS = true
        role = options.role
        hostname = nil
        schedule = options.schedule
        requireSRTP = options.srtpProfiles != nil
        pipe = PacketPipe(datagram: true, mtu: options.mtu)
        let verifier = PeerVerifier(expected: options.remoteFingerprint)
        self.verifier = verifier
        timerControlled = DTLSTimerControl.supported
        (ctx, ssl) = try SSLContextBuilder(
            method: .dtls,
            // DTLS 1.2 only (RFC 8827 §6.5; DTLS 1.0 is obsolete).
            minVersion: Int(DTLS1_2_VERSION), maxVersion: Int(DTLS1_2_VERSION),
            certificate: options.certificate,
            // ECDHE and an AEAD only. ECDSA first (castd's own certificate,
            // and Chrome's default); RSA for a peer that is the DTLS server
            // with an RSA certificate.
            ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305",
            srtpProfiles: options.srtpProfiles,
            // RFC 5763 §5: both sides present certificates; only the
            // fingerprint decides (PeerVerifier).
            verify: .fingerprint
        ).build()
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(verifier).toOpaque())
        // SSL_OP_NO_QUERY_MTU (bit 12): use our MTU, never ask the BIO.
        SSL_set_options(ssl, UInt64(1) << 12)
        guard castd_ssl_set_mtu(ssl, options.mtu) > 0 else {
            throw OpenSSLError.drain("setting the DTLS MTU to \(options.mtu)")
        }
        DTLS_set_timer_cb(ssl, timerControlled ? DTLSTimerControl.holdCallback : DTLSTimerControl.realTimeFallback)
        try attachPipe()
        if role == .client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }
    }

    /// A TLS client (≥ 1.2) for `wss://`: verifies the chain against `trust`
    /// and the name against `hostname` (DNS name or IP literal), sends SNI
    /// for DNS names (RFC 6066 §3 forbids IP literals there).
    public init(tlsClientFor hostname: String, trust: Trust = .system) throws {
        isDTLS = false
        role = .client
        self.hostname = hostname
        schedule = DTLSRetransmitSchedule()
        requireSRTP = false
        verifier = nil
        timerControlled = false
        pipe = PacketPipe(datagram: false, mtu: 16_384)
        (ctx, ssl) = try SSLContextBuilder(method: .tlsClient, minVersion: Int(TLS1_2_VERSION), verify: .chain(trust)).build()
        if Self.isIPLiteral(hostname) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), hostname) == 1 else {
                throw OpenSSLError.drain("setting the expected IP address")
            }
        } else {
            guard SSL_set1_host(ssl, hostname) == 1, castd_ssl_set_tlsext_host_name(ssl, hostname) == 1 else {
                throw OpenSSLError.drain("setting the expected host name")
            }
        }
        try attachPipe()
        SSL_set_connect_state(ssl)
    }

    deinit {
        SSL_free(ssl)      // frees the BIO too; `pipe` outlives it
        SSL_CTX_free(ctx)
    }

    private func attachPipe() throws {
        guard let bio = pipe.makeBIO() else { throw OpenSSLError.drain("creating the packet BIO") }
        SSL_set_bio(ssl, bio, bio)  // one BIO for both directions: one reference
    }

    private static func isIPLiteral(_ s: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, s, &v4) == 1 || inet_pton(AF_INET6, s, &v6) == 1
    }

    // MARK: - Driving

    /// Begins the handshake: a client writes its first flight.
    public func start(now: Instant) {
        guard state == .idle else { return }
        state = .handshaking
        drive(now: now)
    }

    /// Bytes from the peer: one datagram (DTLS) or any slice of the stream (TLS).
    public func feed(_ bytes: [UInt8], now: Instant) {
        switch state {
        case .failed, .closed: return
        case .idle: state = .handshaking  // a server is started by its first datagram
        case .handshaking, .connected: break
        }
        guard !bytes.isEmpty else { return }
        pipe.incoming.append(bytes)
        drive(now: now)
    }

    /// The next datagram (DTLS) or chunk of stream bytes (TLS) to send, oldest first.
    public func pollOutgoing() -> [UInt8]? {
        pipe.outgoing.isEmpty ? nil : pipe.outgoing.removeFirst()
    }

    /// Decrypted application data, in order (one DTLS record's payload each).
    public func readApplication() -> [UInt8]? {
        received.isEmpty ? nil : received.removeFirst()
    }

    /// Encrypts application data (one DTLS record; TLS may split it).
    public func writeApplication(_ bytes: [UInt8]) throws {
        guard state == .connected else {
            throw CastError(.notConnected, "cannot send application data: the \(isDTLS ? "DTLS" : "TLS") connection is not established")
        }
        guard !bytes.isEmpty else { return }
        if isDTLS {
            // A DTLS record never spans datagrams (RFC 6347 §4.1.1); refuse
            // rather than let OpenSSL fail the whole connection.
            let room = DTLS_get_data_mtu(ssl)
            guard bytes.count <= room else {
                throw CastError(.unsupported, "DTLS: \(bytes.count) bytes of application data do not fit one datagram (at most \(room))")
            }
        }
        ERR_clear_error()
        let n = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        guard n == Int32(bytes.count) else {
            let e = OpenSSLError.drain("\(isDTLS ? "DTLS" : "TLS") write")
            fail(e)
            throw e
        }
    }

    /// When `handleTimeout` must next be called; nil if no timer runs.
    public func nextDeadline() -> Instant? {
        guard isDTLS, state == .handshaking else { return nil }
        return schedule.deadline
    }

    /// Retransmits the last flight if its deadline has passed (RFC 6347 §4.2.4),
    /// or fails the handshake once the schedule gives up.
    public func handleTimeout(now: Instant) {
        guard isDTLS, state == .handshaking else { return }
        switch schedule.expire(now: now) {
        case .notYet:
            return
        case .giveUp:
            fail(CastError(.handshakeTimeout,
                           "DTLS handshake: no answer from the peer after \(schedule.maxRetransmissions) retransmissions; check that UDP reaches it"))
        case .retransmit:
            if timerControlled {
                guard DTLSTimerControl.forceExpiry(ssl: ssl, pipe: pipe) else {
                    // OpenSSL has no flight waiting (e.g. the answer arrived
                    // in the same instant): nothing to resend.
                    schedule.stop()
                    return
                }
            }
            ERR_clear_error()
            let r = castd_dtls_handle_timeout(ssl)
            if r < 0 {
                fail(OpenSSLError.drain("DTLS retransmission"))
            } else if r == 0 && timerControlled {
                fail(CastError(.handshake, "DTLS retransmission: OpenSSL \(OpenSSLVersion.string) did not retransmit when its timer was expired"))
            }
        }
    }

    /// Sends close_notify; the engine then accepts nothing more.
    public func close() {
        guard state == .connected || state == .handshaking else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        state = .closed
    }

    private func drive(now: Instant) {
        let notifications = pipe.timerNotifications
        if state == .handshaking {
            ERR_clear_error()
            let r = SSL_do_handshake(ssl)
            if r == 1 {
                finishHandshake()
            } else {
                let e = SSL_get_error(ssl, r)
                if e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE {
                    fail(handshakeError(e))
                }
            }
        }
        if state == .connected { readAll() }
        // Mirror OpenSSL's timer: armed by a new flight, stopped by an answer.
        if state == .handshaking && isDTLS {
            if pipe.timerNotifications != notifications {
                if pipe.timerArmed { schedule.flightSent(now: now) } else { schedule.stop() }
            }
        } else {
            schedule.stop()
        }
    }

    private func readAll() {
        var buf = [UInt8](repeating: 0, count: 16_384 + 2048)
        while true {
            ERR_clear_error()
            let n = buf.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                received.append(Array(buf[0..<Int(n)]))
                continue
            }
            let e = SSL_get_error(ssl, n)
            switch e {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return
            case SSL_ERROR_ZERO_RETURN:
                state = .closed
                return
            default:
                fail(OpenSSLError.drain("\(isDTLS ? "DTLS" : "TLS") read"))
                return
            }
        }
    }

    private func finishHandshake() {
        if isDTLS {
            // Belt and braces: the verify callback already checked this.
            guard let der = peerCertificateDER, let verifier, verifier.check(der: der) else {
                fail(fingerprintError())
                return
            }
            if requireSRTP && selectedSRTPProfileID == nil {
                fail(CastError(.handshake, "DTLS handshake: the peer did not negotiate use_srtp (RFC 5764 §4.1.2); no SRTP keys"))
                return
            }
        } else if SSL_get_verify_result(ssl) != Int(X509_V_OK) {
            fail(certificateError())
            return
        }
        state = .connected
    }

    private func handshakeError(_ sslError: Int32) -> CastError {
        if let verifier, verifier.mismatch {
            ERR_clear_error()
            return fingerprintError()
        }
        if !isDTLS, SSL_get_verify_result(ssl) != Int(X509_V_OK) {
            ERR_clear_error()
            return certificateError()
        }
        var e = OpenSSLError.drain("\(isDTLS ? "DTLS" : "TLS") handshake\(hostname.map { " with \($0)" } ?? "")")
        e.code = .handshake
        return e
    }

    private func fingerprintError() -> CastError {
        CastError(.fingerprintMismatch,
                  "DTLS handshake: the peer's certificate does not match the \(CertificateFingerprint.name(of: verifier?.expected.algorithm ?? .sha256)) fingerprint in its SDP; connection closed, no media sent")
    }

    private func certificateError() -> CastError {
        let v = SSL_get_verify_result(ssl)
        let reason = String(cString: X509_verify_cert_error_string(v))
        return CastError(.certificate, "TLS: the certificate of \(hostname ?? "the server") was not accepted: \(reason)")
    }

    private func fail(_ error: CastError) {
        if case .failed = state { return }
        state = .failed(error)
        schedule.stop()
        // If OpenSSL itself finished the handshake (a check of ours failed
        // afterwards), tell the peer with close_notify rather than leave it
        // believing the connection is up.
        if SSL_is_init_finished(ssl) == 1 {
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        }
    }

    // MARK: - After the handshake

    /// The peer's certificate (DER), once it has been received.
    public var peerCertificateDER: [UInt8]? {
        guard let x = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(x) }
        return try? Certificate.encode(x)
    }

    /// The negotiated SRTP protection profile (RFC 5764 §4.1.2 ids:
    /// 0x0001 AES128_CM_HMAC_SHA1_80, 0x0007 AEAD_AES_128_GCM), if any.
    public var selectedSRTPProfileID: UInt16? {
        guard let p = SSL_get_selected_srtp_profile(ssl) else { return nil }
        return UInt16(truncatingIfNeeded: p.pointee.id)
    }

    /// RFC 5705 keying material exporter, only once connected.
    public func exportKeyingMaterial(label: String, length: Int) throws -> Redacted<[UInt8]> {
        guard state == .connected else {
            throw CastError(.notConnected, "cannot export keying material: the handshake has not completed")
        }
        var out = [UInt8](repeating: 0, count: length)
        let labelBytes = Array(label.utf8)
        let r = labelBytes.withUnsafeBufferPointer { lb in
            lb.withMemoryRebound(to: CChar.self) { l in
                SSL_export_keying_material(ssl, &out, length, l.baseAddress, l.count, nil, 0, 0)
            }
        }
        guard r == 1 else { throw OpenSSLError.drain("exporting keying material") }
        return Redacted(out)
    }
}
