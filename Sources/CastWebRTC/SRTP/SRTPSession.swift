import CastCore
import CSRTP

extension CastError.Code {
    /// libsrtp refused a packet or a policy for another reason.
    public static let srtp = Self("srtp")
    /// An SRTP/SRTCP packet failed authentication (tampered, wrong key).
    public static let srtpAuthentication = Self("srtp-auth")
    /// An SRTP/SRTCP packet was replayed or is too old for the window (RFC 3711 §3.3.2).
    public static let srtpReplay = Self("srtp-replay")
}

/// `srtp_init` exactly once per process (libsrtp requires it before any
/// session); Swift runs a global's initializer once, thread-safely.
private let srtpLibraryStatus: srtp_err_status_t = srtp_init()

/// One direction of SRTP/SRTCP with libsrtp2 (RFC 3711, RFC 7714 for GCM):
/// outbound sessions protect, inbound sessions unprotect. Replay protection
/// is on (RFC 3711 §3.3.2). The key never reaches a log or an error text.
///
/// The one owner of its `srtp_t` (freed in `deinit`). Not thread-safe:
/// one owner, like every other protocol object in castd.
public final class SRTPSession: CustomStringConvertible {
    public enum Direction: Sendable { case outbound, inbound }

    public let profile: SRTPProfile
    public let direction: Direction
    private let session: srtp_t

    /// Room libsrtp may append: SRTP_MAX_TRAILER_LEN (tag 16 + MKI 128) plus
    /// the 4-byte SRTCP index; composite macros that Swift does not import.
    private static let trailerRoom = 16 + 128 + 4

    /// - Parameters:
    ///   - replayWindow: packets (64...32768) remembered for replay checks.
    ///   - allowRepeatTransmit: outbound only - let the same RTP sequence
    ///     number be protected twice (a retransmission of identical bytes).
    public init(profile: SRTPProfile, key: Redacted<[UInt8]>, salt: Redacted<[UInt8]>, direction: Direction,
                replayWindow: Int = 1024, allowRepeatTransmit: Bool = false) throws {
        guard srtpLibraryStatus == srtp_err_status_ok else {
            throw CastError(.srtp, "libsrtp failed to initialise (status \(srtpLibraryStatus.rawValue))")
        }
        guard key.unredacted.count == profile.keyLength, salt.unredacted.count == profile.saltLength else {
            throw CastError(.srtp, "\(profile) needs a \(profile.keyLength)-byte key and a \(profile.saltLength)-byte salt")
        }
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CmHmacSha1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAes128Gcm:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = UInt(replayWindow)
        policy.allow_repeat_tx = allowRepeatTransmit ? 1 : 0
        policy.next = nil
        var master = key.unredacted + salt.unredacted  // libsrtp copies it
        var s: srtp_t? = nil
        let status = master.withUnsafeMutableBufferPointer { buf -> srtp_err_status_t in
            policy.key = buf.baseAddress
            return srtp_create(&s, &policy)
        }
        for i in master.indices { master[i] = 0 }
        guard status == srtp_err_status_ok, let s else {
            throw Self.error(status, "creating an \(direction) SRTP session for \(profile)")
        }
        self.profile = profile
        self.direction = direction
        self.session = s
    }

    deinit { srtp_dealloc(session) }

    public var description: String { "SRTPSession(\(profile), \(direction))" }

    /// RTP → SRTP (RFC 3711 §3.3).
    public func protectRTP(_ packet: [UInt8]) throws -> [UInt8] {
        try run(packet, grow: true, "protecting RTP") { srtp_protect(session, $0, $1) }
    }

    /// RTCP → SRTCP (RFC 3711 §3.4).
    public func protectRTCP(_ packet: [UInt8]) throws -> [UInt8] {
        try run(packet, grow: true, "protecting RTCP") { srtp_protect_rtcp(session, $0, $1) }
    }

    /// SRTP → RTP, authenticated and replay-checked.
    public func unprotectRTP(_ packet: [UInt8]) throws -> [UInt8] {
        try run(packet, grow: false, "unprotecting SRTP") { srtp_unprotect(session, $0, $1) }
    }

    /// SRTCP → RTCP, authenticated and replay-checked.
    public func unprotectRTCP(_ packet: [UInt8]) throws -> [UInt8] {
        try run(packet, grow: false, "unprotecting SRTCP") { srtp_unprotect_rtcp(session, $0, $1) }
    }

    private func run(_ packet: [UInt8], grow: Bool, _ what: String,
                     _ op: (UnsafeMutableRawPointer, UnsafeMutablePointer<Int32>) -> srtp_err_status_t) throws -> [UInt8] {
        let expectProtect = direction == .outbound
        guard grow == expectProtect else {
            throw CastError(.srtp, "\(what) needs an \(grow ? "outbound" : "inbound") session")
        }
        guard packet.count >= (grow ? 8 : 12), packet.count <= 65_536 else {
            throw CastError(.srtp, "\(what): a \(packet.count)-byte packet is not a valid length")
        }
        var buf = packet + [UInt8](repeating: 0, count: grow ? Self.trailerRoom : 0)
        var len = Int32(packet.count)
        let status = buf.withUnsafeMutableBytes { op($0.baseAddress!, &len) }
        guard status == srtp_err_status_ok else { throw Self.error(status, what) }
        return Array(buf[0..<Int(len)])
    }

    private static func error(_ status: srtp_err_status_t, _ what: String) -> CastError {
        switch status {
        case srtp_err_status_auth_fail:
            return CastError(.srtpAuthentication, "\(what): authentication failed (tampered packet or wrong key)")
        case srtp_err_status_replay_fail, srtp_err_status_replay_old:
            return CastError(.srtpReplay, "\(what): replayed or too old for the replay window")
        default:
            return CastError(.srtp, "\(what): libsrtp status \(status.rawValue)")
        }
    }
}
