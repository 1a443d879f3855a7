import Testing
@testable import CastCore

@Suite struct OutputQueueTests {
    @Test func popsInPushOrderThenNilAndIsReusableAfterDraining() {
        var q = OutputQueue<Int>()
        #expect(q.isEmpty && q.pop() == nil)
        q.push(1)
        q.push(contentsOf: [2, 3])
        #expect(q.pop() == 1)
        q.push(4)   // pushed while partly drained: still after 2 and 3
        #expect([q.pop(), q.pop(), q.pop()] == [2, 3, 4])
        #expect(q.isEmpty && q.pop() == nil)
        q.push(5)
        #expect(!q.isEmpty && q.pop() == 5 && q.pop() == nil)
    }
}

@Suite struct OutputQueueOwnershipTests {
    final class Box: Sendable {}

    @Test func aPoppedElementIsReferencedOnlyByItsTaker() {
        var q = OutputQueue<Box>()
        q.push(Box())
        q.push(Box())   // not drained: the queue's storage is still in use
        var first = q.pop()!
        // The queue let go of it: the bytes of a popped datagram can change in place.
        #expect(isKnownUniquelyReferenced(&first))
    }
}
