import CastCore

/// The loss-based bound of GCC (draft-ietf-rmcat-gcc-02 §6; libwebrtc
/// `SendSideBandwidthEstimation`): under 2 % loss the bound may grow 8 % over
/// the lowest target of the last second (+1 kbit/s); between 2 and 10 % it
/// holds; over 10 % it falls to target × (1 − 0.5 · loss), at most once per
/// 300 ms + RTT. Loss is counted over at least 20 packets and 500 ms per reading.
struct LossBasedControl: Sendable {
    static let lowLoss = 0.02
    static let highLoss = 0.10
    static let increaseFactor = 1.08
    static let increaseMargin = 1_000.0
    static let minimumPackets = 20   // libwebrtc kLimitNumPackets
    /// The shortest span a transport-cc reading covers. libwebrtc's classic loss bound reads the
    /// receiver reports' loss, about one a second at video rates; transport-cc feedback comes
    /// every 50–100 ms, and 20 packets are 50 ms at the 4 Mbit/s cap. Over so few packets 5 %
    /// random loss reads above 10 % about one time in thirteen (3 or more of 20), so a link
    /// with steady random loss and room to spare had its bound cut several times a second
    /// (the fault row "Chromium receiver, 5% loss, busy 1080p screen": 2.3–3.2 Mbit/s and
    /// 20 fps for 40 s). Over 500 ms (about 200 packets at the cap) such a reading is rare
    /// (about one in a thousand), and a congested link's loss still shows within half a second.
    static let minimumWindow = Duration.milliseconds(500)
    static let decreaseInterval = Duration.milliseconds(300)
    static let historyLength = Duration.seconds(1)

    private(set) var bound: Double
    private var lost = 0
    private var expected = 0
    private var windowStart: Instant?
    private(set) var lastLossFraction = 0.0
    private var lastDecrease: Instant?
    /// (when, target) of the last second, to grow from its lowest value.
    private var history: [(at: Instant, rate: Double)] = []

    init(start: Double) { bound = start }

    /// The owner's current target, once per update.
    mutating func targetApplied(_ rate: Double, now: Instant) {
        while let f = history.first, now - f.at > Self.historyLength { history.removeFirst() }
        while let l = history.last, l.rate >= rate { history.removeLast() }   // keeps it increasing: front = min
        history.append((now, rate))
    }

    /// Packets counted lost out of `expected`; returns whether a reading was taken.
    mutating func packets(lost l: Int, expected e: Int, target: Double, rtt: Duration, now: Instant) -> Bool {
        guard e > 0 else { return false }
        let start = windowStart ?? now
        windowStart = start
        lost += max(0, min(l, e))
        expected += e
        guard expected >= Self.minimumPackets, now - start >= Self.minimumWindow else { return false }
        let fraction = Double(lost) / Double(expected)
        lost = 0
        expected = 0
        windowStart = nil
        reading(fraction, target: target, rtt: rtt, now: now)
        return true
    }

    /// A fraction lost as a receiver report gives it (RFC 3550 §6.4.1).
    mutating func reading(_ fraction: Double, target: Double, rtt: Duration, now: Instant) {
        let f = min(max(fraction, 0), 1)
        lastLossFraction = f
        if f < Self.lowLoss {
            let low = history.first?.rate ?? target
            bound = max(Self.increaseFactor * low + Self.increaseMargin, min(bound, target))
        } else if f > Self.highLoss {
            if let last = lastDecrease, now - last < Self.decreaseInterval + rtt { return }
            bound = min(bound, target) * (1 - 0.5 * f)
            lastDecrease = now
        }   // 2–10 %: hold
    }

    /// A probe or the owner set the rate outright.
    mutating func raise(to rate: Double) { bound = max(bound, rate) }
}
