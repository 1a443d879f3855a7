import CastCore

/// Converts time on the monotonic clock into RTP timestamp ticks (RFC 3550
/// §5.1: the timestamp advances at the payload's clock rate and wraps mod 2^32).
public enum RTPClock {
    /// Ticks in `nanoseconds` at `rate` Hz, floored toward −∞ and reduced mod 2^32.
    /// Never traps, whatever the input.
    public static func ticks(nanoseconds ns: Int64, rate: UInt32) -> UInt32 {
        let mag = ns.magnitude
        // Split so that no product overflows: mag = q·1e9 + r, ticks = q·rate + r·rate/1e9.
        let q = mag / 1_000_000_000, r = mag % 1_000_000_000
        let whole = q &* UInt64(rate) &+ r * UInt64(rate) / 1_000_000_000
        let exact = (r * UInt64(rate)) % 1_000_000_000 == 0
        let t = UInt32(truncatingIfNeeded: whole)
        if ns >= 0 { return t }
        // Negative: floor, so a capture 1 ns early is one tick (not zero ticks) earlier.
        return 0 &- t &- (exact ? 0 : 1)
    }
}

extension RTPClock {
    /// The 90 kHz timestamp of a capture time relative to the first frame's
    /// (RFC 6184 §5.1, RFC 7741 §4.1: both video payloads use 90 kHz), from a
    /// random start, wrapping mod 2^32.
    public static func videoTimestamp(for t: Instant, origin: Instant, initial: UInt32) -> UInt32 {
        initial &+ ticks(nanoseconds: t.nanoseconds &- origin.nanoseconds, rate: RTPConstants.videoClockRate)
    }
}
