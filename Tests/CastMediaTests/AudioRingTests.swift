import Testing
import CastCore
@testable import CastMedia

@Suite struct AudioRingTests {
    func ms(_ v: Int64) -> Instant { Instant(nanoseconds: v * 1_000_000) }

    /// Stereo samples whose value is their position (left) and its negative (right).
    func ramp(_ start: Int, _ count: Int) -> [Float] {
        (start..<start + count).flatMap { [Float($0), -Float($0)] }
    }

    @Test func framesComeOutWholeInOrderWithTheCaptureTimeOfTheirFirstSample() throws {
        var r = AudioRing(channels: 2, capacity: 4800)
        // PipeWire quanta of 1024 samples do not line up with 960-sample frames.
        r.write(ramp(0, 1024), captureTime: ms(1000))
        let aRead = r.read(samplesPerChannel: 960)
        let a = try #require(aRead)
        #expect(r.read(samplesPerChannel: 960) == nil)   // 64 left: not a frame
        r.write(ramp(1024, 1024), captureTime: ms(1000) + .nanoseconds(21_333_333))
        let bRead = r.read(samplesPerChannel: 960)
        let b = try #require(bRead)
        #expect(a.samples == ramp(0, 960) && b.samples == ramp(960, 960))
        #expect(a.captureTime == ms(1000))
        #expect(b.captureTime == ms(1020))                // sample 960 at 48 kHz
        #expect(a.skippedBefore == 0 && b.skippedBefore == 0)
        #expect(r.available == 2048 - 1920)
    }

    @Test func aLaggingReaderLosesTheOldestSamplesAndIsToldHowMany() throws {
        var r = AudioRing(channels: 2, capacity: 1920)
        r.write(ramp(0, 1500), captureTime: ms(0))
        r.write(ramp(1500, 1500), captureTime: ms(0) + .nanoseconds(31_250_000))   // 3000 written, room for 1920
        #expect(r.available == 1920)
        #expect(r.droppedSamples == 1080)
        let cRead = r.read(samplesPerChannel: 960)
        let c = try #require(cRead)
        #expect(c.skippedBefore == 1080)
        #expect(c.samples == ramp(1080, 960))             // the newest survive, wrapped around the storage
        #expect(c.captureTime == ms(22) + .nanoseconds(500_000))   // sample 1080
        let dRead = r.read(samplesPerChannel: 960)
        let d = try #require(dRead)
        #expect(d.skippedBefore == 0 && d.samples == ramp(2040, 960))
    }

    @Test func aWriteLongerThanTheRingKeepsItsNewestPart() throws {
        var r = AudioRing(channels: 2, capacity: 960)
        r.write(ramp(0, 100), captureTime: ms(0))
        r.write(ramp(100, 3000), captureTime: ms(0) + .nanoseconds(2_083_333))
        let cRead = r.read(samplesPerChannel: 960)
        let c = try #require(cRead)
        #expect(c.samples == ramp(2140, 960))
        #expect(c.skippedBefore == 2140)
    }

    @Test func aGapInTheCaptureTimelineBecomesSilence() throws {
        var r = AudioRing(channels: 2, capacity: 9600)
        r.write(ramp(0, 960), captureTime: ms(0))
        _ = r.read(samplesPerChannel: 960)
        // Sample 960 was due at 20 ms; it comes at 120 ms: 100 ms (4800 samples) of nothing.
        r.write(ramp(960, 960), captureTime: ms(120))
        #expect(r.silenceInserted == 4800)
        #expect(r.available == 4800 + 960)
        let firstRead = r.read(samplesPerChannel: 960)
        let first = try #require(firstRead)
        #expect(first.samples.allSatisfy { $0 == 0 })
        #expect(first.captureTime == ms(20))
        #expect(first.skippedBefore == 0)   // silence is in the stream, not a jump
        for _ in 0..<4 { _ = r.read(samplesPerChannel: 960) }
        let resumedRead = r.read(samplesPerChannel: 960)
        let resumed = try #require(resumedRead)
        #expect(resumed.samples == ramp(960, 960) && resumed.captureTime == ms(120))
        // Jitter below the threshold is not a gap.
        var j = AudioRing(channels: 2, capacity: 4800)
        j.write(ramp(0, 960), captureTime: ms(0))
        j.write(ramp(960, 960), captureTime: ms(50))
        #expect(j.silenceInserted == 0 && j.available == 1920)
    }

    @Test func aGapLongerThanTheRingIsCountedAsSkipped() throws {
        var r = AudioRing(channels: 2, capacity: 960)
        r.write(ramp(0, 480), captureTime: ms(0))
        // Due at 10 ms, comes at 1010 ms: 48 000 samples missing; the ring holds 960.
        r.write(ramp(480, 960), captureTime: ms(1010))
        let cRead = r.read(samplesPerChannel: 960)
        let c = try #require(cRead)
        #expect(c.samples == ramp(480, 960))               // the silence fell out too: only the newest remain
        #expect(c.skippedBefore == 480 + 48_000)
        #expect(c.captureTime == ms(1010))
    }

    @Test func oddInputIsHandledWithoutTrapping() {
        var r = AudioRing(channels: 2, capacity: 960)
        r.write([Float](repeating: 1, count: 3), captureTime: ms(0))   // one frame and a half: the half is ignored
        #expect(r.available == 1)
        r.write([], captureTime: ms(0))
        #expect(r.read(samplesPerChannel: 0) == nil)
        #expect(r.read(samplesPerChannel: 961) == nil)      // larger than the ring
        #expect(r.read(samplesPerChannel: -5) == nil)
    }
}
