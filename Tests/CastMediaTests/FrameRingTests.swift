import Testing
import Synchronization
import Foundation
import CastCore
import CastMedia

@Suite struct FrameRingTests {
    func frame(_ t: Int64) -> Frame {
        Frame(format: .bgrx, size: FrameSize(width: 4, height: 2), stride: 16, captureTime: Instant(nanoseconds: t))
    }

    func ring(_ n: Int = FrameRing<MemorySlot>.defaultSlotCount) -> FrameRing<MemorySlot> {
        FrameRing(slots: (0..<n).map { _ in MemorySlot(capacity: 32) })
    }

    @Test func reclaimGivesBackAFreeSlotWithItsBytesAndOnlyAFreeOne() throws {
        let r = ring(2)
        let w = try #require(r.beginWrite())
        w.slot.bytes.storeBytes(of: 0xAB, as: UInt8.self)
        r.publish(w, frame: frame(1))
        #expect(r.reclaim(w.index) == nil)          // ready: not free
        let read = try #require(r.takeNewest())
        #expect(r.reclaim(read.index) == nil)       // being read
        r.finishRead(read)
        #expect(r.reclaim(7) == nil)                // no such slot
        let again = try #require(r.reclaim(read.index))
        #expect(again.index == w.index)
        #expect(again.slot.bytes.load(as: UInt8.self) == 0xAB)
        r.publish(again, frame: frame(2))
        #expect(r.takeNewest()?.frame.captureTime == Instant(nanoseconds: 2))
        #expect(r.stats.dropped == 0)
    }

    @Test func consumerGetsTheNewestAndOlderReadyFramesAreSkipped() throws {
        let r = ring()
        for t in 1...2 {
            let w = try #require(r.beginWrite())
            r.publish(w, frame: frame(Int64(t)))
        }
        let read = try #require(r.takeNewest())
        #expect(read.frame.captureTime == Instant(nanoseconds: 2))
        #expect(read.sequence == 2)
        #expect(r.stats.skipped == 1)
        #expect(r.takeNewest() == nil)  // nothing else ready: the skipped one is gone, not queued
        r.finishRead(read)
        #expect(r.freeCount == 2)
        #expect(r.stats == { var s = FrameRingStats(); s.published = 2; s.skipped = 1; s.consumed = 1; return s }())
    }

    @Test func producerOverwritesTheOldestReadyFrameAndDropsOnlyWhenEverySlotIsBusy() throws {
        let r = ring(3)
        let reading = try #require({ () -> FrameRing<MemorySlot>.ReadLease? in
            let w = r.beginWrite()!; r.publish(w, frame: frame(1)); return r.takeNewest() }())
        let w2 = try #require(r.beginWrite())
        r.publish(w2, frame: frame(2))
        let w3 = try #require(r.beginWrite())
        r.publish(w3, frame: frame(3))
        // No free slot: frame 2 (the oldest ready) is written over, not the newer frame 3.
        let w4 = try #require(r.beginWrite())
        #expect(w4.index == w2.index)
        #expect(r.stats.skipped == 1)
        #expect(r.stats.dropped == 0)
        // Slot 3 is ready, the others read or written: frame 3 is written over next, then nothing is left.
        let w5 = try #require(r.beginWrite())
        #expect(w5.index == w3.index)
        #expect(r.beginWrite() == nil)
        #expect(r.stats.dropped == 1)
        r.cancel(w5)  // e.g. the capture timed out
        #expect(r.beginWrite()?.index == w3.index)
        _ = (reading, w4)
    }

    @Test func changesOfAnOverwrittenFrameReachTheNextPublishedOne() throws {
        let r = ring(2)
        let a = FrameRect(x: 0, y: 0, width: 1, height: 1), b = FrameRect(x: 2, y: 1, width: 2, height: 1)
        func damaged(_ t: Int64, _ d: [FrameRect]?) -> Frame {
            Frame(format: .bgrx, size: FrameSize(width: 4, height: 2), stride: 16, captureTime: Instant(nanoseconds: t), damage: d)
        }
        r.publish(try #require(r.beginWrite()), frame: damaged(1, []))
        let reading = try #require(r.takeNewest())
        r.publish(try #require(r.beginWrite()), frame: damaged(2, [a]))
        // Frame 2 is written over by frame 3 (one with no changes of its own): a must still be encoded.
        let w3 = try #require(r.beginWrite())
        r.publish(w3, frame: damaged(3, []))
        r.finishRead(reading)
        let got = try #require(r.takeNewest())
        #expect(got.frame.captureTime == Instant(nanoseconds: 3))
        #expect(got.frame.damage == [a])
        r.finishRead(got)
        // An overwrite whose capture is cancelled still hands its changes on; carried only once.
        r.publish(try #require(r.beginWrite()), frame: damaged(4, [b]))
        let busy = try #require(r.takeNewest())
        r.publish(try #require(r.beginWrite()), frame: damaged(5, [a]))
        r.cancel(try #require(r.beginWrite()))
        r.publish(try #require(r.beginWrite()), frame: damaged(6, []))
        r.finishRead(busy)
        let next = try #require(r.takeNewest())
        #expect(next.frame.captureTime == Instant(nanoseconds: 6))
        #expect(next.frame.damage == [a])
        r.finishRead(next)
        r.publish(try #require(r.beginWrite()), frame: damaged(7, [b]))
        #expect(try #require(r.takeNewest()).frame.damage == [b])
    }

    @Test func slotsAreTheSameObjectsEveryTime() throws {
        // The XShm source relies on it: its segments are the ring's slots, no copy.
        let slots = (0..<2).map { _ in MemorySlot(capacity: 32) }
        let r = FrameRing(slots: slots)
        let w = try #require(r.beginWrite())
        #expect(w.slot === slots[0])
        w.slot.bytes.storeBytes(of: 0xAB, as: UInt8.self)
        r.publish(w, frame: frame(1))
        let read = try #require(r.takeNewest())
        #expect(read.slot === slots[0])
        #expect(read.slot.bytes.load(as: UInt8.self) == 0xAB)
    }

    /// A capture at 30 fps against an encoder stalled at 150 ms per frame, on a
    /// simulated clock: frames are skipped (written over), and the age of what the
    /// encoder picks up stays bounded instead of growing as a queue would.
    @Test func stalledEncoderSkipsFramesAndLatencyDoesNotGrow() throws {
        let r = ring()
        let framePeriod: Int64 = 33_333_333
        let encodeTime: Int64 = 150_000_000
        var latencies: [Int64] = []  // capture → encode start, per encoded frame
        var encoderBusyUntil: Int64 = 0
        var current: FrameRing<MemorySlot>.ReadLease? = nil
        var captureTime: Int64 = 0
        let end: Int64 = 20_000_000_000  // 20 simulated seconds
        while captureTime < end {
            // Encoder finishes and picks the newest frame whenever it is free.
            if encoderBusyUntil <= captureTime {
                if let c = current { r.finishRead(c); current = nil }
                if let next = r.takeNewest() {
                    let start = max(encoderBusyUntil, next.frame.captureTime.nanoseconds)
                    latencies.append(start - next.frame.captureTime.nanoseconds)
                    encoderBusyUntil = start + encodeTime
                    current = next
                }
            }
            if let w = r.beginWrite() { r.publish(w, frame: frame(captureTime)) }
            captureTime += framePeriod
        }
        let s = r.stats
        let captured = Int(end / framePeriod) + 1
        #expect(Int(s.published + s.dropped) == captured)
        // Two slots: one read, the other written over and over; nothing is ever dropped.
        #expect(s.dropped == 0)
        #expect(s.skipped > 0, "a stalled encoder must skip frames")
        #expect(s.consumed < s.published)
        #expect(s.consumed + s.skipped <= s.published)
        // Bounded: never older than one frame period (the newest frame is always there).
        let worst = latencies.max()!
        #expect(worst <= framePeriod)
        // And not growing: the last second's latencies are no worse than the first's.
        let firstSecond = latencies.prefix(7).max()!
        let lastSecond = latencies.suffix(7).max()!
        #expect(lastSecond <= max(firstSecond, encodeTime + framePeriod))
        // Encoded frames ≈ 20 s / 150 ms, i.e. the encoder is never idle while frames wait.
        #expect(abs(Int(s.consumed) - Int(end / encodeTime)) <= 2)
    }

    /// Real threads, no sleeps: a producer publishing as fast as it can and a
    /// consumer taking as fast as it can. Every frame is accounted for exactly
    /// once, and sequences only increase.
    @Test func oneProducerAndOneConsumerOnRealThreadsAccountForEveryFrame() {
        let r = ring()
        let total = 20_000
        let run = ProducerAndConsumer.run(r, frames: total) { r.beginWrite() }
        let s = r.stats
        #expect(run.ordered)
        #expect(run.pixelsMatch)
        #expect(Int(s.consumed) == run.taken)
        #expect(Int(s.published + s.dropped) == total)
        #expect(s.published == s.consumed + s.skipped)  // all ready frames drained at the end
        #expect(r.freeCount == 2)
    }
}

/// One producer thread writing frame numbers into slots as fast as it can, one consumer
/// thread taking the newest frame as fast as it can until the producer is done.
enum ProducerAndConsumer {
    static func run(_ r: FrameRing<MemorySlot>, frames total: Int,
                    beginWrite: @escaping @Sendable () -> FrameRing<MemorySlot>.WriteLease?) -> (ordered: Bool, pixelsMatch: Bool, taken: Int) {
        let producerDone = DispatchSemaphore(value: 0)
        let consumerDone = DispatchSemaphore(value: 0)
        let producer = Thread {
            defer { producerDone.signal() }
            for i in 0..<total {
                if let w = beginWrite() {
                    w.slot.bytes.storeBytes(of: UInt64(i), as: UInt64.self)
                    r.publish(w, frame: Frame(format: .bgrx, size: FrameSize(width: 2, height: 1), stride: 8,
                                              captureTime: Instant(nanoseconds: Int64(i))))
                }
            }
        }
        let done = Atomic<Bool>(false)
        let result = Mutex<(ordered: Bool, pixelsMatch: Bool, taken: Int)>((true, true, 0))
        let consumer = Thread {
            defer { consumerDone.signal() }
            var last: UInt64 = 0
            var ordered = true, match = true, taken = 0
            while true {
                let finished = done.load(ordering: .acquiring)
                if let read = r.takeNewest() {
                    ordered = ordered && read.sequence > last
                    last = read.sequence
                    // The slot still holds what the producer wrote for this frame.
                    match = match && read.slot.bytes.load(as: UInt64.self) == UInt64(read.frame.captureTime.nanoseconds)
                    taken += 1
                    r.finishRead(read)
                } else if finished {
                    break
                }
            }
            result.withLock { $0 = (ordered, match, taken) }
        }
        consumer.start()
        producer.start()
        producerDone.wait()
        done.store(true, ordering: .releasing)
        consumerDone.wait()
        return result.withLock { $0 }
    }
}

/// One slot and a producer that waits for the consumer to let go of it (XShm's ring, issue 19).
@Suite struct FrameRingWaitTests {
    @Test func aWaitThatNobodyEndsDropsTheFrameOnceAndLeavesTheReaderAlone() throws {
        let r = FrameRing(slots: [MemorySlot(capacity: 32)])
        r.publish(try #require(r.beginWrite(waitingUpTo: .milliseconds(10))),
                  frame: Frame(format: .bgrx, size: FrameSize(width: 4, height: 2), stride: 16, captureTime: Instant(nanoseconds: 1)))
        let read = try #require(r.takeNewest())
        #expect(r.beginWrite(waitingUpTo: .milliseconds(10)) == nil)   // the only slot is being read
        #expect(r.stats.dropped == 1)
        #expect(r.beginWrite() == nil)
        #expect(r.stats.dropped == 2)
        r.finishRead(read)
        #expect(r.beginWrite(waitingUpTo: .milliseconds(10))?.index == 0)
        #expect(r.stats.dropped == 2)
    }

    /// Real threads, no sleeps: with one slot, every capture that finds it being read
    /// waits for finishRead instead of dropping, so no frame is lost to the ring.
    @Test func oneSlotProducerWaitsForTheConsumerAndDropsNothing() {
        let r = FrameRing(slots: [MemorySlot(capacity: 8)])
        let total = 5_000
        // 5 s: far longer than a consumer needs; a lost wake-up would show as a drop.
        let run = ProducerAndConsumer.run(r, frames: total) { r.beginWrite(waitingUpTo: .seconds(5)) }
        let s = r.stats
        #expect(run.ordered)
        #expect(run.pixelsMatch)
        #expect(s.dropped == 0)
        #expect(Int(s.published) == total)
        #expect(Int(s.consumed) == run.taken)
        #expect(s.published == s.consumed + s.skipped)
        #expect(r.freeCount == 1)
    }
}

@Suite struct FrameRingDamageTests {
    func frame(_ t: Int64, damage: [FrameRect]?) -> Frame {
        Frame(format: .bgrx, size: FrameSize(width: 4, height: 2), stride: 16, captureTime: Instant(nanoseconds: t), damage: damage)
    }

    @Test func skippedFramesHandTheirDamageToTheTakenOne() throws {
        let r = FrameRing(slots: (0..<3).map { _ in MemorySlot(capacity: 32) })
        let a = FrameRect(x: 0, y: 0, width: 1, height: 1), b = FrameRect(x: 2, y: 1, width: 2, height: 1)
        r.publish(try #require(r.beginWrite()), frame: frame(1, damage: [a]))
        r.publish(try #require(r.beginWrite()), frame: frame(2, damage: []))
        let read = try #require(r.takeNewest())
        #expect(read.frame.captureTime == Instant(nanoseconds: 2))
        #expect(read.frame.damage == [a])  // the change in frame 1 must still be encoded
        #expect(read.frame.hasChanges)
        r.finishRead(read)
        r.publish(try #require(r.beginWrite()), frame: frame(3, damage: nil))
        r.publish(try #require(r.beginWrite()), frame: frame(4, damage: [b]))
        #expect(try #require(r.takeNewest()).frame.damage == nil)  // unknown stays unknown
    }
}
