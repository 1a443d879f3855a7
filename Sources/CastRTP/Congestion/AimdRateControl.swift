import CastCore

/// The rate controller of GCC (draft-ietf-rmcat-gcc-02 §5.5; libwebrtc
/// `AimdRateControl`): increase while the detector says normal, hold while it
/// says under-use (the queue is draining), decrease to 0.85 × the
/// acknowledged rate on over-use (0.85 × the estimate while application-limited).
/// Rates in bits per second.
struct AimdRateControl: Sendable {
    /// β: on over-use the rate becomes 0.85 × what the receiver got (gcc-02 §5.5).
    static let beta = 0.85
    /// η: multiplicative increase of 8 % per second far from the last congestion
    /// rate (gcc-02 §5.5 "η ∈ [1.005, 1.3]"; libwebrtc uses 1.08 per second).
    static let eta = 1.08
    /// Near the congestion rate: about one packet per response time, at least
    /// 4 kbit/s per second (libwebrtc `GetNearMaxIncreaseRateBpsPerSecond`,
    /// response time = RTT + 100 ms, 30 fps frames split in 1200-byte packets).
    static let minNearMaxIncrease = 4_000.0
    /// While application-limited the estimate may not climb beyond 1.5 × the
    /// acknowledged rate + 10 kbit/s (libwebrtc AimdRateControl throughput limit).
    static let throughputFactor = 1.5
    static let throughputMargin = 10_000.0
    /// The link-capacity average (exponential, α = 0.05) and its deviation band
    /// of ±3 σ (libwebrtc `LinkCapacityEstimator`).
    static let capacityAlpha = 0.05

    enum Phase { case hold, increase, decrease }

    private(set) var bitrate: Double
    private(set) var phase = Phase.increase
    private var lastChange: Instant?
    /// The acknowledged rate at over-use, averaged: where congestion was last seen
    /// (nil once the estimate has passed its ±3 σ band, or before any over-use).
    private(set) var capacity: Double?
    private var capacityVariance = 0.4   // normalised, as libwebrtc starts it
    private(set) var lastDecrease: Instant?

    init(start: Double) { bitrate = start }

    mutating func set(_ rate: Double, now: Instant) {
        bitrate = rate
        lastChange = now
    }

    /// Applies the detector's verdict at `now`; `acked` is the acknowledged rate
    /// (nil before the first estimate), `rtt` the latest round-trip time.
    mutating func update(_ usage: BandwidthUsage, acked: Double?, applicationLimited: Bool, rtt: Duration,
                         bounds: ClosedRange<Double>, now: Instant) {
        switch usage {
        case .normal: if phase == .hold { phase = .increase }
        case .overusing: phase = .decrease
        case .underusing: phase = .hold
        }
        let dt = lastChange.map { min(max((now - $0).seconds, 0), 1) } ?? 0
        lastChange = now
        switch phase {
        case .hold:
            break
        case .increase:
            if let c = capacity, bitrate > c + 3 * deviation(c) { capacity = nil }   // the link got faster: forget it
            var next: Double
            if let c = capacity, bitrate < c + 3 * deviation(c) {
                next = bitrate + nearMaxIncreasePerSecond(rtt: rtt) * dt
            } else {
                next = bitrate * Self.etaPower(dt)
            }
            // Never climb on an application-limited stream beyond what it shows it can use,
            // but never fall because of it either.
            if let a = acked {
                let limit = Self.throughputFactor * a + Self.throughputMargin
                if applicationLimited || next > limit { next = max(bitrate, min(next, limit)) }
            }
            bitrate = next
        case .decrease where applicationLimited:
            // Application-limited, the acknowledged rate is the picture's, not the link's: a still
            // screen's 70 kbit/s says nothing of a 50 Mbit/s path. An over-use there comes from a
            // burst (a key frame at the pacing rate) or from a receiver that read its packets late,
            // so the estimate backs off from itself and the capacity is left alone. A link that
            // really fell below the picture's rate still shows: its standing queue makes the
            // sender drain from the delivery rate (SendSideBandwidthEstimator), and once the
            // estimate nears what is sent the stream is no longer application-limited.
            bitrate = Self.beta * bitrate
            lastDecrease = now
            phase = .hold
        case .decrease:
            let base = acked ?? bitrate
            var next = Self.beta * base
            if next > bitrate, let c = capacity { next = Self.beta * c }   // acked above the estimate: stale
            next = min(next, bitrate)
            if let a = acked {
                // Throughput far below the capacity band: the link changed; start the average
                // over rather than drag the old one down at 5 % a sample (libwebrtc resets too).
                if let c = capacity, a < c - 3 * deviation(c) { capacity = nil }
                updateCapacity(a)
            }
            bitrate = next
            lastDecrease = now
            phase = .hold
        }
        bitrate = min(max(bitrate, bounds.lowerBound), bounds.upperBound)
    }

    /// η^dt for dt in 0…1 s without libm: the exponential series of dt·ln η to
    /// the 4th term (error under 1e-6 for η = 1.08).
    static func etaPower(_ dt: Double) -> Double {
        let x = dt * 0.076_961_041_136_128_33   // ln 1.08
        return 1 + x + x * x / 2 + x * x * x / 6 + x * x * x * x / 24
    }

    private func deviation(_ c: Double) -> Double { (capacityVariance * c).squareRoot() * 1000.0.squareRoot() }

    private mutating func updateCapacity(_ sample: Double) {
        guard let c = capacity else { capacity = sample; return }
        let next = (1 - Self.capacityAlpha) * c + Self.capacityAlpha * sample
        let norm = max(next, 1)
        let e = next - sample
        capacityVariance = (1 - Self.capacityAlpha) * capacityVariance + Self.capacityAlpha * e * e / norm / 1000
        capacityVariance = min(max(capacityVariance, 0.4), 2.5)
        capacity = next
    }

    private func nearMaxIncreasePerSecond(rtt: Duration) -> Double {
        let bitsPerFrame = bitrate / 30
        let packetsPerFrame = (bitsPerFrame / (8 * 1200)).rounded(.up)
        let packetBits = bitsPerFrame / max(packetsPerFrame, 1)
        let response = rtt.seconds + 0.1
        return max(Self.minNearMaxIncrease, packetBits / response)
    }
}
