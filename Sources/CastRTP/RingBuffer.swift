/// A first-in, first-out queue in a circular buffer: `append` and `popFirst` are O(1)
/// (an `Array`'s `removeFirst` moves every element behind the first), and once the
/// buffer has grown to the queue's working size it allocates no more. Capacity is a
/// power of two and doubles when full; it never shrinks, except by `removeAll(keepingCapacity: false)`.
///
/// Indices run from 0 (the oldest element) to `count - 1` (the newest), so the queue
/// reads like an array: `queue[0]`, `queue.first`, `for x in queue`.
public struct RingBuffer<Element>: RandomAccessCollection {
    /// Slots `head ..< head + count` (wrapping) hold elements; the others are nil, so a
    /// popped element is released at once.
    private var slots: [Element?]
    private var head = 0
    public private(set) var count = 0

    /// An empty queue with room for `minimumCapacity` elements before its first growth.
    public init(minimumCapacity: Int = 0) {
        slots = minimumCapacity > 0 ? Array(repeating: nil, count: Self.roundedCapacity(minimumCapacity)) : []
    }

    /// Elements the buffer holds before it grows.
    public var capacity: Int { slots.count }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    /// The element `i` places behind the oldest. `i` must be in `0..<count`.
    public subscript(i: Int) -> Element {
        precondition(i >= 0 && i < count, "RingBuffer index \(i) out of range 0..<\(count)")
        // Force-unwrap: a slot inside head..<head+count always holds an element.
        return slots[slot(i)]!
    }

    public mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[slot(count)] = element
        count += 1
    }

    /// Removes and returns the oldest element; nil when empty.
    @discardableResult
    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let e = slots[head].take()
        head = (head + 1) & (slots.count - 1)
        count -= 1
        if count == 0 { head = 0 }
        return e
    }

    /// Removes the `n` oldest elements (all of them when `n >= count`).
    public mutating func removeFirst(_ n: Int) {
        for _ in 0..<Swift.min(Swift.max(n, 0), count) { popFirst() }
    }

    public mutating func removeAll(keepingCapacity: Bool = true) {
        if keepingCapacity {
            while count > 0 { popFirst() }
        } else {
            slots = []
            head = 0
            count = 0
        }
    }

    private func slot(_ i: Int) -> Int { (head + i) & (slots.count - 1) }

    private static func roundedCapacity(_ n: Int) -> Int {
        var c = 8
        while c < n { c *= 2 }
        return c
    }

    /// Doubles the buffer (8 slots at first), the oldest element moving to slot 0.
    private mutating func grow() {
        var bigger = [Element?](repeating: nil, count: Self.roundedCapacity(slots.count * 2))
        for i in 0..<count { bigger[i] = slots[slot(i)].take() }
        slots = bigger
        head = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
