import CastCore

/// What the receiver tells us about the path's capacity; surfaced as is, rate
/// control comes later (issue 4 item 6).
public struct BandwidthEstimate: Equatable, Sendable {
    public enum Source: Equatable, Sendable {
        /// draft-alvestrand-rmcat-remb: the receiver's own estimate.
        case remb
        /// draft-holmer transport-cc: the rate at which our packets arrived.
        case transportCC
    }

    public var source: Source
    public var bitsPerSecond: UInt64
    /// Share of the packets in the feedback reported lost (transport-cc only).
    public var lossFraction: Double?

    public init(source: Source, bitsPerSecond: UInt64, lossFraction: Double? = nil) {
        self.source = source
        self.bitsPerSecond = bitsPerSecond
        self.lossFraction = lossFraction
    }
}

/// Remembers the size of each packet by transport-wide sequence number, so that
/// transport-cc feedback can be read as an arrival rate and a loss share.
public struct TransportCCTracker: Sendable {
    private var sizes: [UInt16: Int] = [:]
    private var order: [UInt16] = []
    private var head = 0
    public let capacity: Int
    public private(set) var nextSequenceNumber: UInt16

    public init(initialSequenceNumber: UInt16 = 1, capacity: Int = 4096) {
        nextSequenceNumber = initialSequenceNumber
        self.capacity = min(capacity, 32_768)
    }

    /// Allocates the transport-wide sequence number of a packet of `size` bytes.
    public mutating func allocate(size: Int) -> UInt16 {
        let seq = nextSequenceNumber
        nextSequenceNumber &+= 1
        sizes[seq] = size
        order.append(seq)
        if order.count - head > capacity {
            sizes[order[head]] = nil
            head += 1
            if head > 1024, head * 2 > order.count { order.removeFirst(head); head = 0 }
        }
        return seq
    }

    /// The arrival rate of the packets this feedback reports received (bytes of
    /// all but the first over the spread of their arrival times), and the loss share.
    public func estimate(_ fb: TransportCCFeedback) -> BandwidthEstimate? {
        var first: Duration?, last: Duration?
        var bytes = 0, known = 0, lost = 0
        for (seq, arrival) in fb.arrivals {
            guard let size = sizes[seq] else { continue }
            known += 1
            guard let t = arrival else { lost += 1; continue }
            if first == nil { first = t } else { bytes += size }
            last = t
        }
        guard known > 0 else { return nil }
        let loss = Double(lost) / Double(known)
        guard let a = first, let b = last, b > a else {
            return BandwidthEstimate(source: .transportCC, bitsPerSecond: 0, lossFraction: loss)
        }
        let ns = (b - a).totalNanoseconds
        return BandwidthEstimate(source: .transportCC,
                                 bitsPerSecond: UInt64(Int64(bytes) * 8 * 1_000_000_000 / ns), lossFraction: loss)
    }
}
