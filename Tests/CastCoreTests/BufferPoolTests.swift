import Testing
import CastCore

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
        #expect(again.isEmpty && pool.reused == 1 && pool.count == 0)
        again.append(9)
        #expect(Self.address(again) == storage)   // written in the same storage: no allocation
    }

    @Test func smallBuffersAndOnesPastTheLimitAreLetGo() {
        var pool = BufferPool(limit: 2, minimumCapacity: 100)
        var small: [UInt8] = []
        small.reserveCapacity(10)
        pool.give(small)
        #expect(pool.count == 0)
        for _ in 0..<3 { pool.give(pool.take() + []) ; pool.give([UInt8](repeating: 0, count: 200)) }
        #expect(pool.count == 2)
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
}
