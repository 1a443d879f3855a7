import CastCore
import CastSystem
import CastMedia
import CX11
import Testing
@testable import CastCapture

/// A test client's windows: titled, with a solid background the server paints itself.
final class TestWindows {
    let dpy: OpaquePointer
    let root: Window
    init(display: String) {
        dpy = XOpenDisplay(display)!
        root = castd_x11_root_window(dpy, castd_x11_default_screen(dpy))
    }
    deinit { XCloseDisplay(dpy) }

    func open(_ title: String, _ r: FrameRect, rgb: (UInt8, UInt8, UInt8)) -> Window {
        let pixel = UInt(rgb.0) << 16 | UInt(rgb.1) << 8 | UInt(rgb.2)
        let w = XCreateSimpleWindow(dpy, root, Int32(r.x), Int32(r.y), UInt32(r.width), UInt32(r.height), 0, 0, pixel)
        XStoreName(dpy, w, title)
        XMapWindow(dpy, w)
        XSync(dpy, 0)
        return w
    }

    func sync() { XSync(dpy, 0) }
}

@Suite(.serialized, .enabled(if: XvfbServer.installed, "Xvfb is not installed (apt install xvfb); the window capture tests need an X server"))
struct XCompositeWindowSourceTests {
    let magenta: (UInt8, UInt8, UInt8) = (200, 40, 160)
    let green: (UInt8, UInt8, UInt8) = (40, 200, 60)

    func frame<S: FrameSource>(_ src: S) throws -> (Frame, FrameRing<S.Slot>.ReadLease) {
        guard case .frame(let f) = src.capture(onlyIfChanged: false) else { throw CastError(.capture, "no frame") }
        return (f, try #require(src.ring.takeNewest()))
    }

    func same(_ a: (UInt8, UInt8, UInt8), _ b: (UInt8, UInt8, UInt8)) -> Bool { a == b }

    @Test func aCoveredWindowComesThroughWholeAndTheOtherWindowDoesNot() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        let client = TestWindows(display: x.display)
        _ = client.open("Slides", FrameRect(x: 40, y: 40, width: 200, height: 100), rgb: magenta)
        // Opened later, so above: covers the right half of Slides.
        _ = client.open("Mail", FrameRect(x: 140, y: 20, width: 300, height: 200), rgb: green)
        let src = try XCompositeWindowSource(options: .init(display: x.display, window: "slides"))
        #expect(src.window.title == "Slides")
        #expect(src.size == FrameSize(width: 200, height: 100))
        let (f, lease) = try frame(src)
        defer { src.ring.finishRead(lease) }
        #expect(f.damage == nil)
        var wrong = 0
        for y in stride(from: 0, to: 100, by: 9) {
            for xx in stride(from: 0, to: 200, by: 11) where !same(rgb(lease.slot, f, x: xx, y: y), magenta) { wrong += 1 }
        }
        #expect(wrong == 0)   // the covered half too, and no green
    }

    @Test func aResizedWindowKeepsTheFrameSizeWithItsAspectKept() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        let client = TestWindows(display: x.display)
        let w = client.open("Slides", FrameRect(x: 0, y: 0, width: 200, height: 100), rgb: magenta)
        let clock = SystemMonotonicClock()
        let src = try XCompositeWindowSource(options: .init(display: x.display, window: "Slides"), clock: clock)
        do { let (_, l) = try frame(src); src.ring.finishRead(l) }
        // Twice as wide: drawn at 200x50 in the middle of the 200x100 frame, black above and below.
        XResizeWindow(client.dpy, w, 400, 100)
        XMoveWindow(client.dpy, w, 100, 300)   // a move changes nothing in the picture
        client.sync()
        #expect(src.waitForChange(until: clock.now() + .seconds(2)))
        let (f, lease) = try frame(src)
        #expect(f.size == FrameSize(width: 200, height: 100))
        #expect(f.damage == nil)   // a new placement: the whole frame is new
        #expect(same(rgb(lease.slot, f, x: 100, y: 10), (0, 0, 0)))
        #expect(same(rgb(lease.slot, f, x: 100, y: 90), (0, 0, 0)))
        #expect(same(rgb(lease.slot, f, x: 100, y: 50), magenta))
        #expect(same(rgb(lease.slot, f, x: 1, y: 26), magenta))
        #expect(same(rgb(lease.slot, f, x: 100, y: 24), (0, 0, 0)))
        src.ring.finishRead(lease)
        // Smaller than the frame: centred, not grown.
        XResizeWindow(client.dpy, w, 100, 50)
        client.sync()
        #expect(src.waitForChange(until: clock.now() + .seconds(2)))
        let (g, l2) = try frame(src)
        defer { src.ring.finishRead(l2) }
        #expect(same(rgb(l2.slot, g, x: 100, y: 50), magenta))
        #expect(same(rgb(l2.slot, g, x: 40, y: 50), (0, 0, 0)))
        #expect(same(rgb(l2.slot, g, x: 60, y: 50), magenta))
    }

    @Test func anUnmappedWindowIsASlateAndAClosedOneASlateThenTheEnd() throws {
        let x = try XvfbServer(width: 640, height: 480)
        defer { x.stop() }
        let client = TestWindows(display: x.display)
        let w = client.open("Slides", FrameRect(x: 0, y: 0, width: 120, height: 80), rgb: magenta)
        // A real clock (the waits below are bounded in real time), and a short hold after the close.
        let clock = SystemMonotonicClock()
        let src = try XCompositeWindowSource(options: .init(display: x.display, window: "\(w)", closedHold: .milliseconds(300)),
                                             clock: clock)
        do { let (_, l) = try frame(src); src.ring.finishRead(l) }
        let grey = SharedWindowLifecycle.slateGrey
        // Each step: the client's request, the source hears of it, the centre pixel of the next frame.
        let steps: [(String, (OpaquePointer, Window) -> Int32, (UInt8, UInt8, UInt8))] = [
            ("unmapped: a slate", XUnmapWindow, (grey, grey, grey)),
            ("mapped again: the window", XMapWindow, magenta),
            ("destroyed: a slate", XDestroyWindow, (grey, grey, grey)),
        ]
        for (what, request, want) in steps {
            _ = request(client.dpy, w)
            client.sync()
            #expect(src.waitForChange(until: clock.now() + .seconds(1)), "\(what)")
            let (f, l) = try frame(src)
            #expect(same(rgb(l.slot, f, x: 60, y: 40), want), "\(what)")
            src.ring.finishRead(l)
        }
        let closed = clock.now()
        guard case .frame = src.capture(onlyIfChanged: false) else { Issue.record("the slate holds until the hold is over"); return }
        src.ring.finishRead(try #require(src.ring.takeNewest()))
        // The wait ends when the hold is over (not at its deadline), and the source ends.
        #expect(src.waitForChange(until: clock.now() + .seconds(5)))
        #expect(clock.now() - closed >= .milliseconds(100))   // it did wait for the hold
        guard case .sourceEnded(let sentence) = src.capture(onlyIfChanged: true) else {
            Issue.record("after the hold the source must end"); return
        }
        #expect(sentence == "the shared window 'Slides' was closed, so the cast ended")
    }

    @Test func anUnknownWindowIsOneSentenceListingTheWindows() throws {
        let x = try XvfbServer(width: 320, height: 240)
        defer { x.stop() }
        let client = TestWindows(display: x.display)
        let w = client.open("Slides", FrameRect(x: 0, y: 0, width: 60, height: 40), rgb: magenta)
        #expect(throws: CastError(.noSuchWindow, "no window matches --window 'Mail'; the windows are: 0x\(String(w, radix: 16)) 'Slides' 60x40+0+0")) {
            _ = try XCompositeWindowSource(options: .init(display: x.display, window: "Mail"))
        }
        // The listing doctor prints, from the same catalogue.
        let probe = try #require(X11Probe.run(display: x.display))
        #expect(probe.hasComposite)
        #expect(probe.windows.map(\.title) == ["Slides"])
        #expect(probe.outputs.map(\.name) == ["screen"])
        #expect(probe.outputs.first?.area == FrameRect(x: 0, y: 0, width: 320, height: 240))
    }
}
