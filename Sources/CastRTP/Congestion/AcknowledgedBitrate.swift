import CastCore

/// The rate at which the receiver acknowledged our bytes (libwebrtc
/// `BitrateEstimator`): bytes are summed by arrival time in windows of 500 ms
/// for the first sample, then 150 ms; each window's rate is blended into the
/// estimate with a weight that falls as the sample departs from it (a
/// Bayesian update with uncertainty 10 × |estimate − sample| / estimate and a
/// process noise of 5 kbit/s²). Rates in bits per second.
struct AcknowledgedBitrate: Sendable {
    static let initialWindowMs = 500.0
    static let windowMs = 150.0
    static let uncertaintyScale = 10.0
    static let uncertaintyScaleInALR = 20.0
    static let processNoise = 5.0   // kbit/s, added to the variance per sample

    private var windowStart: Double?
    private var windowBytes = 0
    private var estimateKbps: Double?
    private var varianceKbps2 = 50.0
    private var lastArrival: Double?

    var bitsPerSecond: Double? { estimateKbps.map { $0 * 1000 } }

    /// The application-limited region ended: the rate is about to jump, and the
    /// estimate describes a still screen, not the link. libwebrtc only widens the
    /// variance (`ExpectFastRateChange`, + 200); with an estimate of 60 kbit/s the
    /// uncertainty scales with |estimate − sample| / estimate, so that barely moves
    /// it, and an over-use back-off from it would collapse the rate (our fake-clock
    /// still-minute test fell to 0.8 of 3 Mbit/s). We start over instead: the next
    /// 500 ms window is the new estimate.
    mutating func expectFastRateChange() {
        estimateKbps = nil
        varianceKbps2 = 50
        windowStart = nil
        windowBytes = 0
    }

    /// A packet the receiver acknowledged, at `arrivalMs` on its clock.
    mutating func acknowledged(bytes: Int, arrivalMs: Double, applicationLimited: Bool) {
        // A receiver clock that went back, or a gap of seconds, starts a fresh window.
        if let last = lastArrival, arrivalMs < last || arrivalMs - last > 3000 { windowStart = nil; windowBytes = 0 }
        lastArrival = arrivalMs
        guard let start = windowStart else { windowStart = arrivalMs; windowBytes = bytes; return }
        let length = estimateKbps == nil ? Self.initialWindowMs : Self.windowMs
        if arrivalMs - start >= length {
            let sample = Double(windowBytes) * 8 / (arrivalMs - start)   // kbit/s
            blend(sample, applicationLimited: applicationLimited)
            windowStart = arrivalMs
            windowBytes = 0
        }
        windowBytes += bytes
    }

    private mutating func blend(_ sample: Double, applicationLimited: Bool) {
        guard let e = estimateKbps else { estimateKbps = sample; return }
        let scale = applicationLimited ? Self.uncertaintyScaleInALR : Self.uncertaintyScale
        let uncertainty = scale * abs(e - sample) / max(e, 1)
        let sampleVariance = uncertainty * uncertainty
        let predicted = varianceKbps2 + Self.processNoise
        guard sampleVariance + predicted > 0 else { return }
        estimateKbps = (sampleVariance * e + predicted * sample) / (sampleVariance + predicted)
        varianceKbps2 = sampleVariance * predicted / (sampleVariance + predicted)
    }
}
