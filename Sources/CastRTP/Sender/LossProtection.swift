import CastCore

/// Redundant RTX copies of packets while the link is losing packets and the
/// stream is sparse: the sender-side answer to receivers that ask only once.
///
/// A receiver that NACKs only when a *new* gap appears (aiortc has no retry
/// timer) asks again for a lost retransmission, or re-sends a lost NACK, only
/// at its next loss. A screen cast sends 30–100 packets a second; at 5 % loss
/// the next loss is 0.7 s away on average and often more than a second, and
/// the receiver's jitter buffer holds every later frame meanwhile
/// (Scripts/faults saw 1.7–4 s freezes). So while loss is being seen and the
/// media is sparse, every packet (and every retransmission) is sent again over
/// RTX after each of `copyDelays`: later than a typical loss burst, so that one
/// loss costs at most a copy delay, and NACK/RTX remains the second line.
///
/// It spends bandwidth only where there is room: it stays off above
/// `maxPacketsPerSecond` of original media (there a receiver's next gap comes
/// soon enough), whenever media plus copies would pass `maxTotalBitsPerSecond`
/// or the send-side estimate (the copies must come from headroom the estimate
/// says exists), and while the delay-based detector reports over-use (the
/// loss is then congestion, and copies would add to it). "Loss seen" is
/// decided by the owner and must be real evidence (issue 14): a receiver
/// report with a non-zero fraction lost, or transport-cc feedback confirming a
/// loss past the reordering window, in the last `lossMemory`. A NACK is not,
/// answered or not and however old its packet: GStreamer's webrtcbin NACKs
/// packets that are merely late (2–30 ms, and far later while it is short of
/// CPU and the packets wait unread in its socket).
/// Pure state: time is passed in.
public struct LossProtection: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var enabled: Bool
        /// One copy per entry, sent this long after the packet (ascending).
        public var copyDelays: [Duration]
        public var maxPacketsPerSecond: Int
        public var maxTotalBitsPerSecond: Int64
        public var lossMemory: Duration
        /// Copies waiting at most, per delay; beyond it the oldest are dropped (and counted).
        public var maxPending: Int

        public init(enabled: Bool = true, copyDelays: [Duration] = [.milliseconds(60), .milliseconds(250)],
                    maxPacketsPerSecond: Int = 120, maxTotalBitsPerSecond: Int64 = 3_000_000,
                    lossMemory: Duration = .seconds(10), maxPending: Int = 512) {
            self.enabled = enabled
            self.copyDelays = copyDelays.filter { $0 >= .zero }.sorted()
            self.maxPacketsPerSecond = max(0, maxPacketsPerSecond)
            self.maxTotalBitsPerSecond = max(0, maxTotalBitsPerSecond)
            self.lossMemory = lossMemory
            self.maxPending = max(1, maxPending)
        }

        /// Never sends a copy.
        public static let off = Configuration(enabled: false)
    }

    /// What a sent packet was, for `sent(_:bytes:kind:now:)`.
    public enum Kind: Sendable { case original, retransmission }

    public let configuration: Configuration
    public private(set) var copiesScheduled = 0
    public private(set) var copiesDropped = 0
    private var lastLossAt: Instant?
    private var bandwidthEstimate: Int64?
    private var congested = false
    /// Original media sent in the last second.
    private var window = RateWindow(length: .seconds(1))
    /// One FIFO per copy delay; each is in due order because `now` never goes back.
    private var pending: [[(due: Instant, seq: UInt16)]]
    private var pendingHead: [Int]

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        pending = Array(repeating: [], count: configuration.copyDelays.count)
        pendingHead = Array(repeating: 0, count: configuration.copyDelays.count)
    }

    /// Real evidence of loss arrived (see above: the owner decides what counts).
    public mutating func lossSeen(now: Instant) { lastLossAt = now }

    /// The send-side estimate of what the path carries (the rate target).
    public mutating func bandwidthEstimated(bitsPerSecond: UInt64) {
        bandwidthEstimate = Int64(clamping: bitsPerSecond)
    }

    /// Whether the delay-based detector reports over-use now.
    public mutating func congestionChanged(overusing: Bool) { congested = overusing }

    /// Whether a packet sent at `now` would get copies.
    public func isActive(now: Instant) -> Bool {
        guard configuration.enabled, !configuration.copyDelays.isEmpty,
              !congested, let loss = lastLossAt, now - loss <= configuration.lossMemory else { return false }
        let (packets, media) = window.totals(at: now)
        guard packets <= configuration.maxPacketsPerSecond,
              Int64(media) * 8 * Int64(1 + configuration.copyDelays.count) <= configuration.maxTotalBitsPerSecond
        else { return false }
        if let e = bandwidthEstimate, e < Int64(media) * 8 * Int64(1 + configuration.copyDelays.count) { return false }
        return true
    }

    /// Records a media packet or a retransmission that left at `now` (`bytes` on the wire)
    /// and schedules its copies when protection is on. Copies are not reported here.
    public mutating func sent(_ seq: UInt16, bytes: Int, kind: Kind, now: Instant) {
        if kind == .original { window.add(bytes, now: now) }
        guard isActive(now: now) else { return }
        for (i, d) in configuration.copyDelays.enumerated() {
            if pending[i].count - pendingHead[i] >= configuration.maxPending {
                pendingHead[i] += 1
                copiesDropped += 1
            }
            pending[i].append((now + d, seq))
            copiesScheduled += 1
        }
    }

    /// The sequence numbers whose copies are due at `now`, earliest first.
    public mutating func due(now: Instant) -> [UInt16] {
        var out: [(due: Instant, seq: UInt16)] = []
        for i in pending.indices {
            while pendingHead[i] < pending[i].count, pending[i][pendingHead[i]].due <= now {
                out.append(pending[i][pendingHead[i]])
                pendingHead[i] += 1
            }
            if pendingHead[i] == pending[i].count {
                pending[i].removeAll(keepingCapacity: true)
                pendingHead[i] = 0
            } else if pendingHead[i] > 256, pendingHead[i] * 2 > pending[i].count {
                pending[i].removeFirst(pendingHead[i])
                pendingHead[i] = 0
            }
        }
        return out.count > 1 ? out.sorted { $0.due < $1.due }.map(\.seq) : out.map(\.seq)
    }

    /// When the next copy is due; nil with none waiting.
    public var nextDeadline: Instant? {
        // A loop, not compactMap + min: the driver asks on every turn (issue 19).
        var d: Instant? = nil
        for i in pending.indices where pendingHead[i] < pending[i].count { d = Instant.earliest(d, pending[i][pendingHead[i]].due) }
        return d
    }

    public var pendingCount: Int { pending.indices.reduce(0) { $0 + pending[$1].count - pendingHead[$1] } }
}
