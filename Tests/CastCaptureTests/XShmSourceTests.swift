import Testing
import Foundation
import CastCore
import CastMedia
@testable import CastCapture

/// The pixel at (x, y) of a captured BGRx frame, as (r, g, b).
func rgb(_ slot: some FrameSlot, _ frame: Frame, x: Int, y: Int) -> (UInt8, UInt8, UInt8) {
    let p = slot.bytes + y * frame.stride + 4 * x
    let b = p.load(as: UInt8.self), g = p.load(fromByteOffset: 1, as: UInt8.self), r = p.load(fromByteOffset: 2, as: UInt8.self)
    return frame.format == .bgrx ? (r, g, b) : (b, g, r)
}

@Suite(.serialized, .enabled(if: XvfbServer.installed, "Xvfb is not installed (apt install xvfb); the XShm capture tests need an X server"))
struct XShmSourceTests {
    @Test func capturesTheRootWindowPixelForPixel() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        let size = FrameSize(width: 640, height: 480)
        TestPattern.paint(display: x.display, size: size)
        let clock = ManualClock(Instant(nanoseconds: 42))
        let src = try XShmSource(options: .init(display: x.display, cursor: false), clock: clock)
        #expect(src.size == size)
        #expect(src.format == .bgrx)
        #expect(src.stride == 640 * 4)
        guard case .frame(let frame) = src.capture(onlyIfChanged: false) else { Issue.record("no frame"); return }
        #expect(frame.captureTime == Instant(nanoseconds: 42))
        #expect(frame.damage == nil)  // the first frame: everything is new
        let read = try #require(src.ring.takeNewest())
        defer { src.ring.finishRead(read) }
        var mismatches = 0
        for y in stride(from: 0, to: 480, by: 7) {
            for x in stride(from: 0, to: 640, by: 5) {
                let got = rgb(read.slot, frame, x: x, y: y), want = TestPattern.colour(x: x, y: y, size: size)
                if got != want { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
    }

    @Test func damageSaysWhatChangedAndNothingChangedSkipsTheRead() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        let src = try XShmSource(options: .init(display: x.display, cursor: false))
        guard case .frame = src.capture(onlyIfChanged: true) else { Issue.record("first capture must produce a frame"); return }
        // Nothing drawn since: no read, no slot used.
        guard case .timeout = src.capture(onlyIfChanged: true) else { Issue.record("unchanged screen must time out"); return }
        #expect(src.ring.stats.published == 1)
        TestPattern.fill(display: x.display, rect: FrameRect(x: 100, y: 50, width: 30, height: 20), rgb: (255, 0, 0))
        guard case .frame(let f) = src.capture(onlyIfChanged: true) else { Issue.record("a change must produce a frame"); return }
        #expect(f.damage == [FrameRect(x: 100, y: 50, width: 30, height: 20)])
        #expect(f.hasChanges)
        // Without onlyIfChanged the frame is read anyway, with empty damage.
        guard case .frame(let g) = src.capture(onlyIfChanged: false) else { Issue.record("forced capture"); return }
        #expect(g.damage == [])
        #expect(!g.hasChanges)
    }

    @Test func damageOfADroppedFrameReachesTheNextPublishedOne() throws {
        let x = try XvfbServer(width: 320, height: 240)
        defer { x.stop() }
        let src = try XShmSource(options: .init(display: x.display, cursor: false, slotCount: 1))
        guard case .frame = src.capture(onlyIfChanged: false) else { Issue.record("first capture"); return }
        // The only slot is being read: the next change is dropped…
        let old = try #require(src.ring.takeNewest())
        TestPattern.fill(display: x.display, rect: FrameRect(x: 10, y: 20, width: 30, height: 40), rgb: (0, 255, 0))
        guard case .timeout = src.capture(onlyIfChanged: true) else { Issue.record("a full ring must drop"); return }
        #expect(src.ring.stats.dropped == 1)
        src.ring.finishRead(old)
        // …and its damage arrives with the next frame, although nothing changed since.
        guard case .frame(let f) = src.capture(onlyIfChanged: true) else { Issue.record("pending damage must produce a frame"); return }
        #expect(f.damage == [FrameRect(x: 10, y: 20, width: 30, height: 40)])
        guard case .timeout = src.capture(onlyIfChanged: true) else { Issue.record("then nothing is pending"); return }
    }

    @Test func cursorIsCompositedWhereThePointerIsAndItsMovementIsDamage() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        TestPattern.fill(display: x.display, rect: FrameRect(x: 0, y: 0, width: 640, height: 480), rgb: (0, 0, 0))
        TestPattern.warpPointer(display: x.display, x: 200, y: 150)
        let withCursor = try XShmSource(options: .init(display: x.display, cursor: true, slotCount: 1))
        let without = try XShmSource(options: .init(display: x.display, cursor: false, slotCount: 1))
        func nonBlack(_ s: XShmSource) throws -> [(Int, Int)] {
            guard case .frame(let f) = s.capture(onlyIfChanged: false) else { throw CastError(.capture, "no frame") }
            let read = try #require(s.ring.takeNewest())
            defer { s.ring.finishRead(read) }
            var out: [(Int, Int)] = []
            for y in 0..<480 { for x in 0..<640 where rgb(read.slot, f, x: x, y: y) != (0, 0, 0) { out.append((x, y)) } }
            return out
        }
        #expect(try nonBlack(without).isEmpty)
        let drawn = try nonBlack(withCursor)
        #expect(!drawn.isEmpty, "the X server's cursor must appear")
        // Within a cursor-sized box around the pointer.
        #expect(drawn.allSatisfy { abs($0.0 - 200) <= 32 && abs($0.1 - 150) <= 32 })
        // Moving the pointer damages the old and the new cursor rectangles.
        TestPattern.warpPointer(display: x.display, x: 400, y: 300)
        guard case .frame(let moved) = withCursor.capture(onlyIfChanged: true) else { Issue.record("pointer move must be a change"); return }
        let damage = try #require(moved.damage)
        #expect(damage.count == 2)
        #expect(damage.contains { $0.intersects(FrameRect(x: 200, y: 150, width: 1, height: 1)) })
        #expect(damage.contains { $0.intersects(FrameRect(x: 400, y: 300, width: 1, height: 1)) })
    }

    @Test func randrOutputSelectsItsAreaAndAnUnknownNameListsTheOutputs() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        // Xvfb has one output, named "screen".
        let src = try XShmSource(options: .init(display: x.display, output: "screen"))
        #expect(src.area == FrameRect(x: 0, y: 0, width: 640, height: 480))
        #expect { try XShmSource(options: .init(display: x.display, output: "HDMI-9")) } throws: {
            ($0 as? CastError)?.code == .capture && "\($0)" == "X11: no output named HDMI-9; outputs are: screen"
        }
    }

    @Test func noServerIsACaptureErrorWithASentence() {
        #expect { try XShmSource(options: .init(display: ":97")) } throws: {
            ($0 as? CastError)?.code == .capture && "\($0)".hasPrefix("X11: cannot open display :97")
        }
    }

    /// While the encoder converts the one segment, a capture waits for it (XShmSource.slotWait)
    /// and, when the encoder does not let go in time, drops the frame (counted).
    @Test func aCaptureWhileTheSlotIsReadWaitsForItThenDropsTheFrame() throws {
        let x = try XvfbServer(width: 320, height: 240)
        defer { x.stop() }
        let src = try XShmSource(options: .init(display: x.display, cursor: false))
        guard case .frame = src.capture(onlyIfChanged: false) else { Issue.record("first capture"); return }
        let read = try #require(src.ring.takeNewest())
        guard case .timeout = src.capture(onlyIfChanged: false) else { Issue.record("captured into a slot being read"); return }
        #expect(src.ring.stats.dropped == 1)
        src.ring.finishRead(read)
        guard case .frame = src.capture(onlyIfChanged: false) else { Issue.record("capture after the read"); return }
        #expect(src.ring.stats.published == 2)
    }

    /// The XShm segments are the ring's slots; with an encoder stalled for
    /// five frame intervals (simulated clock, one thread), the free slot is
    /// written over and over, and the encoder always takes the newest frame.
    @Test func stalledEncoderSkipsXShmFramesAndTakesTheNewest() throws {
        let x = try XvfbServer(width: 320, height: 240)
        defer { x.stop() }
        let clock = ManualClock(.zero)
        let src = try XShmSource(options: .init(display: x.display, cursor: false), clock: clock)
        let period = Duration.nanoseconds(33_333_333)
        // One segment (issue 19): the encoder reads it only to convert the pixels.
        #expect(src.ring.slots.count == 1)
        var latencies: [Duration] = []
        var busyTicks = 0
        for tick in 0..<90 {
            if case .error(let e) = src.capture(onlyIfChanged: false) { Issue.record("capture failed: \(e)") }
            if busyTicks == 0 {
                if let next = src.ring.takeNewest() {
                    latencies.append(clock.now() - next.frame.captureTime)
                    // Same memory as the XShm image: zero copy.
                    #expect(src.ring.slots.contains { $0 === next.slot })
                    // Converted: the slot is the capture's again while the encoder
                    // stalls for five frame intervals on the converted copy.
                    src.ring.finishRead(next)
                    busyTicks = 5
                }
            }
            busyTicks = max(0, busyTicks - 1)
            clock.advance(by: period)
            _ = tick
        }
        let s = src.ring.stats
        #expect(s.dropped == 0)
        #expect(s.published == 90)
        // Every 5 ticks: one frame fills the free slot and four are written over it
        // (skipped); the encoder then takes the frame captured in that very tick.
        #expect(latencies.count == 18)
        #expect(s.skipped == 17 * 4 + 3)
        // Three slots used to give three intervals of age here; a queue would grow by four frames per stall.
        #expect(latencies.allSatisfy { $0 == .zero }, "\(latencies)")
    }
}
