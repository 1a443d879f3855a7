import CastCore
import Dispatch
import Synchronization

/// Counters of a `FrameRing`, for logs, `getStats`-style reports and tests.
public struct FrameRingStats: Equatable, Sendable {
    /// Frames the producer published.
    public var published: UInt64 = 0
    /// Frames never captured because every slot was being read or written (spec §12: drop rather than queue).
    public var dropped: UInt64 = 0
    /// Published frames never encoded: released because a newer one was ready, or
    /// overwritten by a newer capture while the encoder was busy.
    public var skipped: UInt64 = 0
    /// Frames the consumer took.
    public var consumed: UInt64 = 0

    public init() {}
}

/// A fixed set of frame slots between one producer (capture) and one consumer
/// (encoder). Capture writes into a free slot or, when none is free, over the
/// oldest ready frame (which the encoder would skip anyway: it always takes
/// the newest); only when every slot is being read or written is the new frame
/// dropped and counted. The encoder takes the newest ready frame and older
/// ready frames go back to the free list. It is never a queue, so
/// capture-to-encode latency cannot grow (spec §12, "drop frames rather than
/// queue them"), and two slots are enough for the newest frame always to be
/// captured while the encoder reads the previous one (issue 19).
///
/// Ownership: a slot is in exactly one state. `.writing` slots belong to the
/// producer, `.reading` slots to the consumer, and nobody touches the memory
/// of `.free` or `.ready` slots. The lock guards only these states (a handful
/// of words); pixels are never copied under it. Exactly one producer thread
/// and one consumer thread may use a ring.
public final class FrameRing<Slot: FrameSlot>: @unchecked Sendable {
    // @unchecked: slots are non-Sendable classes; the state machine above is
    // what makes handing them between the two threads safe.

    public struct WriteLease {
        public let index: Int
        public let slot: Slot
    }

    public struct ReadLease {
        public let index: Int
        public let slot: Slot
        public let frame: Frame
        /// Publication order, starting at 1.
        public let sequence: UInt64
    }

    enum SlotState: Equatable {
        case free
        case writing
        case ready(sequence: UInt64)
        case reading
    }

    struct State {
        var slots: [SlotState]
        var frames: [Frame?]
        var nextSequence: UInt64 = 1
        var stats = FrameRingStats()
        /// Damage of ready frames that were overwritten, for the next frame published.
        var overwritten: Frame? = nil
        /// The producer waits in `beginWrite(waitingUpTo:)` for `finishRead` to free a slot.
        var producerWaiting = false
    }

    public let slots: [Slot]
    private let state: Mutex<State>
    /// Signalled by `finishRead` when the producer is waiting for a slot.
    private let slotFreed = DispatchSemaphore(value: 0)

    /// Sunshine and the spec's memory rule both point at a small pool: capture
    /// writes one slot (over the ready frame if need be) while the encoder reads
    /// the other. A third slot would only hold a frame the encoder skips, and
    /// costs 7.9 MiB at 1080p (issue 19). XShm capture uses one slot (see
    /// `beginWrite(waitingUpTo:)`); PipeWire, which copies into memory slots, two.
    public static var defaultSlotCount: Int { 2 }

    public init(slots: [Slot]) {
        precondition(!slots.isEmpty, "a frame ring needs at least one slot")
        self.slots = slots
        state = Mutex(State(slots: Array(repeating: .free, count: slots.count),
                            frames: Array(repeating: nil, count: slots.count)))
    }

    public var stats: FrameRingStats { state.withLock { $0.stats } }

    /// Producer: a slot to capture into (a free one, else the oldest ready frame's,
    /// whose changes then carry over to the next frame published), or nil when
    /// every slot is being read (the frame is dropped and counted).
    public func beginWrite() -> WriteLease? {
        state.withLock { claim(&$0, wait: false) }.map { WriteLease(index: $0, slot: slots[$0]) }
    }

    /// Producer: as `beginWrite()`, but when every slot is being read, waits up to
    /// `limit` for the consumer to finish one (`finishRead`) before dropping the
    /// frame. With one slot and a consumer that lets go of it once it has
    /// converted the pixels, capture then waits at most a conversion instead of
    /// skipping a frame interval, and the ring holds one full-size frame instead
    /// of two (issue 19: 7.9 MiB at 1080p).
    public func beginWrite(waitingUpTo limit: Duration) -> WriteLease? {
        guard limit > .zero else { return beginWrite() }
        if let i = state.withLock({ claim(&$0, wait: true) }) { return WriteLease(index: i, slot: slots[i]) }
        let signalled = slotFreed.wait(timeout: .now() + .nanoseconds(Int(limit.totalNanoseconds))) == .success
        var signalOwed = false
        let index: Int? = state.withLock { s in
            // Timed out, yet finishRead already cleared the flag: its signal is on the
            // way (or came just now) and must be taken, or the next wait would end at once.
            if !signalled && !s.producerWaiting { signalOwed = true }
            s.producerWaiting = false
            return claim(&s, wait: false)
        }
        if signalOwed { slotFreed.wait() }
        return index.map { WriteLease(index: $0, slot: slots[$0]) }
    }

    /// Under the lock: marks and returns the slot `beginWrite` hands out, or nil when every
    /// slot is being read (then counts the drop, or with `wait` marks the producer waiting).
    private func claim(_ s: inout State, wait: Bool) -> Int? {
        // Lowest free index: deterministic, which keeps tests exact.
        if let i = s.slots.firstIndex(of: .free) {
            s.slots[i] = .writing
            return i
        }
        var oldest: (index: Int, sequence: UInt64)? = nil
        for (i, st) in s.slots.enumerated() {
            if case .ready(let seq) = st, seq < (oldest?.sequence ?? .max) { oldest = (i, seq) }
        }
        guard let i = oldest?.index, let frame = s.frames[i] else {
            if wait { s.producerWaiting = true } else { s.stats.dropped += 1 }
            return nil
        }
        if var carried = s.overwritten {
            carried.absorbDamage(of: frame)   // order does not matter: damage is a union
            s.overwritten = carried
        } else {
            s.overwritten = frame
        }
        s.slots[i] = .writing
        s.frames[i] = nil
        s.stats.skipped += 1
        return i
    }

    /// Producer: the slot at `index` if it is free, else nil (nothing counted).
    /// A free slot's memory still holds what was last written there, so a
    /// source can publish its last frame again without reading or copying it
    /// (PipeWire's refresh of a screen that sends nothing while static).
    public func reclaim(_ index: Int) -> WriteLease? {
        let ok: Bool = state.withLock { s in
            guard s.slots.indices.contains(index), s.slots[index] == .free else { return false }
            s.slots[index] = .writing
            return true
        }
        return ok ? WriteLease(index: index, slot: slots[index]) : nil
    }

    /// Producer: the slot now holds `frame`; it becomes the newest ready frame.
    public func publish(_ lease: WriteLease, frame: Frame) {
        precondition(frame.byteCount <= lease.slot.capacity, "frame larger than its slot")
        state.withLock { s in
            precondition(s.slots[lease.index] == .writing, "publish of a slot not being written")
            var frame = frame
            if let earlier = s.overwritten {
                // What changed in an overwritten frame was never encoded: it is new in this one too.
                frame.absorbDamage(of: earlier)
                s.overwritten = nil
            }
            s.slots[lease.index] = .ready(sequence: s.nextSequence)
            s.frames[lease.index] = frame
            s.nextSequence += 1
            s.stats.published += 1
        }
    }

    /// Producer: nothing was captured (timeout, nothing changed, error); the slot is free again.
    public func cancel(_ lease: WriteLease) {
        state.withLock { s in
            precondition(s.slots[lease.index] == .writing, "cancel of a slot not being written")
            s.slots[lease.index] = .free
        }
    }

    /// Consumer: the newest ready frame, or nil when none is ready. Older
    /// ready frames are released and counted as skipped.
    public func takeNewest() -> ReadLease? {
        let taken: (Int, UInt64, Frame)? = state.withLock { s in
            var best: (index: Int, sequence: UInt64)? = nil
            for (i, st) in s.slots.enumerated() {
                if case .ready(let seq) = st, seq > (best?.sequence ?? 0) { best = (i, seq) }
            }
            guard let best else { return nil }
            for (i, st) in s.slots.enumerated() where i != best.index {
                if case .ready = st {
                    // What changed in a skipped frame is also new in the one taken
                    // (it holds the later screen), so its damage carries over.
                    s.frames[best.index]!.absorbDamage(of: s.frames[i]!)
                    s.slots[i] = .free
                    s.frames[i] = nil
                    s.stats.skipped += 1
                }
            }
            s.slots[best.index] = .reading
            s.stats.consumed += 1
            return (best.index, best.sequence, s.frames[best.index]!)
        }
        return taken.map { ReadLease(index: $0.0, slot: slots[$0.0], frame: $0.2, sequence: $0.1) }
    }

    /// Consumer: done with the frame; its slot is free again.
    public func finishRead(_ lease: ReadLease) {
        let wake: Bool = state.withLock { s in
            precondition(s.slots[lease.index] == .reading, "finishRead of a slot not being read")
            s.slots[lease.index] = .free
            s.frames[lease.index] = nil
            defer { s.producerWaiting = false }
            return s.producerWaiting
        }
        if wake { slotFreed.signal() }
    }

    /// Slots currently free (for tests and diagnostics).
    public var freeCount: Int { state.withLock { s in s.slots.filter { $0 == .free }.count } }
}
