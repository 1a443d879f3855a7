import CastCore

/// What `AudioSender` and `VideoSender` share on their way out: the RTCP sender-report state
/// (RFC 3550 §6.4.1) and the pool of datagram buffers the owner gives back (`recycle`), in
/// which the sender's packets and its reports are built, so that in steady state a datagram
/// costs no allocation (issue 19).
struct SenderReporter: Sendable {
    var reports: RTCPSenderState
    private var buffers: BufferPool

    init(reports: RTCPSenderState, buffers: BufferPool) {
        self.reports = reports
        self.buffers = buffers
    }

    /// An empty buffer to build a datagram in (a recycled one when there is one).
    mutating func takeBuffer() -> [UInt8] { buffers.take() }

    /// The SR + SDES compound due at `now`, built in a pooled buffer; nil when none is due
    /// (a buffer is taken only for a report that is due). Calling it early or twice is harmless.
    mutating func reportIfDue(now: Instant) -> VideoSender.Datagram? {
        guard reports.isReportDue(now: now), let bytes = reports.pollCompound(now: now, into: buffers.take()) else { return nil }
        return .rtcp(bytes)
    }

    /// A datagram's bytes back once they are sent: kept for a later datagram unless too
    /// small or the pool is full (then let go).
    mutating func recycle(_ bytes: consuming [UInt8]) { buffers.give(consume bytes) }

    /// Whether `recycle` would keep a buffer of `capacity` bytes now.
    func wantsBuffer(capacity: Int) -> Bool { buffers.accepts(capacity: capacity) }

    /// Datagram buffers reused from `recycle`, and ones made new.
    var bufferCounts: (reused: Int, made: Int) { (buffers.reused, buffers.made) }
}
