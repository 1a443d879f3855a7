import Testing
import CastCore

/// Issue 19's datagram buffers: reused when given back, never written while referenced
/// elsewhere, and bounded.
@Suite struct BufferPoolTests {
    static func address(_ b: [UInt8]) -> UnsafeRawPointer? { b.withUnsafeBytes { $0.baseAddress } }

    @Test func aBufferGivenBackIsTakenAgainEmptyWithItsStorage() {
        var pool = BufferPool(limit: 4, minimumCapacity: 100)
        var b = pool.take()
        #expect(b.isEmpty && b.capacity >= 100 && pool.made == 1 && pool.reused == 0)
        b.append(contentsOf: [1, 2, 3])
        let storage = Self.address(b)
        pool.give(b)
        b = []   // the sender's reference is gone, as after `sendto`
        #expect(pool.count == 1)
        var again = pool.take()
        #expect(again.isEmpty && pool.reused == 1 && pool.made == 1 && pool.count == 0)
        again.append(9)
        #expect(Self.address(again) == storage)   // written where the old bytes lay: no allocation
    }

    @Test func smallBuffersAndOnesPastTheLimitAreLetGo() {
        var pool = BufferPool(limit: 2, minimumCapacity: 100)
        var small: [UInt8] = []
        small.reserveCapacity(10)
        #expect(!pool.accepts(capacity: small.capacity))
        pool.give(small)
        #expect(pool.count == 0)
        for _ in 0..<5 { pool.give([UInt8](repeating: 0, count: 200)) }
        #expect(pool.count == 2 && !pool.accepts(capacity: 200))
        _ = pool.take()
        #expect(pool.count == 1 && pool.accepts(capacity: 200))
    }

    @Test func aBufferStillReferencedElsewhereIsNeverWrittenThrough() {
        var pool = BufferPool(limit: 4, minimumCapacity: 16)
        var b = pool.take()
        b.append(contentsOf: [1, 2, 3, 4])
        let kept = b                      // e.g. a socket that queued the bytes
        pool.give(b)
        b = []
        var next = pool.take()
        next.append(contentsOf: [7, 7])
        #expect(kept == [1, 2, 3, 4])     // copy on write: the old bytes are untouched
        #expect(next == [7, 7])
        #expect(Self.address(next) != Self.address(kept))
    }

    /// The writer takes a pooled buffer by move: it writes in that storage from its start.
    @Test func aWriterReusingAnUnsharedBufferWritesInItsStorage() {
        var pool = BufferPool(limit: 1, minimumCapacity: 64)
        var b = pool.take()
        b.append(contentsOf: [9, 9, 9, 9, 9])
        let storage = Self.address(b)
        pool.give(b)
        b = []
        var w = ByteWriter(reusing: pool.take(), capacity: 32)
        w.u16(0x0102); w.u32(0x0304_0506)
        let bytes = w.take()
        #expect(bytes == [1, 2, 3, 4, 5, 6] && w.count == 0)
        #expect(Self.address(bytes) == storage)
        // A buffer still held elsewhere: the writer's bytes are its own, the other's kept.
        let held = bytes
        var w2 = ByteWriter(reusing: held, capacity: 32)
        w2.u8(0xff)
        #expect(w2.take() == [0xff] && held == [1, 2, 3, 4, 5, 6])
    }
}
