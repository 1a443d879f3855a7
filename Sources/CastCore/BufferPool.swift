/// Datagram buffers handed back after they were sent, for the next datagram to be built
/// in (issue 19: an RTP packet's buffer is the one allocation left on the send path, and
/// in steady state it need not be made at all).
///
/// Ownership stays with Swift's arrays: the pool holds `[UInt8]` values, and the buffer
/// is reused only when nothing else references it any more (`take` empties it with
/// `removeAll(keepingCapacity:)`, which copies nothing but reallocates should a reference
/// still be alive elsewhere). So a buffer given back too early costs an allocation, never
/// a use after return. The owner gives a datagram's bytes back once `sendto` is done with
/// them (`DatagramCore.recycle`).
///
/// Bounded (`limit` buffers) and selective (only buffers of at least `minimumCapacity`
/// bytes), so that a burst does not keep its memory and small buffers (STUN, DTLS) do not
/// displace packet-sized ones. Not thread-safe: one owner.
public struct BufferPool: Sendable {
    public let limit: Int
    public let minimumCapacity: Int
    private var free: [[UInt8]] = []
    /// Buffers given out that came from the pool, and ones made new (tests, statistics).
    public private(set) var reused = 0
    public private(set) var made = 0

    public init(limit: Int = 64, minimumCapacity: Int) {
        self.limit = max(0, limit)
        self.minimumCapacity = max(0, minimumCapacity)
        free.reserveCapacity(self.limit)
    }

    public var count: Int { free.count }

    /// An empty buffer: a returned one when there is one (its capacity kept), else a new
    /// one with room for `minimumCapacity` bytes, so that it can come back.
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

    /// Keeps `buffer` for a later `take`, unless the pool is full or the buffer small.
    public mutating func give(_ buffer: consuming [UInt8]) {
        guard free.count < limit, buffer.capacity >= minimumCapacity else { return }
        free.append(buffer)
    }
}
