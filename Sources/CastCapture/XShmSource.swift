import CastCore
import CastMedia
import CastSystem
import CX11
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension CastError.Code {
    /// The display cannot be captured (no server, no MIT-SHM, unknown output, unsupported visual).
    public static let capture = Self("capture")
    /// `--window` matches no window (or more than one), or the window is gone (issue 31).
    public static let noSuchWindow = Self("no_such_window")
}

/// The last X protocol error, recorded by castd's error handler instead of
/// Xlib's default (which exits the process).
let lastXError = Atomic<Int32>(0)

/// Process-wide (Xlib has one handler): castd is the only X client in its
/// process, and recording beats Xlib's default of exiting on BadMatch or BadWindow.
func recordXErrors() {
    _ = XSetErrorHandler { _, event in
        lastXError.store(Int32(event?.pointee.error_code ?? 1), ordering: .relaxed)
        return 0
    }
}

/// Screen capture from an X server through MIT-SHM: the root window or one
/// RandR output, into shared-memory segments that are the ring's slots, with
/// the cursor drawn from XFixes and XDamage telling whether anything changed.
/// Owns its Display connection, its segments, its damage object and region;
/// frees them in `deinit`. One thread uses it.
public final class XShmSource: FrameSource {
    public struct Options: Sendable {
        /// `$DISPLAY` when nil.
        public var display: String?
        /// A RandR output name (`--output NAME`); the whole root window when nil.
        public var output: String?
        /// Draw the cursor into frames (`--no-cursor` turns it off).
        public var cursor: Bool
        /// One segment (issue 19): the encoder lets go of it once it has converted the
        /// pixels, and capture waits that long rather than writing a second 7.9 MiB
        /// segment at 1080p (`FrameRing.beginWrite(waitingUpTo:)`).
        public var slotCount: Int

        public init(display: String? = nil, output: String? = nil, cursor: Bool = true,
                    slotCount: Int = 1) {
            self.display = display
            self.output = output
            self.cursor = cursor
            self.slotCount = slotCount
        }
    }

    /// One XShm image and its segment: a ring slot.
    public final class ShmSlot: FrameSlot {
        let image: UnsafeMutablePointer<XImage>
        let info: UnsafeMutablePointer<XShmSegmentInfo>
        public let bytes: UnsafeMutableRawPointer
        public let capacity: Int

        init(image: UnsafeMutablePointer<XImage>, info: UnsafeMutablePointer<XShmSegmentInfo>) {
            self.image = image
            self.info = info
            bytes = UnsafeMutableRawPointer(image.pointee.data)
            capacity = Int(image.pointee.bytes_per_line) * Int(image.pointee.height)
        }
    }

    public let ring: FrameRing<ShmSlot>
    /// How long a capture waits for the encoder to finish reading the slot: longer than
    /// a 1080p conversion takes even on a loaded 2-core machine (p95 up to 38 ms seen),
    /// short enough that a stop is still seen within the capture loop's 50 ms.
    static let slotWait = Duration.milliseconds(40)
    public let format: PixelFormat
    /// The captured area in root coordinates.
    public let area: FrameRect
    public var size: FrameSize { FrameSize(width: area.width, height: area.height) }
    public let stride: Int
    public let options: Options

    private let display: OpaquePointer
    private let root: Window
    private let damage: Damage
    private let region: XserverRegion
    private let rrEventBase: Int32
    private let damageEventBase: Int32
    private let clock: any MonotonicClock
    private var lastCursor: (x: Int, y: Int, serial: UInt) = (-1, -1, 0)
    private var lastCursorRect: FrameRect?
    private var firstCapture = true
    private var pendingReinit: FrameSize?
    private var pendingDamage: [FrameRect] = []

    public init(options: Options = Options(), clock: any MonotonicClock = SystemMonotonicClock()) throws {
        self.options = options
        self.clock = clock
        guard let dpy = XOpenDisplay(options.display) else {
            throw CastError(.capture, "X11: cannot open display \(options.display ?? "$DISPLAY"); is an X server running and DISPLAY set?")
        }
        var ok = false
        defer { if !ok { XCloseDisplay(dpy) } }
        recordXErrors()
        guard XShmQueryExtension(dpy) != 0 else {
            throw CastError(.capture, "X11: the server has no MIT-SHM extension; XShm capture is impossible (is it a remote display?)")
        }
        var damageBase: Int32 = 0, eb: Int32 = 0, erb: Int32 = 0
        guard XDamageQueryExtension(dpy, &damageBase, &erb) != 0, XFixesQueryExtension(dpy, &eb, &erb) != 0 else {
            throw CastError(.capture, "X11: the server lacks the DAMAGE or XFIXES extension")
        }
        damageEventBase = damageBase
        var rrBase: Int32 = 0
        _ = XRRQueryExtension(dpy, &rrBase, &erb)
        rrEventBase = rrBase
        let screen = castd_x11_default_screen(dpy)
        let root = castd_x11_root_window(dpy, screen)
        let rootSize = FrameSize(width: Int(XDisplayWidth(dpy, screen)), height: Int(XDisplayHeight(dpy, screen)))
        var area = FrameRect(x: 0, y: 0, width: rootSize.width, height: rootSize.height)
        if let name = options.output {
            area = try Self.outputArea(dpy, root: root, name: name)
        }
        // 4:2:0 encoding wants even sides; the odd last row/column is not captured.
        area.width &= ~1
        area.height &= ~1
        guard area.width > 0, area.height > 0 else { throw CastError(.capture, "X11: capture area \(area) is empty") }

        let visual = castd_x11_default_visual(dpy, screen)!
        let depth = castd_x11_default_depth(dpy, screen)
        let red = visual.pointee.red_mask, blue = visual.pointee.blue_mask
        let fmt: PixelFormat
        switch (red, blue) {
        case (0xff0000, 0xff): fmt = .bgrx
        case (0xff, 0xff0000): fmt = .rgbx
        default:
            throw CastError(.capture, "X11: unsupported visual (depth \(depth), red mask \(String(red, radix: 16))); castd captures 24/32-bit TrueColor")
        }

        var slots: [ShmSlot] = []
        do {
            for _ in 0..<max(1, options.slotCount) {
                slots.append(try Self.makeSlot(dpy, visual: visual, depth: depth, size: area))
            }
        } catch {
            for s in slots { Self.free(s, dpy) }
            throw error
        }
        guard slots[0].image.pointee.bits_per_pixel == 32 else {
            for s in slots { Self.free(s, dpy) }
            throw CastError(.capture, "X11: images have \(slots[0].image.pointee.bits_per_pixel) bits per pixel; castd needs 32")
        }

        damage = XDamageCreate(dpy, root, Int32(XDamageReportNonEmpty))
        region = XFixesCreateRegion(dpy, nil, 0)
        XRRSelectInput(dpy, root, Int32(RRScreenChangeNotifyMask))
        XSelectInput(dpy, root, StructureNotifyMask)
        XSync(dpy, 0)

        display = dpy
        self.root = root
        self.area = area
        format = fmt
        stride = Int(slots[0].image.pointee.bytes_per_line)
        ring = FrameRing(slots: slots)
        ok = true
    }

    deinit {
        XDamageDestroy(display, damage)
        XFixesDestroyRegion(display, region)
        for s in ring.slots { Self.free(s, display) }
        XCloseDisplay(display)
    }

    static func makeSlot(_ dpy: OpaquePointer, visual: UnsafeMutablePointer<Visual>, depth: Int32, size: FrameRect) throws -> ShmSlot {
        let info = UnsafeMutablePointer<XShmSegmentInfo>.allocate(capacity: 1)
        info.initialize(to: XShmSegmentInfo())
        guard let image = XShmCreateImage(dpy, visual, UInt32(depth), ZPixmap, nil, info, UInt32(size.width), UInt32(size.height)) else {
            info.deallocate()
            throw CastError(.capture, "X11: XShmCreateImage failed for \(size.width)x\(size.height)")
        }
        let bytes = Int(image.pointee.bytes_per_line) * Int(image.pointee.height)
        let id = shmget(IPC_PRIVATE, bytes, IPC_CREAT | 0o600)
        guard id >= 0 else {
            _ = castd_x11_destroy_image(image)
            info.deallocate()
            throw CastError.posix(.capture) { "X11: shmget of \(bytes) bytes failed (\($0)); check kernel.shmmax" }
        }
        let addr = shmat(id, nil, 0)
        if addr == UnsafeMutableRawPointer(bitPattern: -1) {
            shmctl(id, IPC_RMID, nil)
            _ = castd_x11_destroy_image(image)
            info.deallocate()
            throw CastError.posix(.capture) { "X11: shmat failed (\($0))" }
        }
        info.pointee.shmid = id
        info.pointee.shmaddr = addr?.assumingMemoryBound(to: CChar.self)
        info.pointee.readOnly = 0
        image.pointee.data = info.pointee.shmaddr
        lastXError.store(0, ordering: .relaxed)
        let attached = XShmAttach(dpy, info) != 0
        XSync(dpy, 0)
        // Marked for removal now: the kernel frees it once both sides detach, even after a crash.
        shmctl(id, IPC_RMID, nil)
        guard attached, lastXError.load(ordering: .relaxed) == 0 else {
            shmdt(addr)
            _ = castd_x11_destroy_image(image)
            info.deallocate()
            throw CastError(.capture, "X11: XShmAttach failed; the X server cannot share memory with castd (another host or container?)")
        }
        return ShmSlot(image: image, info: info)
    }

    static func free(_ s: ShmSlot, _ dpy: OpaquePointer) {
        XShmDetach(dpy, s.info)
        XSync(dpy, 0)
        _ = castd_x11_destroy_image(s.image)
        shmdt(s.info.pointee.shmaddr)
        s.info.deallocate()
    }

    /// The rectangle of a connected RandR output with a CRTC.
    static func outputArea(_ dpy: OpaquePointer, root: Window, name: String) throws -> FrameRect {
        guard let res = XRRGetScreenResourcesCurrent(dpy, root) else {
            throw CastError(.capture, "X11: RandR screen resources unavailable; cannot select output \(name)")
        }
        defer { XRRFreeScreenResources(res) }
        var names: [String] = []
        for i in 0..<Int(res.pointee.noutput) {
            guard let info = XRRGetOutputInfo(dpy, res, res.pointee.outputs[i]) else { continue }
            defer { XRRFreeOutputInfo(info) }
            let outName = String(cString: info.pointee.name)
            names.append(outName)
            guard outName == name else { continue }
            guard info.pointee.crtc != 0, let crtc = XRRGetCrtcInfo(dpy, res, info.pointee.crtc) else {
                throw CastError(.capture, "X11: output \(name) is not active (no CRTC)")
            }
            defer { XRRFreeCrtcInfo(crtc) }
            return FrameRect(x: Int(crtc.pointee.x), y: Int(crtc.pointee.y),
                             width: Int(crtc.pointee.width), height: Int(crtc.pointee.height))
        }
        throw CastError(.capture, "X11: no output named \(name); outputs are: \(names.joined(separator: ", "))")
    }

    /// Reads pending events: a root size change (ConfigureNotify, RandR) means reinit.
    /// True when XDamage reported a change (`XDamageReportNonEmpty`: one event each time
    /// the damage region stops being empty, that is once after each `takeDamage`).
    @discardableResult
    private func drainEvents() -> Bool {
        var ev = XEvent()
        var damaged = false
        while XPending(display) > 0 {
            XNextEvent(display, &ev)
            if ev.type == damageEventBase + XDamageNotify { damaged = true }
            if ev.type == rrEventBase + RRScreenChangeNotify { XRRUpdateConfiguration(&ev) }
            if ev.type == ConfigureNotify || ev.type == rrEventBase + RRScreenChangeNotify {
                let newSize = currentSize()
                if newSize != size { pendingReinit = newSize }
            }
        }
        return damaged
    }

    /// The cursor is drawn from XFixes and moves without damage: it needs looking at.
    public var changesNeedProbing: Bool { options.cursor }

    /// Each damage event is answered by taking the damage (kept for the next frame), which
    /// re-arms `XDamageReportNonEmpty`: the next drawing raises the next event.
    public var notifiesEachChange: Bool { true }

    /// Waits on the X connection for a damage event in the captured area (or a size change), at
    /// most until `deadline`. The damage is taken at once, so that the next change raises an
    /// event of its own (issue 19's phase lock hears every change, not only the first after a
    /// frame); the round trip also means the drawing that raised the event is done.
    public func waitForChange(until deadline: Instant) -> Bool {
        var fds = pollfd(fd: castd_x11_connection_number(display), events: Int16(POLLIN), revents: 0)
        while true {
            let damaged = drainEvents()
            if pendingReinit != nil { return true }
            if damaged {
                let rects = takeDamage()
                pendingDamage += rects
                if !rects.isEmpty { return true }
            }
            let left = (deadline - clock.now()).totalNanoseconds
            guard left > 0 else { return false }
            // Rounded up to whole milliseconds: a wait that ends just short of the deadline would spin.
            let ms = Int32(min(left / 1_000_000 + 1, 1_000))
            // EINTR or an error: look again (drainEvents reads whatever is there; the deadline bounds the loop).
            if poll(&fds, 1, ms) < 0 { continue }
        }
    }

    /// The size this source would capture now (root or output).
    private func currentSize() -> FrameSize {
        if let name = options.output, let a = try? Self.outputArea(display, root: root, name: name) {
            return FrameSize(width: a.width & ~1, height: a.height & ~1)
        }
        var attrs = XWindowAttributes()
        XGetWindowAttributes(display, root, &attrs)
        return FrameSize(width: Int(attrs.width) & ~1, height: Int(attrs.height) & ~1)
    }

    /// What XDamage accumulated since the last call, clipped to the area, in frame coordinates.
    private func takeDamage() -> [FrameRect] {
        XDamageSubtract(display, damage, 0, region)
        var count: Int32 = 0
        guard let rects = XFixesFetchRegion(display, region, &count) else { return [] }
        defer { XFree(rects) }
        var out: [FrameRect] = []
        for i in 0..<Int(count) {
            let r = rects[i]
            let x0 = max(Int(r.x), area.x), y0 = max(Int(r.y), area.y)
            let x1 = min(Int(r.x) + Int(r.width), area.x + area.width)
            let y1 = min(Int(r.y) + Int(r.height), area.y + area.height)
            if x0 < x1 && y0 < y1 { out.append(FrameRect(x: x0 - area.x, y: y0 - area.y, width: x1 - x0, height: y1 - y0)) }
        }
        return out
    }

    /// The cursor as an overlay in frame coordinates, or nil when it is off-area or unavailable.
    private func cursorOverlay() -> (CursorOverlay, serial: UInt)? {
        guard let img = XFixesGetCursorImage(display) else { return nil }
        defer { XFree(img) }
        let c = img.pointee
        let w = Int(c.width), h = Int(c.height)
        // XFixes hands ARGB in `unsigned long`s (64-bit here); the low 32 bits hold it.
        let pixels = (0..<(w * h)).map { UInt32(truncatingIfNeeded: c.pixels[$0]) }
        let overlay = CursorOverlay(x: Int(c.x) - Int(c.xhot) - area.x, y: Int(c.y) - Int(c.yhot) - area.y,
                                    width: w, height: h, pixels: pixels)
        return (overlay, UInt(c.cursor_serial))
    }

    public func capture(onlyIfChanged: Bool) -> CaptureOutcome {
        drainEvents()
        if let s = pendingReinit { return .reinit(size: s) }
        // Damage read but not yet delivered in a published frame (a dropped
        // frame's changes must reach the next one).
        pendingDamage += takeDamage()
        var damage = pendingDamage
        var overlay: CursorOverlay? = nil
        if options.cursor, let (o, serial) = cursorOverlay() {
            overlay = o
            // The cursor is a sprite: XDamage does not see it move or change shape.
            if (o.x, o.y, serial) != (lastCursor.x, lastCursor.y, lastCursor.serial) {
                if let old = lastCursorRect { pendingDamage.append(old) }
                pendingDamage.append(o.bounds)
                damage = pendingDamage
                lastCursor = (o.x, o.y, serial)
                lastCursorRect = o.bounds
            }
        }
        let nothingChanged = damage.isEmpty && !firstCapture
        if onlyIfChanged && nothingChanged { return .timeout }
        guard let lease = ring.beginWrite(waitingUpTo: Self.slotWait) else { return .timeout }
        lastXError.store(0, ordering: .relaxed)
        let ok = XShmGetImage(display, root, lease.slot.image, Int32(area.x), Int32(area.y), castd_x11_all_planes()) != 0
        let now = clock.now()
        if !ok || lastXError.load(ordering: .relaxed) != 0 {
            ring.cancel(lease)
            // A failed read after a size change is the reinit case; otherwise it is an error.
            let s = currentSize()
            if s != size { return .reinit(size: s) }
            return .error(CastError(.capture, "X11: XShmGetImage failed (X error \(lastXError.load(ordering: .relaxed)))"))
        }
        if let overlay { overlay.draw(onto: lease.slot.bytes, format: format, size: size, stride: stride) }
        let frame = Frame(format: format, size: size, stride: stride, captureTime: now,
                          damage: firstCapture ? nil : damage)
        firstCapture = false
        pendingDamage = []
        ring.publish(lease, frame: frame)
        return .frame(frame)
    }
}
