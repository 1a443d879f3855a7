import CastCore

/// When to retransmit the last DTLS handshake flight, on the clock the owner
/// passes in (RFC 6347 §4.2.4.1): 1 s for a new flight, doubled at each
/// retransmission up to 60 s, and give up after `maxRetransmissions`.
///
/// Pure: no clock, no OpenSSL. `SSLEngine` tells it when a flight was sent
/// or answered and asks it whether a deadline has passed.
public struct DTLSRetransmitSchedule: Equatable, Sendable {
    public enum Expiry: Equatable, Sendable {
        /// No flight is waiting, or its deadline has not come.
        case notYet
        /// Retransmit the flight now (the `n`th retransmission, from 1).
        case retransmit(Int)
        /// `maxRetransmissions` went unanswered.
        case giveUp
    }

    public var initialInterval: Duration
    public var maximumInterval: Duration
    public var maxRetransmissions: Int

    public private(set) var deadline: Instant?
    public private(set) var interval: Duration
    public private(set) var retransmissions = 0

    /// Defaults: RFC 6347 §4.2.4.1's 1 s initial timer and 60 s ceiling; six
    /// retransmissions (1+2+4+8+16+32 s), then a last 60 s wait: the
    /// handshake is declared dead 123 s after the flight was first sent.
    /// OpenSSL itself aborts after 12 (`DTLS1_TMO_ALERT_COUNT`), so the
    /// schedule always decides first.
    public init(initialInterval: Duration = .seconds(1), maximumInterval: Duration = .seconds(60), maxRetransmissions: Int = 6) {
        self.initialInterval = initialInterval
        self.maximumInterval = maximumInterval
        self.maxRetransmissions = maxRetransmissions
        self.interval = initialInterval
    }

    /// A new flight went out at `now`: its timer starts at the initial value.
    public mutating func flightSent(now: Instant) {
        interval = initialInterval
        retransmissions = 0
        deadline = now + interval
    }

    /// The flight was answered (or the handshake ended): no timer.
    public mutating func stop() {
        deadline = nil
        interval = initialInterval
        retransmissions = 0
    }

    /// Called when the owner's clock reaches or passes `deadline`.
    public mutating func expire(now: Instant) -> Expiry {
        guard let d = deadline, now >= d else { return .notYet }
        guard retransmissions < maxRetransmissions else {
            deadline = nil
            return .giveUp
        }
        retransmissions += 1
        let doubled = interval * 2
        interval = doubled > maximumInterval ? maximumInterval : doubled
        deadline = now + interval
        return .retransmit(retransmissions)
    }
}
