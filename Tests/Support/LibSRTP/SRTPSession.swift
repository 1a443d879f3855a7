import CastCore
import CastWebRTC
import CSRTP

// libsrtp2, test only since issue 19: the oracle that castd's own SRTP (`SRTPProtector`) and
// SRTCP (`SRTCPUnprotector`) are checked against byte for byte, and the other end of the
// tests' DTLS-SRTP peers. castd itself no longer links it (Debian's is built on NSS: 2.9 MiB
// resident).

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

    /// Room libsrtp may write past the end of a packet it protects: SRTP_MAX_TRAILER_LEN
    /// (tag 16 + MKI 128, `srtp.h`) plus the 4-byte SRTCP index (RFC 3711 §3.4); composite
    /// macros that Swift does not import. A packet built with this much spare capacity
    /// (`reserveCapacity(count + trailerCapacity)`) is protected in place without a copy.
    public static let trailerCapacity = 16 + 128 + 4
    private static let trailerZeros = [UInt8](repeating: 0, count: trailerCapacity)

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

    /// RTP → SRTP (RFC 3711 §3.3), in place: libsrtp encrypts the payload where it lies
    /// and appends the tag. No allocation when `packet` is uniquely referenced and has
    /// `trailerCapacity` bytes of spare capacity; else the array grows as arrays do.
    /// On an error the packet keeps its length but not necessarily its bytes.
    public func protectRTP(inPlace packet: inout [UInt8]) throws {
        try run(&packet, grow: true, "protecting RTP") { srtp_protect(session, $0, $1) }
    }

    /// RTCP → SRTCP (RFC 3711 §3.4), in place, as `protectRTP(inPlace:)`.
    public func protectRTCP(inPlace packet: inout [UInt8]) throws {
        try run(&packet, grow: true, "protecting RTCP") { srtp_protect_rtcp(session, $0, $1) }
    }

    /// RTP → SRTP (RFC 3711 §3.3), into a new array.
    public func protectRTP(_ packet: [UInt8]) throws -> [UInt8] {
        var buf = Self.withTrailerRoom(packet)
        try protectRTP(inPlace: &buf)
        return buf
    }

    /// RTCP → SRTCP (RFC 3711 §3.4), into a new array.
    public func protectRTCP(_ packet: [UInt8]) throws -> [UInt8] {
        var buf = Self.withTrailerRoom(packet)
        try protectRTCP(inPlace: &buf)
        return buf
    }

    /// SRTP → RTP, authenticated and replay-checked.
    public func unprotectRTP(_ packet: [UInt8]) throws -> [UInt8] {
        var buf = packet
        try run(&buf, grow: false, "unprotecting SRTP") { srtp_unprotect(session, $0, $1) }
        return buf
    }

    /// SRTCP → RTCP, authenticated and replay-checked.
    public func unprotectRTCP(_ packet: [UInt8]) throws -> [UInt8] {
        var buf = packet
        try run(&buf, grow: false, "unprotecting SRTCP") { srtp_unprotect_rtcp(session, $0, $1) }
        return buf
    }

    /// A copy of `packet` with room for the trailer: one allocation.
    private static func withTrailerRoom(_ packet: [UInt8]) -> [UInt8] {
        var buf: [UInt8] = []
        buf.reserveCapacity(packet.count + trailerCapacity)
        buf.append(contentsOf: packet)
        return buf
    }

    /// Runs `op` on the packet's bytes where they lie (libsrtp works in place: it
    /// reads `len` bytes and writes the result over them, `len` updated), with
    /// `trailerCapacity` zero bytes appended first when protecting.
    private func run(_ packet: inout [UInt8], grow: Bool, _ what: String,
                     _ op: (UnsafeMutableRawPointer, UnsafeMutablePointer<Int32>) -> srtp_err_status_t) throws {
        let expectProtect = direction == .outbound
        guard grow == expectProtect else {
            throw CastError(.srtp, "\(what) needs an \(grow ? "outbound" : "inbound") session")
        }
        let length = packet.count
        guard length >= (grow ? 8 : 12), length <= 65_536 else {
            throw CastError(.srtp, "\(what): a \(length)-byte packet is not a valid length")
        }
        // Appended from an array, not `repeatElement`: an unspecialised (debug) append of a
        // generic sequence allocates per element.
        if grow { packet.append(contentsOf: Self.trailerZeros) }
        var len = Int32(length)
        let status = packet.withUnsafeMutableBytes { buf -> srtp_err_status_t in
            guard let base = buf.baseAddress else { return srtp_err_status_bad_param }
            return op(base, &len)
        }
        // libsrtp never reports more than it was given room for; checked all the same.
        let result = status == srtp_err_status_ok && len >= 0 && Int(len) <= packet.count ? Int(len) : length
        packet.removeLast(packet.count - result)
        guard status == srtp_err_status_ok else { throw Self.error(status, what) }
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

extension SRTPKeyingMaterial {
    /// A libsrtp session that protects what this side sends.
    public func outboundSession(allowRepeatTransmit: Bool = false) throws -> SRTPSession {
        try SRTPSession(profile: profile, key: localKey, salt: localSalt, direction: .outbound,
                        allowRepeatTransmit: allowRepeatTransmit)
    }

    /// A libsrtp session that unprotects what the peer sends.
    public func inboundSession() throws -> SRTPSession {
        try SRTPSession(profile: profile, key: remoteKey, salt: remoteSalt, direction: .inbound)
    }
}

/// libsrtp's version string (the tests check that the oracle is libsrtp2).
public enum LibSRTP {
    public static var version: String { String(cString: srtp_get_version_string()) }
}
