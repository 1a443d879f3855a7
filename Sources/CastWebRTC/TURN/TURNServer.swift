import CastCore

/// How castd reaches a TURN server (RFC 8656 §3.1): `turn:host?transport=udp` (the
/// default), `turn:host?transport=tcp`, or `turns:host` (TLS over TCP).
public enum TURNTransport: String, Sendable, Equatable {
    case udp, tcp, tls

    /// Over TCP and TLS the server's bytes arrive as a stream that must be framed, and
    /// ChannelData is padded (RFC 8656 §12.5); nothing is retransmitted (RFC 8489 §6.2.2).
    public var isStream: Bool { self != .udp }
}

/// One TURN server from ice-config, resolved, with its long-term credentials
/// (RFC 8489 §9.2). `name` is what errors and logs call it: the ice-config URL,
/// which never carries the credentials.
public struct TURNServer: Sendable, Equatable {
    public var address: SocketAddress
    public var transport: TURNTransport
    public var name: String
    /// The host as the URL names it: what a TLS connection checks the certificate against
    /// (a DNS name, or the IP literal itself).
    public var host: String
    public var username: String
    public var password: Redacted<String>

    public init(address: SocketAddress, transport: TURNTransport, name: String, host: String? = nil,
                username: String, password: String) {
        self.address = address
        self.transport = transport
        self.name = name
        self.host = host ?? address.ip.description
        self.username = username
        self.password = Redacted(password)
    }
}

/// Timers and bounds of the TURN client. Defaults follow RFC 8489 §6.2 and RFC 8656.
public struct TURNTiming: Sendable {
    /// RFC 8489 §6.2.1: RTO starts at 500 ms (it "SHOULD be greater than 500 ms") and doubles.
    public var initialRTO: Duration = .milliseconds(500)
    /// RFC 8489 §6.2.1: Rc = 7 transmissions.
    public var maxTransmissions = 7
    /// RFC 8489 §6.2.1: after the last transmission, wait Rm × RTO (Rm = 16) before giving up.
    public var lastWaitMultiplier = 16
    /// RFC 8489 §6.2.2: over TCP/TLS one transmission and Ti = 39.5 s.
    public var reliableTimeout: Duration = .milliseconds(39_500)
    /// LIFETIME asked for in Allocate and Refresh (RFC 8656 §7.1): the default of §3.2, 600 s,
    /// said out loud so that a server's maximum applies (coturn caps only what is asked for);
    /// nil leaves the attribute out.
    public var requestedLifetime: UInt32? = 600
    /// Refresh the allocation this long before it expires (the lifetime − 60 s); for
    /// lifetimes of 2 minutes or less, at half the lifetime instead.
    public var allocationRefreshMargin: Duration = .seconds(60)
    /// RFC 8656 §9: permissions last 300 s; refreshed every 4 minutes.
    public var permissionRefresh: Duration = .seconds(240)
    /// RFC 8656 §12: channel bindings last 10 minutes; rebound after 9.
    public var channelRefresh: Duration = .seconds(540)
    /// The final Refresh (LIFETIME 0, RFC 8656 §8) is sent at most this many times: the cast
    /// is over and nothing should wait long on it.
    public var closeTransmissions = 2
    /// 438 Stale Nonce answers followed per request before giving up (RFC 8489 §9.2.5 has no bound).
    public var maxStaleNonceRetries = 3

    public init() {}
}

extension CastError.Code {
    /// The server refused the credentials after the authenticated retry (401 or 441).
    public static let turnUnauthorized = Self("turn-unauthorized")
    /// 437: the server already holds an allocation for this local address.
    public static let turnAllocationMismatch = Self("turn-allocation-mismatch")
    /// 508 Insufficient Capacity or 486 Allocation Quota Reached.
    public static let turnNoCapacity = Self("turn-no-capacity")
    /// No answer after the RFC 8489 retransmission schedule.
    public static let turnTimeout = Self("turn-timeout")
    /// Any other error response.
    public static let turnRejected = Self("turn-rejected")
    /// The TCP or TLS connection to the server could not be made, or was lost (RFC 8656 §3.1:
    /// the allocation lives and dies with that connection).
    public static let turnConnection = Self("turn-connection")
}
