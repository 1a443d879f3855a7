import CastCore
import CastMedia
import CastSystem
import CPipeWire
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Screen capture from a PipeWire video node (a ScreenCast portal's or
/// Mutter's stream, or any Video/Source): a `pw_stream` input offering raw
/// BGRx/RGBx/BGRA/RGBA, first as DMA-BUF with the linear modifier (mapped and
/// read by the CPU, `PipeWireBufferPlan`), then in shared memory (MemPtr or
/// MemFd buffers) as the fallback. PipeWire pushes: the stream's
/// process callback (on the PipeWire thread) copies the newest buffer into a
/// free ring slot, or drops it, counted by the ring, when none is free;
/// `capture` reports what arrived. A size or format change is `.reinit`
/// (close this source, open a new one). Damage comes from
/// `SPA_META_VideoDamage`; the cursor from `SPA_META_Cursor` is drawn into
/// frames when `cursor` is on.
///
/// A window's stream (`Options.window`, issue 31) is cropped to the window
/// (`SPA_META_VideoCrop`) and drawn into a steady frame (`WindowCrop`); when
/// the stream ends, the window was closed: a grey slate for `closedHold`, then
/// `.sourceEnded` (`SharedWindowLifecycle`), as with an X11 window.
public final class PipeWireSource: FrameSource {
    /// A window's stream (issue 31): what castd needs to crop it and end with it.
    public struct WindowStream: Sendable {
        /// The frame is the first crop's size within these caps.
        public var caps: CaptureCaps
        /// The frame an earlier source of the same cast chose (the stream was opened again).
        public var frame: FrameSize?
        /// How long the slate shows after the window closed (`SharedWindowLifecycle.closedHold`).
        public var closedHold: Duration
        /// How the log names the window ("portal stream 42").
        public var name: String

        public init(caps: CaptureCaps, frame: FrameSize? = nil, closedHold: Duration = SharedWindowLifecycle.closedHold,
                    name: String) {
            self.caps = caps
            self.frame = frame
            self.closedHold = closedHold
            self.name = name
        }
    }

    public struct Options: Sendable {
        public var remote: PipeWireRemote
        /// The node to capture (the portal's stream node); nil lets the session manager pick a video source.
        public var node: UInt32?
        /// Draw the cursor metadata into frames.
        public var cursor: Bool
        public var slotCount: Int
        /// How long `init` waits for the producer to agree on a format.
        public var negotiationTimeout: Duration
        /// How long `capture` waits for a frame before `.timeout`.
        public var frameWait: Duration
        /// The largest frame castd asks for (the caps scale it down afterwards).
        public var maxSize: FrameSize
        /// Events of the stream (the buffers PipeWire settled on), called on the PipeWire thread.
        public var log: @Sendable (LogLine) -> Void
        /// Offer DMA-BUF (linear) before shared memory; false: shared memory only (config `dmabuf`).
        public var dmabuf: Bool
        /// A window's stream: crop, steady frame, the end of the stream is the window closing; nil: a monitor's.
        public var window: WindowStream?

        public init(remote: PipeWireRemote = .daemon, node: UInt32? = nil, cursor: Bool = true,
                    slotCount: Int = FrameRing<MemorySlot>.defaultSlotCount,
                    negotiationTimeout: Duration = .seconds(5), frameWait: Duration = .milliseconds(50),
                    maxSize: FrameSize = FrameSize(width: 8192, height: 8192),
                    log: @escaping @Sendable (LogLine) -> Void = { _ in }, dmabuf: Bool = true,
                    window: WindowStream? = nil) {
            self.remote = remote
            self.node = node
            self.cursor = cursor
            self.slotCount = slotCount
            self.negotiationTimeout = negotiationTimeout
            self.frameWait = frameWait
            self.maxSize = maxSize
            self.log = log
            self.dmabuf = dmabuf
            self.window = window
        }
    }

    public let ring: FrameRing<MemorySlot>
    public let format: PixelFormat
    /// The frames' size: the stream's, or for a window the steady frame.
    public let size: FrameSize
    public var stride: Int { size.width * 4 }
    public let options: Options
    /// A window's: what the cast shows (the window, or the slate once it closed); nil for a monitor.
    public private(set) var lifecycle: SharedWindowLifecycle?
    /// Buffers the source could not use (corrupted, unmapped or too small for the format), for logs and tests.
    public var unusableBuffers: UInt64 { stream.shared.withLock { $0.unusable } }
    /// The buffers PipeWire settled on, as logged ("buffers=dmabuf modifier=linear", "buffers=memfd"); nil before any.
    public var buffers: String? { stream.shared.withLock { $0.buffers } }

    private let stream: PipeWireInputStream
    /// Durations of the PipeWire process callback for published frames (benchmarks).
    var processNanos: [Int64] { stream.shared.withLock { $0.processNanos } }

    public init(options: Options = Options(), clock: any MonotonicClock = SystemMonotonicClock()) throws {
        self.options = options
        let stream = try PipeWireInputStream(options: options, clock: clock)
        let negotiated: (format: PixelFormat, size: FrameSize)
        do { negotiated = try stream.waitForFormat(timeout: options.negotiationTimeout) } catch {
            // Closed here, on the owner's thread: a callback running on the PipeWire
            // thread holds a reference, and the last release must not happen there.
            stream.close()
            throw error
        }
        // A window's frame is no larger than the stream, unless an earlier source chose it.
        let largest = max(negotiated.size.pixelCount, options.window?.frame?.pixelCount ?? 0)
        let slots = (0..<max(1, options.slotCount)).map { _ in MemorySlot(capacity: largest * 4) }
        ring = FrameRing(slots: slots)
        format = negotiated.format
        self.stream = stream
        stream.attach(ring: ring)
        if let window = options.window {
            // The frame is chosen with the first buffer (its crop); a producer slow to send one gets
            // the stream's size within the caps.
            size = stream.waitForWindowFrame(timeout: min(options.negotiationTimeout, .seconds(2)), window: window,
                                             stream: negotiated.size)
            lifecycle = SharedWindowLifecycle(title: "", mapped: true, closedHold: window.closedHold)
        } else {
            size = negotiated.size
        }
    }

    deinit { stream.close() }

    /// Makes a waiting or later `capture` return `.interrupted` (any thread).
    public func interrupt() { stream.interrupt() }

    /// The newest frame the stream delivered since the last call, waiting up to
    /// `frameWait` for one. PipeWire sends frames only when the screen changes
    /// (Mutter sends nothing while it is static); without `onlyIfChanged`, an
    /// unchanged screen gives its last frame again, with empty damage, so the
    /// receiver still gets a refresh frame (`.timeout` when the encoder holds that slot).
    public func capture(onlyIfChanged: Bool) -> CaptureOutcome {
        if lifecycle != nil { return captureWindow(onlyIfChanged: onlyIfChanged) }
        return captureStream(onlyIfChanged: onlyIfChanged)
    }

    private func captureStream(onlyIfChanged: Bool) -> CaptureOutcome {
        if let outcome = stream.takeOutcome() { return outcome }
        let deadline = SystemMonotonicClock().now() + options.frameWait
        while stream.signal.wait(until: deadline) == .success {
            if let outcome = stream.takeOutcome() { return outcome }
        }
        if let outcome = stream.takeOutcome() { return outcome }
        if !onlyIfChanged, let frame = stream.republishLast() { return .frame(frame) }
        return .timeout
    }

    /// A window's stream: its end is the window closing (the portal's stream of a window ends with
    /// it), shown as the slate for `closedHold`, then `.sourceEnded`; other outcomes as a monitor's.
    private func captureWindow(onlyIfChanged: Bool) -> CaptureOutcome {
        if case .shown = lifecycle?.state {
            let outcome = captureStream(onlyIfChanged: onlyIfChanged)
            guard case .error = outcome, stream.ended else { return outcome }
            lifecycle?.handle(.destroyed, now: clock.now())
            slateDrawn = false
            options.log(LogLine(.notice, "shared_window_closed", [("window", options.window?.name ?? "window"),
                                                                  ("shows", "slate"), ("then", "the cast ends")]))
        }
        let now = clock.now()
        switch lifecycle?.show(now: now) ?? .window {
        case .window: return captureStream(onlyIfChanged: onlyIfChanged)
        case .end(let sentence): return .sourceEnded(sentence)
        case .slate:
            if stream.interruptedNow { return .interrupted }
            if onlyIfChanged && slateDrawn { return .timeout }
            guard let lease = ring.beginWrite() else { return .timeout }
            memset(lease.slot.bytes, Int32(SharedWindowLifecycle.slateGrey), stride * size.height)
            let frame = Frame(format: format, size: size, stride: stride, captureTime: now, damage: nil)
            ring.publish(lease, frame: frame)
            slateDrawn = true
            return .frame(frame)
        }
    }

    /// The slate is in the ring (it is drawn whole once, then only for refreshes).
    private var slateDrawn = false
    private var clock: any MonotonicClock { stream.clock }

    /// Waits for the stream to deliver a frame (PipeWire sends one per change) or to end. A
    /// closed window's slate waits for its hold to end.
    public func waitForChange(until deadline: Instant) -> Bool {
        if case .closed(let at)? = lifecycle?.state, let hold = lifecycle?.hold {
            let end = at + hold
            let until = min(deadline, end)
            let left = until - clock.now()
            if left > .zero { _ = stream.signal.wait(until: until, clock: clock) }
            return clock.now() >= end || stream.interruptedNow
        }
        return stream.waitForOutcome(until: deadline)
    }

    /// Every change arrives as a buffer (the cursor as metadata with it): nothing to look for.
    public var changesNeedProbing: Bool { false }

    /// A delivered buffer stays "a change" until `capture` takes it.
    public var notifiesEachChange: Bool { false }
}

extension Duration {
    var nanoseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}

/// The state the PipeWire thread and the capture thread share.
struct PipeWireShared {
    var negotiated: (format: PixelFormat, spa: UInt32, size: FrameSize)? = nil
    var streamState = "connecting"
    /// The producer's side cleared the format (its node or the link went away).
    var unlinked = false
    var failure: String? = nil
    var reinit: FrameSize? = nil
    var interrupted = false
    /// A window's steady frame, chosen once (by the first buffer, or by `waitForWindowFrame`).
    var windowFrame: FrameSize? = nil
    /// The newest frame published since `capture` last returned one.
    var latest: Frame? = nil
    /// The last frame published and its ring slot (for refresh frames).
    var lastPublished: (index: Int, frame: Frame)? = nil
    var unusable: UInt64 = 0
    /// The buffers last added, as logged.
    var buffers: String? = nil
    /// How long the process callback took for each published frame (the copy; the last 4096), for the benchmark.
    var processNanos: [Int64] = []
}

/// The `pw_stream` half of `PipeWireSource`: owns the connection and the
/// stream; its callbacks run on the PipeWire thread.
final class PipeWireInputStream: @unchecked Sendable {
    // @unchecked: `shared` is locked; `ring` is written once before frames
    // flow and read on the PipeWire thread; `assembler` belongs to the PipeWire thread.
    let shared = Mutex(PipeWireShared())
    let signal = DispatchSemaphore(value: 0)
    private let options: PipeWireSource.Options
    let clock: any MonotonicClock
    private var connection: PipeWireConnection! = nil
    private var pw = PipeWireStream()
    private var stream: OpaquePointer? { pw.pointer }
    /// The registry, watched for the target node's removal (the end of a cast).
    private var registry = PipeWireRegistry()
    private var ring: FrameRing<MemorySlot>? = nil
    private var assembler = PipeWireFrameAssembler()
    /// How the negotiated format's buffers are read (PipeWire thread).
    private var plan = PipeWireBufferPlan(memory: .shared)
    /// castd's own read-only mappings of DMA-BUF buffers, by `pw_buffer` (PipeWire thread).
    private var dmabufs: [UnsafeMutableRawPointer: DmaBufMapping] = [:]
    /// Sentences already logged (once each per stream).
    private var said: Set<String> = []
    /// Why the last DMA-BUF could not be mapped (PipeWire thread).
    private var mapFailure: String? = nil
    /// castd asked for shared memory only after a DMA-BUF it could not map (PipeWire thread).
    private var sharedOnly = false
    private let damageScratch = UnsafeMutablePointer<Int32>.allocate(capacity: 4 * PipeWireFrameAssembler.maxDamageRects)
    private let cropScratch = UnsafeMutablePointer<Int32>.allocate(capacity: 4)
    /// A window's crop and placement (PipeWire thread), once the frame is chosen.
    private var fit: WindowCrop? = nil
    /// Draws the window's crop into its placement in each ring slot (PipeWire thread).
    private var placer = WindowPlacer()

    init(options: PipeWireSource.Options, clock: any MonotonicClock) throws {
        sharedOnly = !options.dmabuf
        self.options = options
        self.clock = clock
        assembler.cursorEnabled = options.cursor
        connection = try PipeWireConnection(remote: options.remote) { [weak self] message in self?.fail(message) }
        try connection.withLock { try connect() }
    }

    private func connect() throws {
        let created = pw.create(core: connection.core, name: "castd-capture",
                                properties: "media.type=Video media.category=Capture media.role=Screen node.name=castd-capture app.name=castd",
                                userData: Unmanaged.passUnretained(self).toOpaque()) { events in
            events.state_changed = { data, _, new, error in
                Unmanaged<PipeWireInputStream>.fromOpaque(data!).takeUnretainedValue()
                    .stateChanged(new, error: error.map { String(cString: $0) })
            }
            events.param_changed = { data, id, param in
                Unmanaged<PipeWireInputStream>.fromOpaque(data!).takeUnretainedValue().paramChanged(id, param)
            }
            events.process = { data in
                Unmanaged<PipeWireInputStream>.fromOpaque(data!).takeUnretainedValue().process()
            }
            events.add_buffer = { data, b in
                Unmanaged<PipeWireInputStream>.fromOpaque(data!).takeUnretainedValue().addBuffer(b!)
            }
            events.remove_buffer = { data, b in
                Unmanaged<PipeWireInputStream>.fromOpaque(data!).takeUnretainedValue().removeBuffer(b!)
            }
        }
        guard created != nil else {
            throw CastError.posix(.capture) { "PipeWire: cannot create a stream (\($0))" }
        }
        if options.node != nil {
            registry.listen(core: connection.core, userData: Unmanaged.passUnretained(self).toOpaque()) { events in
                events.global_remove = { data, id in
                    let me = Unmanaged<PipeWireInputStream>.fromOpaque(data!).takeUnretainedValue()
                    if id == me.options.node { me.fail(PipeWireInputStream.endedMessage) }
                }
            }
        }

        // PipeWire's DMA-BUF negotiation: the formats with the modifier property first (the
        // producer picks DMA-BUF when it can), the same without it after (shared memory).
        var params = PodList()
        defer { params.free() }
        addFormats(&params)
        let flags = pw_stream_flags(PW_STREAM_FLAG_AUTOCONNECT.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue)
        let r = pw.connect(SPA_DIRECTION_INPUT, target: options.node ?? UInt32.max, flags: flags, params: params)
        guard r >= 0 else {
            throw CastError.posix(.capture, errno: -r) { "PipeWire: cannot connect the capture stream to node \(options.node.map(String.init) ?? "any") (\($0))" }
        }
    }

    /// The EnumFormat params: DMA-BUF (linear) first unless castd fell back from it, then shared memory.
    private func addFormats(_ params: inout PodList) {
        let formats = PipeWireFormats.accepted.map(\.spa)
        let max = options.maxSize
        for modifiers in sharedOnly ? [[]] : [PipeWireBufferPlan.announcedModifiers, []] {
            params.add { buf, n in
                formats.withUnsafeBufferPointer { f in
                    modifiers.withUnsafeBufferPointer { m in
                        castd_pw_video_format(buf, n, SPA_PARAM_EnumFormat.rawValue, f.baseAddress, UInt32(f.count),
                                              1920, 1080, 1, 1, UInt32(max.width), UInt32(max.height), 30, 0, 1000,
                                              m.baseAddress, UInt32(m.count), PipeWireBufferPlan.modifierFlags)
                    }
                }
            }
        }
    }

    /// Blocks until the producer and castd agree on a format, or fails with a sentence.
    func waitForFormat(timeout: Duration) throws -> (format: PixelFormat, size: FrameSize) {
        let deadline = SystemMonotonicClock().now() + timeout
        while true {
            let s = shared.withLock { $0 }
            if let f = s.failure { throw CastError(.capture, f) }
            if let n = s.negotiated { return (n.format, n.size) }
            if signal.wait(until: deadline) == .timedOut {
                let s = shared.withLock { $0 }
                if let f = s.failure { throw CastError(.capture, f) }
                if let n = s.negotiated { return (n.format, n.size) }
                let node = options.node.map { "node \($0)" } ?? "a video source"
                throw CastError(.capture, "PipeWire: \(node) offered no frame format castd reads within \(timeout) (stream \(s.streamState)): castd reads BGRx, RGBx, BGRA or RGBA in shared memory or linear DMA-BUF, not tiled GPU buffers; is the node a screen stream, and does a session manager link it?")
            }
        }
    }

    func attach(ring: FrameRing<MemorySlot>) {
        connection.withLock { self.ring = ring }
    }

    /// The last frame again, from the slot it is still in (no copy), when that
    /// slot is free and nothing newer arrived; nil otherwise.
    func republishLast() -> Frame? {
        guard let ring else { return nil }
        let now = clock.now()
        return shared.withLock { s -> Frame? in
            guard s.latest == nil, s.reinit == nil, let last = s.lastPublished, let lease = ring.reclaim(last.index) else { return nil }
            var f = last.frame
            f.captureTime = now
            f.damage = []
            ring.publish(lease, frame: f)
            s.lastPublished = (lease.index, f)
            return f
        }
    }

    func interrupt() {
        shared.withLock { $0.interrupted = true }
        signal.signal()
    }

    /// Asked to stop (`interrupt`).
    var interruptedNow: Bool { shared.withLock { $0.interrupted } }

    /// The stream ended (its producer left, its node went away): for a window's, the window closed.
    var ended: Bool { shared.withLock { $0.failure == Self.endedMessage } }

    /// A window's steady frame: the one the first buffer chose, waiting up to `timeout` for it;
    /// then (a producer that sent nothing yet) the stream's size within the caps, or the frame
    /// an earlier source chose.
    func waitForWindowFrame(timeout: Duration, window: PipeWireSource.WindowStream, stream size: FrameSize) -> FrameSize {
        let deadline = SystemMonotonicClock().now() + timeout
        while true {
            let s = shared.withLock { ($0.windowFrame, $0.failure != nil || $0.reinit != nil) }
            if let f = s.0 { return f }
            if s.1 || signal.wait(until: deadline) == .timedOut { break }
        }
        let chosen = shared.withLock { s -> FrameSize in
            if s.windowFrame == nil { s.windowFrame = window.frame ?? window.caps.targetSize(for: size) }
            return s.windowFrame!
        }
        signal.signal()   // what the waits consumed is for `capture` too
        return chosen
    }

    /// Waits until `takeOutcome` has something, without taking it, at most until `deadline`.
    func waitForOutcome(until deadline: Instant) -> Bool {
        func pending() -> Bool {
            shared.withLock { s in s.interrupted || s.failure != nil || s.reinit != nil || s.latest != nil }
        }
        while !pending() {
            guard clock.now() < deadline else { return false }
            if signal.wait(until: deadline, clock: clock) == .timedOut { return pending() }
        }
        return true
    }

    /// What `capture` should return now, if anything.
    func takeOutcome() -> CaptureOutcome? {
        shared.withLock { s -> CaptureOutcome? in
            if s.interrupted { return .interrupted }
            if let f = s.failure { return .error(CastError(.capture, f)) }
            if let r = s.reinit { return .reinit(size: r) }
            if let f = s.latest {
                s.latest = nil
                return .frame(f)
            }
            return nil
        }
    }

    func close() {
        guard let connection else { return }
        connection.shutDown {
            pw.destroy()
            registry.destroy()
        }
        self.connection = nil
        pw.deallocate()
        registry.deallocate()
        damageScratch.deallocate()
        cropScratch.deallocate()
        // Buffers the stream did not remove before it was destroyed.
        for m in dmabufs.values { m.unmap() }
        dmabufs = [:]
    }

    deinit { close() }

    // MARK: - PipeWire thread

    private func fail(_ message: String) {
        shared.withLock { if $0.failure == nil { $0.failure = message } }
        signal.signal()
    }

    private func stateChanged(_ new: pw_stream_state, error: String?) {
        let name = String(cString: pw_stream_state_as_string(new))
        let (wasStreaming, unlinked) = shared.withLock { s -> (Bool, Bool) in
            let was = s.streamState == "streaming"
            s.streamState = name
            return (was, s.unlinked)
        }
        if new == PW_STREAM_STATE_PAUSED && unlinked {
            fail(Self.endedMessage)
        } else if new == PW_STREAM_STATE_ERROR {
            fail("PipeWire: the capture stream to \(options.node.map { "node \($0)" } ?? "a video source") failed: \(error ?? "no reason given")")
        } else if new == PW_STREAM_STATE_UNCONNECTED && wasStreaming {
            fail(Self.endedMessage)
        }
        signal.signal()
    }

    static let endedMessage = "PipeWire: the screen stream ended (its producer left or the cast was closed)"

    private func paramChanged(_ id: UInt32, _ param: UnsafePointer<spa_pod>?) {
        guard id == SPA_PARAM_Format.rawValue, let stream else { return }
        guard let param else {
            // No format any more: the link to the producer is gone. Paused as well means the stream ended.
            let paused = shared.withLock { s -> Bool in
                guard s.negotiated != nil else { return false }
                s.unlinked = true
                return s.streamState == "paused"
            }
            if paused { fail(Self.endedMessage) }
            return
        }
        shared.withLock { $0.unlinked = false }
        var spa: UInt32 = 0, w: UInt32 = 0, h: UInt32 = 0, modifier: UInt64 = 0
        let r = castd_pw_parse_video_format(param, &spa, &w, &h, &modifier)
        guard r == 0 else {
            fail("PipeWire: the producer chose a format that is not raw video (error \(r)); castd reads BGRx, RGBx, BGRA or RGBA")
            return
        }
        guard let format = PipeWireFormats.pixelFormat(spa: spa) else {
            fail("PipeWire: the producer chose \(PipeWireFormats.name(spa: spa)); castd reads BGRx, RGBx, BGRA or RGBA")
            return
        }
        guard w > 0, h > 0, Int(w) <= options.maxSize.width, Int(h) <= options.maxSize.height else {
            fail("PipeWire: the producer chose a frame size of \(w)x\(h), outside 1x1…\(options.maxSize)")
            return
        }
        var chosen: UInt64 = 0
        guard let plan = PipeWireBufferPlan(modifierState: castd_pw_format_modifier(param, &chosen), modifier: chosen) else {
            fail("PipeWire: the producer's format has a DMA-BUF modifier castd cannot read (not a 64-bit value)")
            return
        }
        if let refusal = plan.refusal {
            fail(refusal)
            return
        }
        self.plan = plan
        let size = FrameSize(width: Int(w), height: Int(h))
        shared.withLock { s in
            if let n = s.negotiated {
                if n.size != size || n.format != format { s.reinit = size }
            } else {
                s.negotiated = (format, spa, size)
            }
        }
        signal.signal()

        // Our side of the buffers: DMA-BUF when the format carries a modifier, else shared
        // memory; with damage and cursor metadata.
        var params = PodList()
        defer { params.free() }
        let types = plan.dataTypes
        params.add { castd_pw_buffers_param($0, $1, types, 0, 0) }
        params.add { castd_pw_meta_param($0, $1, SPA_META_Header.rawValue, castd_pw_meta_header_size(),
                                         castd_pw_meta_header_size(), castd_pw_meta_header_size()) }
        let region = castd_pw_meta_region_size()
        params.add { castd_pw_meta_param($0, $1, SPA_META_VideoDamage.rawValue,
                                         region * UInt32(PipeWireFrameAssembler.maxDamageRects), region,
                                         region * UInt32(PipeWireFrameAssembler.maxDamageRects)) }
        params.add { castd_pw_meta_param($0, $1, SPA_META_Cursor.rawValue, castd_pw_cursor_meta_size(64, 64),
                                         castd_pw_cursor_meta_size(1, 1), castd_pw_cursor_meta_size(256, 256)) }
        if options.window != nil {
            // Where the window is in the stream (Mutter's window stream is monitor-sized).
            params.add { castd_pw_meta_param($0, $1, SPA_META_VideoCrop.rawValue, region, region, region) }
        }
        _ = params.withPods { pw_stream_update_params(stream, $0, $1) }
    }

    private func process() {
        guard let stream else { return }
        let started = SystemMonotonicClock().now()
        var newest: UnsafeMutablePointer<pw_buffer>? = nil
        while let b = pw_stream_dequeue_buffer(stream) {
            if let old = newest { pw_stream_queue_buffer(stream, old) }
            newest = b
        }
        guard let b = newest else { return }
        defer { pw_stream_queue_buffer(stream, b) }
        let buf = b.pointee.buffer!
        if ring == nil, options.window != nil, let n = shared.withLock({ $0.reinit == nil ? $0.negotiated : nil }) {
            // Before the ring: the first buffer still chooses a window's frame.
            _ = windowFit(buf, stream: n.size)
        }
        guard let ring, let negotiated = shared.withLock({ $0.reinit == nil ? $0.negotiated : nil }) else { return }

        // Metadata first: the cursor and damage count even when the pixels are unusable or dropped.
        var cursor = castd_pw_cursor()
        var cursorUpdate: PipeWireFrameAssembler.CursorUpdate?
        if castd_pw_cursor(buf, &cursor) == 1 {
            var bitmap: CursorBitmap? = nil
            if cursor.bitmap_format != 0, let px = cursor.bitmap {
                bitmap = CursorBitmap(format: cursor.bitmap_format, width: Int(cursor.bitmap_width),
                                      height: Int(cursor.bitmap_height), stride: Int(cursor.bitmap_stride), bytes: px)
            }
            cursorUpdate = .init(x: Int(cursor.x), y: Int(cursor.y), hotX: Int(cursor.hot_x), hotY: Int(cursor.hot_y),
                                 bitmap: bitmap)
        } else {
            cursorUpdate = nil
        }
        let n = Int(castd_pw_damage(buf, damageScratch, Int32(PipeWireFrameAssembler.maxDamageRects)))
        var damage: [FrameRect]? = nil
        if n > 0 && n <= PipeWireFrameAssembler.maxDamageRects {
            damage = (0..<n).map { i in
                FrameRect(x: Int(damageScratch[4 * i]), y: Int(damageScratch[4 * i + 1]),
                          width: Int(damageScratch[4 * i + 2]), height: Int(damageScratch[4 * i + 3]))
            }
        }

        let size = negotiated.size
        let rowBytes = size.width * 4
        // A window: its crop, and the metadata in the frame's coordinates.
        var fit: WindowCrop? = nil
        var out = size
        if options.window != nil {
            let (f, moved) = windowFit(buf, stream: size)
            fit = f
            out = f.frame
            damage = moved ? nil : f.damage(damage)
            if let u = cursorUpdate {
                let p = f.point(x: u.x, y: u.y)
                cursorUpdate = .init(x: p.x, y: p.y, hotX: u.hotX, hotY: u.hotY, bitmap: u.bitmap)
            }
        }
        let headerFlags = castd_pw_header_flags(buf)
        guard buf.pointee.n_datas >= 1 else { return unusable() }
        let d = buf.pointee.datas[0]
        let chunk = d.chunk.pointee
        // Where the pixels are: PipeWire's mapping of shared memory, or castd's of a linear DMA-BUF.
        let pixels: (data: UnsafeRawPointer, size: Int, offset: Int, dmabuf: DmaBufMapping?)?
        switch plan.access(dataType: d.type) {
        case .shared:
            let maxSize = Int(d.maxsize)
            pixels = d.data.map { (UnsafeRawPointer($0), maxSize, maxSize > 0 ? Int(chunk.offset) % maxSize : 0, nil) }
        case .dmabufLinear:
            let start = Int(d.mapoffset)
            guard let m = dmabufs[UnsafeMutableRawPointer(b)] else { return fallBackToSharedMemory() }
            pixels = start < m.length ? (UnsafeRawPointer(m.base) + start, m.length - start, Int(chunk.offset), m) : nil
        case .reject(let why):
            sayOnce(why)
            return unusable()
        }
        // A chunk of size 0 carries only metadata (a cursor move, Mutter sends those).
        if chunk.size == 0 && pixels != nil {
            assembler.noteMetadataOnly(cursor: cursorUpdate, damage: damage, size: out)
            return
        }
        guard headerFlags & UInt32(SPA_META_HEADER_FLAG_CORRUPTED) == 0,
              chunk.flags & Int32(SPA_CHUNK_FLAG_CORRUPTED) == 0,
              let pixels else { return unusable() }
        let stride = chunk.stride > 0 ? Int(chunk.stride) : rowBytes
        let offset = pixels.offset
        guard stride >= rowBytes, offset >= 0, offset + stride * (size.height - 1) + rowBytes <= pixels.size else { return unusable() }

        guard let lease = ring.beginWrite() else {
            // Dropped (counted by the ring); its changes must reach the next published frame.
            assembler.noteDropped(cursor: cursorUpdate, damage: damage, size: out)
            return
        }
        let src = pixels.data + offset
        let dst = lease.slot.bytes
        pixels.dmabuf.map { syncDmaBuf($0, start: true) }
        let outStride = out.width * 4
        if let fit {
            // The window's crop, copied or shrunk into its placement.
            placer.place(src + fit.crop.y * stride + fit.crop.x * 4, stride: stride, size: fit.crop.size,
                         into: dst, stride: outStride, frame: fit.frame, at: fit.placement, slot: lease.index)
        } else if stride == rowBytes {
            dst.copyMemory(from: src, byteCount: rowBytes * size.height)
        } else {
            for y in 0..<size.height { (dst + y * rowBytes).copyMemory(from: src + y * stride, byteCount: rowBytes) }
        }
        pixels.dmabuf.map { syncDmaBuf($0, start: false) }
        let frameDamage = assembler.finish(cursor: cursorUpdate, damage: damage, size: out, format: negotiated.format,
                                           pixels: dst, stride: outStride)
        let frame = Frame(format: negotiated.format, size: out, stride: outStride, captureTime: clock.now(),
                          damage: frameDamage)
        // Published under `shared`, like refreshes: the ring's order is the screen's order.
        let took = (SystemMonotonicClock().now() - started).totalNanoseconds
        shared.withLock { s in
            ring.publish(lease, frame: frame)
            s.latest = frame
            s.lastPublished = (lease.index, frame)
            if s.processNanos.count >= 4096 { s.processNanos.removeFirst(1024) }
            s.processNanos.append(took)
        }
        signal.signal()
    }

    private func unusable() {
        shared.withLock { $0.unusable += 1 }
    }

    /// A window's crop for this buffer (the first one chooses the frame, unless `waitForWindowFrame`
    /// did); `moved` when the crop moved or changed size since the last buffer.
    private func windowFit(_ buf: UnsafeMutablePointer<spa_buffer>, stream size: FrameSize) -> (WindowCrop, moved: Bool) {
        var crop: FrameRect? = nil
        if castd_pw_video_crop(buf, cropScratch) == 1 {
            crop = FrameRect(x: Int(cropScratch[0]), y: Int(cropScratch[1]),
                             width: Int(cropScratch[2]), height: Int(cropScratch[3]))
        }
        if var f = fit {
            let before = f.crop.size
            let moved = f.update(crop: crop, stream: size)
            fit = f
            if f.crop.size != before { logFit(f, crop: crop) }
            return (f, moved)
        }
        let window = options.window!
        let first = WindowCrop(stream: size, crop: crop, caps: window.caps, frame: window.frame)
        let frame = shared.withLock { s -> FrameSize in
            if s.windowFrame == nil { s.windowFrame = first.frame }
            return s.windowFrame!
        }
        let f = WindowCrop(stream: size, crop: crop, caps: window.caps, frame: frame)
        fit = f
        signal.signal()
        logFit(f, crop: crop)
        return (f, true)
    }

    private func logFit(_ f: WindowCrop, crop: FrameRect?) {
        options.log(LogLine(.info, "shared_window_size", [("window", options.window?.name ?? "window"), ("size", "\(f.crop.size)"),
                                                          ("frame", "\(f.frame)"), ("placed", "\(f.placement)"),
                                                          ("crop", crop == nil ? "none (the whole stream)" : "\(f.crop)")]))
    }

    private func sayOnce(_ sentence: String) {
        guard said.insert(sentence).inserted else { return }
        options.log(LogLine(.warning, "capture_buffer_unusable", [("reason", sentence)]))
    }

    /// A buffer joined the stream: a DMA-BUF is mapped read-only here (PipeWire maps only
    /// shared memory), once, for as long as the buffer lives.
    private func addBuffer(_ b: UnsafeMutablePointer<pw_buffer>) {
        guard let buf = b.pointee.buffer, buf.pointee.n_datas >= 1 else { return }
        let d = buf.pointee.datas[0]
        let fields = plan.logFields(dataType: d.type)
        let described = fields.map { "\($0.0)=\($0.1)" }.joined(separator: " ")
        let changed = shared.withLock { s -> Bool in
            defer { s.buffers = described }
            return s.buffers != described
        }
        if changed { options.log(LogLine(.info, "capture_buffers", fields)) }
        guard d.type == PipeWireBufferPlan.dmaBuf else { return }
        switch DmaBufMapping.map(fd: Int32(exactly: d.fd) ?? -1, fallbackLength: Int(d.mapoffset) + Int(d.maxsize)) {
        case .success(let m): dmabufs[UnsafeMutableRawPointer(b)] = m
        case .failure(let e): mapFailure = e.message
        }
    }

    /// A DMA-BUF castd could not map (a driver that refuses CPU mappings): announce shared
    /// memory only, once; PipeWire renegotiates the link and the producer's shared-memory
    /// format follows (a producer without one ends the stream).
    private func fallBackToSharedMemory() {
        unusable()
        guard !sharedOnly, let stream else { return }
        sharedOnly = true
        options.log(LogLine(.warning, "capture_dmabuf_unreadable", [
            ("reason", "PipeWire: cannot map the producer's DMA-BUF frames for reading (\(mapFailure ?? "no mapping"))"),
            ("effect", "asking for shared memory instead")]))
        var params = PodList()
        defer { params.free() }
        addFormats(&params)
        _ = params.withPods { pw_stream_update_params(stream, $0, $1) }
    }

    private func removeBuffer(_ b: UnsafeMutablePointer<pw_buffer>) {
        dmabufs.removeValue(forKey: UnsafeMutableRawPointer(b))?.unmap()
    }

    /// Brackets a CPU read of a DMA-BUF. An fd that is not a real dma-buf (a memfd in tests)
    /// answers ENOTTY or EINVAL: nothing to synchronise, and not asked again.
    private func syncDmaBuf(_ m: DmaBufMapping, start: Bool) {
        guard m.synchronised else { return }
        let r = castd_dmabuf_sync_read(m.fd, start ? 1 : 0)
        if r == -ENOTTY || r == -EINVAL {
            m.synchronised = false
        } else if r < 0 {
            sayOnce("PipeWire: DMA_BUF_IOCTL_SYNC failed (\(CastError.posixReason(-r))); frames are read without it")
        }
    }
}

/// castd's read-only mapping of one DMA-BUF buffer (its whole fd).
/// Used on the PipeWire thread only.
final class DmaBufMapping {
    let fd: Int32
    let base: UnsafeMutableRawPointer
    let length: Int
    /// False once the fd said it does not take DMA_BUF_IOCTL_SYNC.
    var synchronised = true

    private init(fd: Int32, base: UnsafeMutableRawPointer, length: Int) {
        self.fd = fd
        self.base = base
        self.length = length
    }

    /// Maps `fd` from its start; its length is the fd's size, else `fallbackLength`.
    static func map(fd: Int32, fallbackLength: Int) -> Result<DmaBufMapping, CastError> {
        var st = stat()
        let size = fstat(fd, &st) == 0 && st.st_size > 0 ? Int(st.st_size) : fallbackLength
        guard fd >= 0, size > 0 else { return .failure(CastError(.capture, "no size for fd \(fd)")) }
        guard let p = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), p != MAP_FAILED else {
            return .failure(CastError.posix(.capture) { "mmap of \(size) bytes: \($0)" })
        }
        return .success(DmaBufMapping(fd: fd, base: p, length: size))
    }

    func unmap() { munmap(base, length) }
}
