import Testing
@testable import CastRTP

@Suite struct RingBufferTests {
    @Test func popsInTheOrderAppended() {
        var q = RingBuffer<Int>()
        #expect(q.popFirst() == nil)
        for i in 1...5 { q.append(i) }
        #expect(q.count == 5)
        #expect(q.first == 1)
        #expect(q.last == 5)
        #expect(q.popFirst() == 1)
        #expect(q.popFirst() == 2)
        #expect(Array(q) == [3, 4, 5])
    }

    @Test func wrapsAroundWithoutGrowingWhileTheQueueStaysSmall() {
        var q = RingBuffer<Int>(minimumCapacity: 4)
        #expect(q.capacity == 8)
        // 1 000 appends, never more than 6 waiting: the head and tail wrap many times.
        var expected = 0
        for i in 0..<1000 {
            q.append(i)
            if q.count == 6 {
                #expect(q.popFirst() == expected)
                expected += 1
            }
        }
        #expect(q.capacity == 8)
        #expect(Array(q) == Array(expected..<1000))
        #expect(q[0] == expected && q[q.count - 1] == 999)
    }

    @Test func growingKeepsTheOrderWhenTheContentsWrap() {
        var q = RingBuffer<Int>()
        for i in 0..<6 { q.append(i) }
        q.removeFirst(4)                      // head at slot 4 of 8
        for i in 6..<20 { q.append(i) }       // wraps at slot 8, then grows to 16
        #expect(q.capacity == 16)
        #expect(Array(q) == Array(4..<20))
    }

    @Test func removeAllKeepsOrDropsTheBuffer() {
        var q = RingBuffer<String>()
        for i in 0..<10 { q.append("\(i)") }
        q.removeAll()
        #expect(q.isEmpty && q.capacity == 16)
        q.append("a")
        #expect(q.first == "a")
        q.removeAll(keepingCapacity: false)
        #expect(q.isEmpty && q.capacity == 0)
        q.removeFirst(3)                      // more than it holds: no trap
        #expect(q.popFirst() == nil)
    }

    @Test func aPoppedElementIsReleased() {
        final class Token {}
        weak var watched: Token?
        var q = RingBuffer<Token>()
        do {
            let t = Token()
            watched = t
            q.append(t)
        }
        #expect(watched != nil)
        _ = q.popFirst()
        #expect(watched == nil)
    }
}
