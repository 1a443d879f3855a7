import CastCore

/// The packet loss the Opus encoder should plan for, from the receiver's reports.
///
/// libopus codes in-band FEC (LBRR, RFC 6716 §4.2.4) only in SILK/hybrid mode,
/// and for music it leaves full-band CELT only once the expected loss passes
/// about 8 % (measured in stage 1: hybrid at 10 %, CELT at 5 %, and FEC at 5 %
/// restored nothing). So: the first report of any loss plans for at least
/// `minimumWhenLossy` (the reported loss when higher, capped at `maximum`);
/// after `cleanAfter` with only loss-free reports the plan returns to 0 %, and
/// the clean link gets full-band CELT back.
///
/// Pure: reports in with their instant, `expectedLossPercent` out.
public struct OpusLossPlan: Sendable, Equatable {
    public var minimumWhenLossy: Int
    public var maximum: Int
    public var cleanAfter: Duration
    public private(set) var expectedLossPercent = 0
    private var lastLossAt: Instant?

    public init(minimumWhenLossy: Int = 10, maximum: Int = 25, cleanAfter: Duration = .seconds(10)) {
        self.minimumWhenLossy = minimumWhenLossy
        self.maximum = max(maximum, minimumWhenLossy)
        self.cleanAfter = cleanAfter
    }

    /// One report block's fraction lost (RFC 3550 §6.4.1, 0…1) at `now`.
    /// Returns true when the plan changed (the encoder should be told).
    @discardableResult
    public mutating func report(fractionLost: Double, now: Instant) -> Bool {
        let before = expectedLossPercent
        if fractionLost > 0, fractionLost.isFinite {
            lastLossAt = now
            let reported = Int((min(fractionLost, 1) * 100).rounded(.up))
            expectedLossPercent = min(max(minimumWhenLossy, reported), maximum)
        } else if let last = lastLossAt, now - last >= cleanAfter {
            lastLossAt = nil
            expectedLossPercent = 0
        }
        return expectedLossPercent != before
    }
}
