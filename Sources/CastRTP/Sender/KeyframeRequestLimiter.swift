import CastCore

/// Turns PLI and FIR into keyframe requests to the encoder, at most one per
/// 500 ms (the screencast receiver's rule: it sends PLI at most every 500 ms,
/// and an IDR already on its way answers any request made meanwhile). A FIR
/// repeated with the same sequence number is a retransmission of a request
/// already seen (RFC 5104 §4.3.1.2) and is ignored.
public struct KeyframeRequestLimiter: Sendable {
    public let minimumInterval: Duration
    public private(set) var lastRequest: Instant?
    private var lastFIRSequence: [UInt32: UInt8] = [:]

    public init(minimumInterval: Duration = .milliseconds(500)) {
        self.minimumInterval = minimumInterval
    }

    /// True when the encoder should produce a keyframe now.
    public mutating func pictureLoss(now: Instant) -> Bool { admit(now) }

    /// True when the encoder should produce a keyframe now.
    public mutating func fullIntraRequest(from sender: UInt32, sequenceNumber: UInt8, now: Instant) -> Bool {
        if lastFIRSequence[sender] == sequenceNumber { return false }
        lastFIRSequence[sender] = sequenceNumber
        return admit(now)
    }

    /// A keyframe the encoder made for another reason also counts.
    public mutating func keyframeSent(now: Instant) {
        lastRequest = now
    }

    private mutating func admit(_ now: Instant) -> Bool {
        if let last = lastRequest, now - last < minimumInterval { return false }
        lastRequest = now
        return true
    }
}
