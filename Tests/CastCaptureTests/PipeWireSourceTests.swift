import Testing
import Foundation
import Synchronization
import CastCore
import CastMedia
import CastSystem
@testable import CastCapture

/// Captures until a frame arrives (each try waits `frameWait`, 50 ms), at most `tries` times.
func nextFrame(_ src: PipeWireSource, tries: Int = 200) -> CaptureOutcome {
    for _ in 0..<tries {
        let o = src.capture(onlyIfChanged: true)
        if case .timeout = o { continue }
        return o
    }
    return .timeout
}

@Suite(.serialized, .enabled(if: PipeWireSession.installed,
                             "pipewire, wireplumber or dbus-daemon is missing (Scripts/bootstrap installs them); the PipeWire capture tests need a real daemon"))
struct PipeWireSourceTests {
    /// Shared memory, and a producer offering only linear DMA-BUF (memfds passed as DMA-BUF
    /// fds, which castd maps itself): the same pixels either way.
    @Test(arguments: [nil, PipeWireBufferPlan.linear])
    func deliversFramesOfTheRightSizePixelForPixel(dmabufModifier: UInt64?) throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let damage = FrameRect(x: 8, y: 16, width: 32, height: 24)
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 320, height: 240), damage: damage,
                                                                  dmabufModifier: dmabufModifier))
        defer { producer.stop() }
        let node = try producer.nodeId()
        let clock = ManualClock(Instant(nanoseconds: 7))
        let logged = Mutex<[LogLine]>([])
        let src = try PipeWireSource(options: .init(remote: session.remote, node: node, cursor: false,
                                                    log: { line in logged.withLock { $0.append(line) } }), clock: clock)
        #expect(src.size == FrameSize(width: 320, height: 240))
        #expect(src.format == .bgrx)
        guard case .frame(let first) = nextFrame(src) else { Issue.record("no frame"); return }
        #expect(first.captureTime == Instant(nanoseconds: 7))
        #expect(first.size == src.size)
        #expect(first.stride == 320 * 4)
        let read = try #require(src.ring.takeNewest())
        var mismatches = 0
        for y in stride(from: 1, to: 240, by: 3) {
            for x in stride(from: 0, to: 320, by: 3) {
                if rgb(read.slot, read.frame, x: x, y: y) != PipeWirePatternProducer.colour(x: x, y: y) { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
        // The first frame of a source has unknown damage; later ones carry the producer's.
        #expect(read.frame.damage == nil || read.sequence > 1)
        src.ring.finishRead(read)
        guard case .frame(let later) = nextFrame(src) else { Issue.record("no second frame"); return }
        #expect(later.damage == [damage])
        #expect(src.unusableBuffers == 0)
        // Shared memory comes as MemPtr or MemFd, as the daemon allocates it.
        let buffers = dmabufModifier == nil ? ["buffers=memptr", "buffers=memfd"] : ["buffers=dmabuf modifier=linear"]
        #expect(src.buffers.map(buffers.contains) == true)
        #expect(logged.withLock { $0 }.map(\.description) == ["level=info event=capture_buffers \(src.buffers ?? "")"])
    }

    /// A producer offering only a tiled DMA-BUF (Intel X-tiled here): nothing castd announces
    /// matches, so no format is agreed and castd says what it reads.
    @Test func aProducerOfferingOnlyTiledDMABUFIsRefusedInWords() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 64, height: 48), dmabufModifier: 0x0100_0000_0000_0001))
        defer { producer.stop() }
        let node = try producer.nodeId()
        var message = ""
        do {
            let src = try PipeWireSource(options: .init(remote: session.remote, node: node, cursor: false,
                                                        negotiationTimeout: .seconds(3)))
            Issue.record("a source opened with \(src.buffers ?? "no buffers")")
        } catch let e as CastError { message = e.message }
        #expect(message.contains("node \(node) offered no frame format castd reads"))
        #expect(message.contains("shared memory or linear DMA-BUF, not tiled GPU buffers"))
    }

    /// `dmabuf = false` (`--no-dmabuf`): castd announces shared memory only, so a producer
    /// that offers only linear DMA-BUF (which castd reads by default: the pixel test above)
    /// agrees no format with it.
    @Test func withDMABUFOffAProducerOfferingOnlyLinearDMABUFAgreesNoFormat() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 64, height: 48),
                                                                  dmabufModifier: PipeWireBufferPlan.linear))
        defer { producer.stop() }
        let node = try producer.nodeId()
        var message = ""
        do {
            let src = try PipeWireSource(options: .init(remote: session.remote, node: node, cursor: false,
                                                        negotiationTimeout: .seconds(3), dmabuf: false))
            Issue.record("a source opened with \(src.buffers ?? "no buffers")")
        } catch let e as CastError { message = e.message }
        #expect(message.contains("node \(node) offered no frame format castd reads"), "\(message)")
    }

    /// A DMA-BUF castd cannot map (as with a driver that refuses CPU mappings): castd asks for
    /// shared memory instead within the same stream, and the producer's fallback delivers the picture.
    @Test func anUnmappableDMABUFFallsBackToSharedMemory() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 160, height: 120),
                                                                  dmabufModifier: PipeWireBufferPlan.linear, unmappableDmabuf: true))
        defer { producer.stop() }
        let logged = Mutex<[LogLine]>([])
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false,
                                                    log: { line in logged.withLock { $0.append(line) } }))
        guard case .frame = nextFrame(src) else { Issue.record("no frame"); return }
        let read = try #require(src.ring.takeNewest())
        defer { src.ring.finishRead(read) }
        #expect(rgb(read.slot, read.frame, x: 150, y: 100) == PipeWirePatternProducer.colour(x: 150, y: 100))
        #expect(src.buffers == "buffers=memfd")
        let lines = logged.withLock { $0 }
        #expect(lines.map(\.event) == ["capture_buffers", "capture_dmabuf_unreadable", "capture_buffers"])
        #expect(lines.first?.description == "level=info event=capture_buffers buffers=dmabuf modifier=linear")
        #expect(lines.dropFirst().first?["reason"]?.contains("Permission denied") == true)
    }

    @Test func readsRGBxAsRGBx() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 64, height: 48), format: .rgbx))
        defer { producer.stop() }
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false))
        #expect(src.format == .rgbx)
        guard case .frame = nextFrame(src) else { Issue.record("no frame"); return }
        let read = try #require(src.ring.takeNewest())
        defer { src.ring.finishRead(read) }
        #expect(rgb(read.slot, read.frame, x: 50, y: 30) == PipeWirePatternProducer.colour(x: 50, y: 30))
    }

    @Test func aSizeChangeIsReinitAndANewSourceGetsTheNewSize() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: FrameSize(width: 320, height: 240)))
        defer { producer.stop() }
        let node = try producer.nodeId()
        do {
            let src = try PipeWireSource(options: .init(remote: session.remote, node: node, cursor: false))
            guard case .frame = nextFrame(src) else { Issue.record("no frame"); return }
            producer.resize(to: FrameSize(width: 400, height: 300))
            var outcome = nextFrame(src)
            while case .frame = outcome { outcome = nextFrame(src) }
            guard case .reinit(let size) = outcome else { Issue.record("expected reinit, got \(outcome)"); return }
            #expect(size == FrameSize(width: 400, height: 300))
        }
        let again = try PipeWireSource(options: .init(remote: session.remote, node: node, cursor: false))
        #expect(again.size == FrameSize(width: 400, height: 300))
        guard case .frame(let f) = nextFrame(again) else { Issue.record("no frame after reinit"); return }
        #expect(f.size == FrameSize(width: 400, height: 300))
    }

    @Test func aStalledConsumerKeepsTheNewestInsteadOfQueueing() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: FrameSize(width: 160, height: 120), fps: 60))
        defer { producer.stop() }
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false, slotCount: 2))
        // Nobody reads the ring: both slots fill, then each new frame is written over the older one.
        for _ in 0..<400 where src.ring.stats.published < 12 { _ = src.capture(onlyIfChanged: true) }
        let stats = src.ring.stats
        #expect(stats.published >= 12)
        #expect(stats.dropped == 0)
        #expect(stats.skipped == stats.published - 2)
        // The reader comes back: it gets the newest of what was held, the other is skipped...
        let stale = try #require(src.ring.takeNewest())
        #expect(src.ring.stats.skipped == stats.published - 1)
        src.ring.finishRead(stale)
        let sentAtResume = producer.framesSent
        // ...and the next frame is a fresh one, not a backlog of what was dropped.
        guard case .frame = nextFrame(src) else { Issue.record("no frame after resuming"); return }
        let fresh = try #require(src.ring.takeNewest())
        defer { src.ring.finishRead(fresh) }
        let n = PipeWirePatternProducer.counter(in: fresh.slot.bytes)
        #expect(UInt64(n) + 1 >= sentAtResume)
        #expect(n > PipeWirePatternProducer.counter(in: stale.slot.bytes))
    }

    @Test func aStaticScreenStillGivesRefreshFramesWhenAsked() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: FrameSize(width: 96, height: 64)))
        defer { producer.stop() }
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false))
        guard case .frame = nextFrame(src) else { Issue.record("no frame"); return }
        producer.pause(true)
        // Let what is in flight arrive, reading each frame as an encoder would.
        var last: UInt32 = 0
        while case .frame = src.capture(onlyIfChanged: true) {
            let r = try #require(src.ring.takeNewest())
            last = PipeWirePatternProducer.counter(in: r.slot.bytes)
            src.ring.finishRead(r)
        }
        if let r = src.ring.takeNewest() {
            last = PipeWirePatternProducer.counter(in: r.slot.bytes)
            src.ring.finishRead(r)
        }
        let published = src.ring.stats.published
        // Nothing changed: with onlyIfChanged nothing comes; without it, the last frame again.
        guard case .timeout = src.capture(onlyIfChanged: true) else { Issue.record("a static screen must time out"); return }
        guard case .frame(let refresh) = src.capture(onlyIfChanged: false) else { Issue.record("no refresh frame"); return }
        #expect(refresh.damage == [])
        #expect(src.ring.stats.published == published + 1)
        let r = try #require(src.ring.takeNewest())
        #expect(PipeWirePatternProducer.counter(in: r.slot.bytes) == last)
        #expect(rgb(r.slot, r.frame, x: 90, y: 60) == PipeWirePatternProducer.colour(x: 90, y: 60))
        // While the encoder holds that slot, a refresh would be pointless.
        guard case .timeout = src.capture(onlyIfChanged: false) else { Issue.record("refresh while being read"); return }
        src.ring.finishRead(r)
    }

    @Test func cursorMetadataIsDrawnIntoFrames() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 200, height: 150), cursor: true))
        defer { producer.stop() }
        let node = try producer.nodeId()
        for drawn in [true, false] {
            let src = try PipeWireSource(options: .init(remote: session.remote, node: node, cursor: drawn))
            // Skip the first frame: a cursor bitmap may not have reached it.
            guard case .frame = nextFrame(src), case .frame = nextFrame(src) else { Issue.record("no frames"); return }
            let read = try #require(src.ring.takeNewest())
            defer { src.ring.finishRead(read) }
            let pos = 10 + Int(PipeWirePatternProducer.counter(in: read.slot.bytes) % 100)
            let inside = rgb(read.slot, read.frame, x: pos + 8, y: pos + 8)
            if drawn {
                #expect(inside == (255, 0, 255))
                #expect(read.frame.damage.map { $0.contains { $0.x == pos && $0.width == 16 } } ?? true)
            } else {
                #expect(inside == PipeWirePatternProducer.colour(x: pos + 8, y: pos + 8))
            }
        }
    }

    @Test func theProducerLeavingIsAnErrorInWords() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: FrameSize(width: 64, height: 48)))
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false))
        guard case .frame = nextFrame(src) else { Issue.record("no frame"); return }
        producer.stop()
        var outcome = nextFrame(src)
        while case .frame = outcome { outcome = nextFrame(src) }
        guard case .error(let e) = outcome else { Issue.record("expected an error, got \(outcome)"); return }
        #expect(e.message.contains("PipeWire"))
    }

    /// Issue 31: a window's stream (monitor-sized, the window where the crop says): only the crop,
    /// in a steady frame; a crop of another size fitted into it; the stream's end is the window's close.
    @Test func aWindowStreamIsCroppedIntoASteadyFrameAndItsEndIsTheWindowClosing() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let crop = FrameRect(x: 40, y: 30, width: 160, height: 120)
        let producer = try PipeWirePatternProducer(remote: session.remote,
                                                   options: .init(size: FrameSize(width: 320, height: 240), crop: crop))
        defer { producer.stop() }
        let logged = Mutex<[LogLine]>([])
        let window = PipeWireSource.WindowStream(caps: .default, closedHold: .milliseconds(300), name: "test window")
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false,
                                                    log: { line in logged.withLock { $0.append(line) } }, window: window))
        #expect(src.size == FrameSize(width: 160, height: 120))
        guard case .frame(let first) = nextFrame(src) else { Issue.record("no frame"); return }
        #expect(first.size == src.size && first.stride == 160 * 4)
        var read = try #require(src.ring.takeNewest())
        var mismatches = 0
        for y in stride(from: 0, to: 120, by: 3) {
            for x in stride(from: 0, to: 160, by: 3) {
                if rgb(read.slot, read.frame, x: x, y: y) != PipeWirePatternProducer.colour(x: 40 + x, y: 30 + y) { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
        src.ring.finishRead(read)
        #expect(logged.withLock { $0 }.map(\.description).contains(
            "level=info event=shared_window_size window=\"test window\" size=160x120 frame=160x120 placed=160x120+0+0 crop=160x120+40+30"))

        // Wider (320x120): shrunk to 160x60 with bars above and below, in the same frame.
        producer.setCrop(FrameRect(x: 0, y: 60, width: 320, height: 120))
        var placed: Frame? = nil
        for _ in 0..<40 {
            guard case .frame(let f) = nextFrame(src) else { continue }
            read = try #require(src.ring.takeNewest())
            defer { src.ring.finishRead(read) }
            // Bars black; the picture's middle is the stream's (160, 120), halved.
            if rgb(read.slot, read.frame, x: 80, y: 10) == (0, 0, 0) && rgb(read.slot, read.frame, x: 80, y: 110) == (0, 0, 0) {
                let (r, g, _) = rgb(read.slot, read.frame, x: 80, y: 60)
                #expect(abs(Int(r) - 160) <= 2 && abs(Int(g) - 120) <= 2)
                placed = f
                break
            }
        }
        #expect(placed?.size == FrameSize(width: 160, height: 120))

        // The producer leaves (the window closed): the slate, then the end in words.
        producer.stop()
        var outcome = nextFrame(src)
        var slate = false
        while case .frame(let f) = outcome {
            if let r = src.ring.takeNewest() {
                slate = rgb(r.slot, r.frame, x: 5, y: 5) == (0x40, 0x40, 0x40) && f.damage == nil
                src.ring.finishRead(r)
            }
            outcome = nextFrame(src)
        }
        #expect(slate)
        // The slate is drawn once; the end comes when the hold is over (as the capture loop waits for it).
        for _ in 0..<20 {
            guard case .timeout = outcome else { break }
            _ = src.waitForChange(until: SystemMonotonicClock().now() + .milliseconds(100))
            outcome = src.capture(onlyIfChanged: true)
        }
        guard case .sourceEnded(let sentence) = outcome else { Issue.record("expected the end, got \(outcome)"); return }
        #expect(sentence == "the shared window was closed, so the cast ended")
        #expect(logged.withLock { $0 }.map(\.description).contains(
            "level=notice event=shared_window_closed window=\"test window\" shows=slate then=\"the cast ends\""))
    }

    @Test func interruptEndsAWait() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: FrameSize(width: 64, height: 48)))
        defer { producer.stop() }
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId(), cursor: false))
        src.interrupt()
        guard case .interrupted = src.capture(onlyIfChanged: true) else { Issue.record("expected interrupted"); return }
    }

    @Test func aNodeThatDoesNotExistFailsInWords() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        #expect {
            _ = try PipeWireSource(options: .init(remote: session.remote, node: 4242, negotiationTimeout: .milliseconds(1500)))
        } throws: { e in
            // "no node available" from the session manager, or no format in time when it is slow to start.
            return (e as? CastError)?.message.contains("node 4242") ?? false
        }
    }
}

/// No daemon needed.
struct PipeWireSourceErrorTests {
    @Test func noDaemonIsASentence() {
        #expect {
            _ = try PipeWireSource(options: .init(remote: .socket("/nonexistent/castd/pipewire-0")))
        } throws: { e in
            (e as? CastError)?.message.contains("cannot connect to the daemon's socket /nonexistent/castd/pipewire-0") ?? false
        }
    }
}

/// Where castd looks for a daemon socket before initialising libpipewire (issue 19: none
/// found, no libpipewire modules loaded).
struct PipeWireDaemonSocketTests {
    func candidates(_ env: [String: String]) -> [String] {
        PipeWireConnection.daemonSocketCandidates { env[$0] }
    }

    @Test func defaultNameInEachRuntimeDirectory() {
        #expect(candidates(["XDG_RUNTIME_DIR": "/run/user/1000"]) == ["/run/user/1000/pipewire-0", "/run/pipewire/pipewire-0"])
        #expect(candidates(["PIPEWIRE_RUNTIME_DIR": "/a", "XDG_RUNTIME_DIR": "/b", "USERPROFILE": "/c"])
                == ["/a/pipewire-0", "/b/pipewire-0", "/c/pipewire-0", "/run/pipewire/pipewire-0"])
        #expect(candidates([:]) == ["/run/pipewire/pipewire-0"])
    }

    @Test func remoteNamesAbsoluteOrRelative() {
        #expect(candidates(["PIPEWIRE_REMOTE": "/tmp/x/sock", "XDG_RUNTIME_DIR": "/b"]) == ["/tmp/x/sock"])
        #expect(candidates(["PIPEWIRE_REMOTE": "other,/tmp/y", "XDG_RUNTIME_DIR": "/b"])
                == ["/b/other", "/run/pipewire/other", "/tmp/y"])
        #expect(candidates(["PIPEWIRE_REMOTE": "", "XDG_RUNTIME_DIR": "/b"]) == ["/b/pipewire-0", "/run/pipewire/pipewire-0"])
    }
}

/// The metadata bookkeeping of the process callback, without PipeWire.
struct PipeWireFrameAssemblerTests {
    let size = FrameSize(width: 100, height: 80)

    func finish(_ a: inout PipeWireFrameAssembler, _ damage: [FrameRect]?, cursor: PipeWireFrameAssembler.CursorUpdate? = nil) -> [FrameRect]? {
        let slot = MemorySlot(capacity: size.width * size.height * 4)
        return a.finish(cursor: cursor, damage: damage, size: size, format: .bgrx, pixels: slot.bytes, stride: size.width * 4)
    }

    @Test func firstFrameIsUnknownThenTheProducersDamageClipped() {
        var a = PipeWireFrameAssembler()
        #expect(finish(&a, [FrameRect(x: 1, y: 1, width: 2, height: 2)]) == nil)
        #expect(finish(&a, [FrameRect(x: 90, y: 70, width: 20, height: 20)]) == [FrameRect(x: 90, y: 70, width: 10, height: 10)])
        #expect(finish(&a, []) == [])
    }

    @Test func damageOfDroppedFramesReachesTheNextOneAndUnknownWins() {
        var a = PipeWireFrameAssembler()
        _ = finish(&a, nil)
        a.noteDropped(cursor: nil, damage: [FrameRect(x: 0, y: 0, width: 4, height: 4)], size: size)
        #expect(finish(&a, [FrameRect(x: 10, y: 10, width: 4, height: 4)])
                == [FrameRect(x: 0, y: 0, width: 4, height: 4), FrameRect(x: 10, y: 10, width: 4, height: 4)])
        a.noteDropped(cursor: nil, damage: nil, size: size)
        #expect(finish(&a, [FrameRect(x: 10, y: 10, width: 4, height: 4)]) == nil)
        #expect(finish(&a, []) == [])
    }

    @Test func aMovingCursorDamagesWhereItWasAndWhereItIs() {
        var a = PipeWireFrameAssembler()
        let pixels: [UInt8] = Array(repeating: 255, count: 2 * 2 * 4)
        pixels.withUnsafeBufferPointer { p in
            let bitmap = CursorBitmap(format: CursorBitmap.formatBGRA, width: 2, height: 2, stride: 8, bytes: p.baseAddress!)
            _ = finish(&a, [], cursor: .init(x: 5, y: 5, hotX: 0, hotY: 0, bitmap: bitmap))
        }
        // A position-only update (no bitmap): the remembered shape moves.
        let d = finish(&a, [], cursor: .init(x: 20, y: 30, hotX: 1, hotY: 1, bitmap: nil))
        #expect(d == [FrameRect(x: 5, y: 5, width: 2, height: 2), FrameRect(x: 19, y: 29, width: 2, height: 2)])
        #expect(a.cursor?.pixels.first == 0xffff_ffff)
        // Unmoved: nothing extra.
        #expect(finish(&a, [], cursor: .init(x: 20, y: 30, hotX: 1, hotY: 1, bitmap: nil)) == [])
    }
}
