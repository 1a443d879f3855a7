import CastCore
import CastOpenSSL

extension CastError.Code {
    /// An established DTLS connection ended (close_notify or fatal alert).
    public static let dtlsClosed = Self("dtls-closed")
}

/// The DTLS role of castd's WebRTC transport (RFC 5763, RFC 5764): runs the
/// handshake over datagrams the owner moves, checks the peer by the
/// fingerprint from its SDP, and yields SRTP keys.
///
/// Sans IO, the one contract (`SansIO` in CastCore): `handle(.start / .datagram /
/// .close, now:)` and `handleTimeout(now:)` in, `poll()` until nil out (`.transmit`
/// records and `.event`s in decision order), `nextDeadline()` for the owner's timer.
/// One owner. A reference type, unlike the other machines: it wraps OpenSSL's `SSL`
/// state (`SSLEngine`: memory BIOs, retransmissions on the caller's clock), which cannot
/// be copied; it does no IO and reads no clock. What OpenSSL writes is moved into the
/// output queue as each input is handled, before the events that input decided.
public final class DTLSTransport: SansIO {
    public enum Input: Sendable, Equatable {
        /// Start the handshake (the client sends its ClientHello; a server waits).
        case start
        /// A datagram from the selected ICE pair whose first byte says DTLS.
        case datagram([UInt8])
        /// Send close_notify (the peer's DTLS ends too); reports `dtls-closed` if it was connected.
        case close
    }

    public enum Output: Sendable, Equatable {
        /// A DTLS record for the peer.
        case transmit([UInt8])
        case event(Event)
    }

    public enum Role: Sendable, Equatable {
        case client, server

        /// castd offers `a=setup:actpass`; the answer decides (RFC 5763 §5):
        /// an `active` answerer is the DTLS client, so castd is the server;
        /// a `passive` one makes castd the client. Nil for anything else.
        public init?(answerSetup: String) {
            switch answerSetup.lowercased() {
            case "active": self = .server
            case "passive": self = .client
            default: return nil
            }
        }
    }

    public enum Event: Equatable, Sendable {
        /// The handshake finished and the peer is who its SDP said.
        case connected(SRTPKeyingMaterial)
        /// The handshake failed (fingerprint mismatch, timeout, alert): no
        /// keys. Or, after `connected`, the connection ended (code
        /// `dtls-closed`: close_notify or a fatal alert, RFC 5246 §7.2):
        /// the media session is over.
        case failed(CastError)
    }

    public let role: Role
    public private(set) var keyingMaterial: SRTPKeyingMaterial?
    private let engine: SSLEngine
    private var outputs = OutputQueue<Output>()
    private var finished = false
    private var closedReported = false

    public init(role: Role, certificate: Certificate, remoteFingerprint: CertificateFingerprint,
                mtu: Int = 1200, schedule: DTLSRetransmitSchedule = .init()) throws {
        self.role = role
        engine = try SSLEngine(dtls: .init(
            role: role == .client ? .client : .server, certificate: certificate,
            remoteFingerprint: remoteFingerprint, mtu: mtu,
            srtpProfiles: SRTPProfile.offer.map(\.openSSLName).joined(separator: ":"),
            schedule: schedule))
    }

    /// RFC 7983 §7: a first byte in 20...63 is DTLS (STUN is 0...3, RTP/RTCP 128...191).
    public static func isDTLS(firstByte: UInt8) -> Bool { (20...63).contains(firstByte) }

    public func handle(_ input: Input, now: Instant) {
        switch input {
        case .start: engine.start(now: now)
        case .datagram(let d): engine.feed(d, now: now)
        case .close: engine.close()
        }
        update()
    }

    public func handleTimeout(now: Instant) {
        engine.handleTimeout(now: now)
        update()
    }

    /// The next record to send or event, in decision order; nil when drained. The events:
    /// `connected` or `failed`, exactly once; after `connected`, at most one `failed` with
    /// code `dtls-closed`.
    public func poll() -> Output? { outputs.pop() }

    public func nextDeadline() -> Instant? { engine.nextDeadline() }

    public var isConnected: Bool { engine.state == .connected && keyingMaterial != nil }

    /// What OpenSSL wrote so far goes out first: it was decided before the events below.
    private func takeRecords() {
        while let d = engine.pollOutgoing() { outputs.push(.transmit(d)) }
    }

    private func update() {
        // castd opens no data channel: DTLS application data has no reader.
        while engine.readApplication() != nil {}
        takeRecords()
        if finished {
            if keyingMaterial != nil, !closedReported {
                switch engine.state {
                case .closed:
                    closedReported = true
                    outputs.push(.event(.failed(CastError(.dtlsClosed, "DTLS: the connection was closed (close_notify); media stopped"))))
                case .failed(let e):
                    closedReported = true
                    outputs.push(.event(.failed(CastError(.dtlsClosed, "DTLS: the connection ended: \(e.message)"))))
                default:
                    break
                }
            }
            return
        }
        switch engine.state {
        case .connected:
            finished = true
            do {
                guard let id = engine.selectedSRTPProfileID, let profile = SRTPProfile(rawValue: id) else {
                    throw CastError(.handshake, "DTLS: the peer selected no SRTP profile castd offered")
                }
                let exported = try engine.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: profile.exporterLength)
                let keys = try SRTPKeyingMaterial(exported: exported, profile: profile, isClient: role == .client)
                keyingMaterial = keys
                outputs.push(.event(.connected(keys)))
            } catch let e as CastError {
                engine.close()
                takeRecords()
                outputs.push(.event(.failed(e)))
            } catch {
                engine.close()
                takeRecords()
                outputs.push(.event(.failed(CastError(.handshake, "DTLS: \(error)"))))
            }
        case .failed(let e):
            finished = true
            outputs.push(.event(.failed(e)))
        case .closed:
            finished = true
            outputs.push(.event(.failed(CastError(.handshake, "DTLS: the peer closed the connection during the handshake"))))
        case .idle, .handshaking:
            break
        }
    }
}
