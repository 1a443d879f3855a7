import CastCore
import CastOpenSSL

/// The DTLS role of castd's WebRTC transport (RFC 5763, RFC 5764): runs the
/// handshake over datagrams the owner moves, checks the peer by the
/// fingerprint from its SDP, and yields SRTP keys.
///
/// Sans IO: `handleDatagram`/`handleTimeout` in, `pollTransmit`/`pollEvent`
/// out, `nextDeadline` for the owner's timer (str0m's shape). One owner.
public final class DTLSTransport {
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
        /// The handshake failed (fingerprint mismatch, timeout, alert). No keys.
        case failed(CastError)
    }

    public let role: Role
    public private(set) var keyingMaterial: SRTPKeyingMaterial?
    private let engine: SSLEngine
    private var events: [Event] = []
    private var finished = false

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

    /// Starts the handshake (the client sends its ClientHello; a server waits).
    public func start(now: Instant) {
        engine.start(now: now)
        update()
    }

    /// A datagram from the selected ICE pair whose first byte says DTLS.
    public func handleDatagram(_ datagram: [UInt8], now: Instant) {
        engine.feed(datagram, now: now)
        update()
    }

    public func handleTimeout(now: Instant) {
        engine.handleTimeout(now: now)
        update()
    }

    /// The next datagram to send to the peer.
    public func pollTransmit() -> [UInt8]? { engine.pollOutgoing() }

    /// `connected` or `failed`, exactly once.
    public func pollEvent() -> Event? { events.isEmpty ? nil : events.removeFirst() }

    public func nextDeadline() -> Instant? { engine.nextDeadline() }

    public var isConnected: Bool { engine.state == .connected && keyingMaterial != nil }

    /// Sends close_notify (the peer's DTLS ends too).
    public func close() { engine.close() }

    private func update() {
        guard !finished else { return }
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
                events.append(.connected(keys))
            } catch let e as CastError {
                engine.close()
                events.append(.failed(e))
            } catch {
                engine.close()
                events.append(.failed(CastError(.handshake, "DTLS: \(error)")))
            }
        case .failed(let e):
            finished = true
            events.append(.failed(e))
        case .closed:
            finished = true
            events.append(.failed(CastError(.handshake, "DTLS: the peer closed the connection during the handshake")))
        case .idle, .handshaking:
            break
        }
    }
}
