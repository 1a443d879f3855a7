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
