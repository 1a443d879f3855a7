import CastCore
import CastMedia
import CastSystem
import CX11
#if canImport(Glibc)
import Glibc
#endif

/// One X11 window captured through XComposite (issue 31): the window is redirected
/// (automatically: it still shows on screen as before), its off-screen pixmap is read with
/// MIT-SHM, so covered parts come through whole, and moves change nothing. The frames have a
/// steady size chosen at the start (the window's size then, within the caps); when the window
/// changes size its picture is shrunk with its aspect kept and centred in that frame (black
/// bars), so the receiver never sees a new size. While the window is unmapped (minimised) the
/// frames are a grey slate; when it is destroyed, the slate for two seconds, then
/// `.sourceEnded` (`SharedWindowLifecycle`). Zero copy while the window has the frame's size:
/// the pixmap is read straight into the ring's segment; otherwise into a staging segment of
/// the window's size, then scaled into the slot. One thread uses it.
public final class XCompositeWindowSource: FrameSource {
    public struct Options: Sendable {
        /// `$DISPLAY` when nil.
        public var display: String?
        /// `--window NAME|ID`, as `WindowChoice` reads it.
        public var window: String
        /// The frame is the window's size at the start, within these caps.
        public var caps: CaptureCaps
        public var slotCount: Int
        /// How long the slate shows after the window closed (`SharedWindowLifecycle.closedHold`).
        public var closedHold: Duration

        public init(display: String? = nil, window: String, caps: CaptureCaps = .default, slotCount: Int = 1,
                    closedHold: Duration = SharedWindowLifecycle.closedHold) {
            self.closedHold = closedHold
            self.display = display
            self.window = window
            self.caps = caps
            self.slotCount = slotCount
        }
    }

    public typealias ShmSlot = XShmSource.ShmSlot
    public let ring: FrameRing<ShmSlot>
    public let format: PixelFormat
    /// The steady frame size.
    public let size: FrameSize
    public let stride: Int
    /// The window as it was found at the start.
    public let window: X11Window
    public var changesNeedProbing: Bool { false }
    public var notifiesEachChange: Bool { true }
    /// What the cast shows now (window, slate, ended).
    public private(set) var lifecycle: SharedWindowLifecycle

    private let display: OpaquePointer
    private let xid: Window
    private let visual: UnsafeMutablePointer<Visual>
    private let depth: Int32
    private let damage: Damage
    private let region: XserverRegion
    private let damageEventBase: Int32
    private let clock: any MonotonicClock
    private let log: @Sendable (LogLine) -> Void
    /// The named pixmap of the window's current contents (0: none: unmapped or gone).
    private var pixmap: Pixmap = 0
    private var needsRename = true
    /// The window's pixmap size (border included) and where it goes in the frame.
    private var windowSize = FrameSize(width: 0, height: 0)
    private var placement = FrameRect(x: 0, y: 0, width: 0, height: 0)
    /// A segment of the window's size when it differs from the frame.
    private var staging: ShmSlot?
    /// Draws the staged picture into each slot and knows the placement each slot holds (an
    /// empty rect after a slate), so that bars are cleared only when the placement changes.
    private var placer = WindowPlacer()
    /// The next frame must be whole (first frame, a placement change, slate ↔ window).
    private var wholeFrame = true
    private var pendingDamage: [FrameRect] = []

    public init(options: Options, clock: any MonotonicClock = SystemMonotonicClock(),
                log: @escaping @Sendable (LogLine) -> Void = { _ in }) throws {
        self.clock = clock
        self.log = log
        guard let dpy = XOpenDisplay(options.display) else {
            throw CastError(.capture, "X11: cannot open display \(options.display ?? "$DISPLAY"); is an X server running and DISPLAY set?")
        }
        var ok = false
        defer { if !ok { XCloseDisplay(dpy) } }
        recordXErrors()
        var eb: Int32 = 0, erb: Int32 = 0, major: Int32 = 0, minor: Int32 = 0
        guard XCompositeQueryExtension(dpy, &eb, &erb) != 0 else {
            throw CastError(.capture, "X11: the server has no Composite extension, so one window cannot be captured; share the screen (--source monitor) instead")
        }
        XCompositeQueryVersion(dpy, &major, &minor)
        guard major > 0 || minor >= 2 else {
            throw CastError(.capture, "X11: Composite \(major).\(minor) cannot name window pixmaps (0.2 is needed); share the screen (--source monitor) instead")
        }
        guard XShmQueryExtension(dpy) != 0 else {
            throw CastError(.capture, "X11: the server has no MIT-SHM extension; XShm capture is impossible (is it a remote display?)")
        }
        var damageBase: Int32 = 0
        guard XDamageQueryExtension(dpy, &damageBase, &erb) != 0, XFixesQueryExtension(dpy, &eb, &erb) != 0 else {
            throw CastError(.capture, "X11: the server lacks the DAMAGE or XFIXES extension")
        }
        damageEventBase = damageBase
        let root = castd_x11_root_window(dpy, castd_x11_default_screen(dpy))
        let chosen = try X11Windows.choose(options.window, dpy, root: root)
        let xid = Window(chosen.id)
        var attrs = XWindowAttributes()
        lastXError.store(0, ordering: .relaxed)
        guard XGetWindowAttributes(dpy, xid, &attrs) != 0, let visual = attrs.visual else {
            throw CastError(.noSuchWindow, "X11: window \(chosen.hexID) is gone")
        }
        let fmt: PixelFormat
        switch (visual.pointee.red_mask, visual.pointee.blue_mask) {
        case (0xff0000, 0xff): fmt = .bgrx
        case (0xff, 0xff0000): fmt = .rgbx
        default:
            throw CastError(.capture, "X11: window \(chosen.hexID) has an unsupported visual (depth \(attrs.depth)); castd captures 24/32-bit TrueColor")
        }
        let border = Int(attrs.border_width)
        let initial = FrameSize(width: Int(attrs.width) + 2 * border, height: Int(attrs.height) + 2 * border)
        let frame = options.caps.targetSize(for: initial)

        var slots: [ShmSlot] = []
        do {
            let area = FrameRect(x: 0, y: 0, width: frame.width, height: frame.height)
            for _ in 0..<max(1, options.slotCount) {
                slots.append(try XShmSource.makeSlot(dpy, visual: visual, depth: attrs.depth, size: area))
            }
        } catch {
            for s in slots { XShmSource.free(s, dpy) }
            throw error
        }
        guard slots[0].image.pointee.bits_per_pixel == 32 else {
            for s in slots { XShmSource.free(s, dpy) }
            throw CastError(.capture, "X11: images have \(slots[0].image.pointee.bits_per_pixel) bits per pixel; castd needs 32")
        }
        lastXError.store(0, ordering: .relaxed)
        XSelectInput(dpy, xid, StructureNotifyMask)
        XCompositeRedirectWindow(dpy, xid, Int32(CompositeRedirectAutomatic))
        damage = XDamageCreate(dpy, xid, Int32(XDamageReportNonEmpty))
        region = XFixesCreateRegion(dpy, nil, 0)
        XSync(dpy, 0)
        if lastXError.load(ordering: .relaxed) != 0 {
            for s in slots { XShmSource.free(s, dpy) }
            throw CastError(.capture, "X11: window \(chosen.hexID) could not be redirected (X error \(lastXError.load(ordering: .relaxed))); it may have closed")
        }
        display = dpy
        self.xid = xid
        self.visual = visual
        depth = attrs.depth
        window = chosen
        format = fmt
        size = frame
        stride = Int(slots[0].image.pointee.bytes_per_line)
        ring = FrameRing(slots: slots)
        lifecycle = SharedWindowLifecycle(title: chosen.title, mapped: attrs.map_state == IsViewable,
                                          closedHold: options.closedHold)
        ok = true
    }

    deinit {
        if pixmap != 0 { XFreePixmap(display, pixmap) }
        if let staging { XShmSource.free(staging, display) }
        XFixesDestroyRegion(display, region)
        for s in ring.slots { XShmSource.free(s, display) }
        // Closing the connection drops the redirection and the damage object with it.
        XCloseDisplay(display)
    }

    // MARK: Events

    /// Reads pending events; true when something is to be shown (damage, a size or state change).
    @discardableResult
    private func drainEvents() -> Bool {
        var ev = XEvent()
        var changed = false
        while XPending(display) > 0 {
            XNextEvent(display, &ev)
            if ev.type == damageEventBase + XDamageNotify { changed = true; continue }
            let now = clock.now()
            switch ev.type {
            case ConfigureNotify where ev.xconfigure.window == xid:
                let border = Int(ev.xconfigure.border_width)
                let s = FrameSize(width: Int(ev.xconfigure.width) + 2 * border, height: Int(ev.xconfigure.height) + 2 * border)
                if s != windowSize { needsRename = true; changed = true }
            case DestroyNotify where ev.xdestroywindow.window == xid:
                changed = lifecycleEvent(.destroyed, now: now) || changed
            case UnmapNotify where ev.xunmap.window == xid:
                changed = lifecycleEvent(.unmapped, now: now) || changed
            case MapNotify where ev.xmap.window == xid:
                // A mapped window gets a new pixmap.
                needsRename = true
                changed = lifecycleEvent(.mapped, now: now) || changed
            default: break
            }
        }
        return changed
    }

    private func lifecycleEvent(_ e: SharedWindowLifecycle.Event, now: Instant) -> Bool {
        guard lifecycle.handle(e, now: now) else { return false }
        wholeFrame = true
        switch lifecycle.state {
        case .shown: log(LogLine(.notice, "shared_window_shown", [("window", window.hexID)]))
        case .hidden: log(LogLine(.notice, "shared_window_hidden", [("window", window.hexID), ("shows", "slate")]))
        case .closed: log(LogLine(.notice, "shared_window_closed", [("window", window.hexID), ("shows", "slate"),
                                                                     ("then", "the cast ends")]))
        }
        return true
    }

    public func waitForChange(until deadline: Instant) -> Bool {
        var fds = pollfd(fd: castd_x11_connection_number(display), events: Int16(POLLIN), revents: 0)
        while true {
            if drainEvents() { return true }
            if case .end = lifecycle.show(now: clock.now()) { return true }
            let left = (deadline - clock.now()).totalNanoseconds
            guard left > 0 else { return false }
            let ms = Int32(min(left / 1_000_000 + 1, 1_000))
            if poll(&fds, 1, ms) < 0 { continue }
        }
    }

    // MARK: Pixmap

    /// Names the window's current pixmap and sizes the staging segment for it. False when the
    /// window has none (unmapped between the event and now) or is gone.
    private func renamePixmap() -> Bool {
        needsRename = false
        if pixmap != 0 { XFreePixmap(display, pixmap); pixmap = 0 }
        lastXError.store(0, ordering: .relaxed)
        let p = XCompositeNameWindowPixmap(display, xid)
        var rootOut: Window = 0
        var x: Int32 = 0, y: Int32 = 0
        var w: UInt32 = 0, h: UInt32 = 0, b: UInt32 = 0, d: UInt32 = 0
        let got = XGetGeometry(display, p, &rootOut, &x, &y, &w, &h, &b, &d) != 0
        guard got, lastXError.load(ordering: .relaxed) == 0, w > 0, h > 0 else {
            if p != 0 { XFreePixmap(display, p) }
            XSync(display, 0)
            return false
        }
        pixmap = p
        let s = FrameSize(width: Int(w), height: Int(h))
        if s != windowSize {
            windowSize = s
            let place = s.fitted(into: size)
            if place != placement { wholeFrame = true }
            placement = place
            if let staging { XShmSource.free(staging, display); self.staging = nil }
            if s != size {
                staging = try? XShmSource.makeSlot(display, visual: visual, depth: depth,
                                                   size: FrameRect(x: 0, y: 0, width: s.width, height: s.height))
            }
            log(LogLine(.info, "shared_window_size", [("window", window.hexID), ("size", "\(s)"),
                                                      ("frame", "\(size)"), ("placed", "\(place)")]))
        }
        return true
    }

    /// Damage since the last call, in frame coordinates.
    private func takeDamage() -> [FrameRect] {
        XDamageSubtract(display, damage, 0, region)
        var count: Int32 = 0
        guard let rects = XFixesFetchRegion(display, region, &count) else { return [] }
        defer { XFree(rects) }
        return (0..<Int(count)).map { i in
            FrameRect(x: Int(rects[i].x), y: Int(rects[i].y), width: Int(rects[i].width), height: Int(rects[i].height))
                .mapped(from: windowSize, to: placement)
        }.filter { !$0.isEmpty }
    }

    // MARK: Capture

    public func capture(onlyIfChanged: Bool) -> CaptureOutcome {
        drainEvents()
        let now = clock.now()
        switch lifecycle.show(now: now) {
        case .end(let sentence):
            return .sourceEnded(sentence)
        case .slate:
            return slate(onlyIfChanged: onlyIfChanged, now: now)
        case .window:
            if needsRename && !renamePixmap() {
                // Unmapped (or gone) before its events arrived: the next events say which.
                XSync(display, 0)
                drainEvents()
                if case .window = lifecycle.show(now: now) { _ = lifecycleEvent(.unmapped, now: now) }
                return slate(onlyIfChanged: false, now: now)
            }
            pendingDamage += takeDamage()
            if onlyIfChanged && pendingDamage.isEmpty && !wholeFrame { return .timeout }
            guard let lease = ring.beginWrite(waitingUpTo: XShmSource.slotWait) else { return .timeout }
            let slot = lease.slot
            lastXError.store(0, ordering: .relaxed)
            let target = staging ?? slot
            let ok = XShmGetImage(display, pixmap, target.image, 0, 0, castd_x11_all_planes()) != 0
            if !ok || lastXError.load(ordering: .relaxed) != 0 {
                ring.cancel(lease)
                // BadDrawable/BadWindow: the window went away; its DestroyNotify follows. Otherwise
                // (a resize raced the read) the pixmap is named again for the next frame.
                XSync(display, 0)
                drainEvents()
                needsRename = true
                return .timeout
            }
            if let staging {
                placer.place(staging.bytes, stride: Int(staging.image.pointee.bytes_per_line), size: windowSize,
                             into: slot.bytes, stride: stride, frame: size, at: placement, slot: lease.index)
            } else {
                placer.note(slot: lease.index, holds: placement)
            }
            let frame = Frame(format: format, size: size, stride: stride, captureTime: now,
                              damage: wholeFrame ? nil : pendingDamage)
            wholeFrame = false
            pendingDamage = []
            ring.publish(lease, frame: frame)
            return .frame(frame)
        }
    }

    /// The grey slate (window unmapped or closed): written whole when it starts, then again
    /// only when asked for a frame regardless of change (a refresh or a keyframe).
    private func slate(onlyIfChanged: Bool, now: Instant) -> CaptureOutcome {
        if onlyIfChanged && !wholeFrame { return .timeout }
        guard let lease = ring.beginWrite(waitingUpTo: XShmSource.slotWait) else { return .timeout }
        memset(lease.slot.bytes, Int32(SharedWindowLifecycle.slateGrey), lease.slot.capacity)
        placer.note(slot: lease.index, holds: FrameRect(x: 0, y: 0, width: 0, height: 0))
        let frame = Frame(format: format, size: size, stride: stride, captureTime: now, damage: nil)
        wholeFrame = false
        pendingDamage = []
        ring.publish(lease, frame: frame)
        return .frame(frame)
    }
}
