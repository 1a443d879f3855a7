/// Datagram buffers handed back after they were sent, for later datagrams to be built in
/// (issue 19: an RTP packet's own buffer was the one allocation left per packet on the
/// send path; in steady state it need not be made at all).
///
/// Ownership stays with Swift's arrays: the pool holds `[UInt8]` values and a buffer is
/// written again only where nothing else references it. `take` moves a buffer out and
/// empties it with `removeAll(keepingCapacity:)`, which keeps the storage when the array
/// is its only owner and otherwise gives it storage of its own (copy on write). So a
/// buffer given back while something else still holds it (a socket that queued it) costs
/// an allocation, never a write through another owner's bytes. The writer that fills a
/// taken buffer must receive it by move (`ByteWriter(reusing:)`, `consuming`), so that the
/// one reference stays one.
///
/// Bounded (`limit` buffers) and selective (only buffers of at least `minimumCapacity`
/// bytes come in, and new ones are made that large), so that a burst does not keep its
/// memory and small buffers (STUN, DTLS) do not displace packet-sized ones. One owner; not
/// shared between threads.
public struct BufferPool: Sendable {
    public let limit: Int
    public let minimumCapacity: Int
    private var free: [[UInt8]] = []
    /// Buffers given out from the pool, and ones made new (tests, the bench).
    public private(set) var reused = 0
    public private(set) var made = 0

    public init(limit: Int = 64, minimumCapacity: Int) {
        self.limit = max(0, limit)
        self.minimumCapacity = max(0, minimumCapacity)
        free.reserveCapacity(self.limit)
    }

    /// Buffers waiting to be taken.
    public var count: Int { free.count }

    /// Whether `give` would keep a buffer of `capacity` bytes now.
    public func accepts(capacity: Int) -> Bool { free.count < limit && capacity >= minimumCapacity }

    /// An empty buffer: a given-back one when there is one (its storage kept if nothing
    /// else references it), else a new one with room for `minimumCapacity` bytes, so that
    /// it is worth keeping when it comes back.
    public mutating func take() -> [UInt8] {
        guard var b = free.popLast() else {
            made += 1
            var b: [UInt8] = []
            b.reserveCapacity(minimumCapacity)
            return b
        }
        reused += 1
        b.removeAll(keepingCapacity: true)
        return b
    }

    /// Keeps `buffer` for a later `take`, unless the pool is full or the buffer too small
    /// (then it is let go).
    public mutating func give(_ buffer: consuming [UInt8]) {
        guard accepts(capacity: buffer.capacity) else { return }
        free.append(consume buffer)
    }
}
