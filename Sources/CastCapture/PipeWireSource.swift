import CastCore
import CastMedia
import CPipeWire
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Screen capture from a PipeWire video node (a ScreenCast portal's or
/// Mutter's stream, or any Video/Source): a `pw_stream` input offering raw
/// BGRx/RGBx/BGRA/RGBA in SHM or MemFd buffers. PipeWire pushes: the stream's
/// process callback (on the PipeWire thread) copies the newest buffer into a
/// free ring slot, or drops it, counted by the ring, when none is free;
/// `capture` reports what arrived. A size or format change is `.reinit`
/// (close this source, open a new one). Damage comes from
/// `SPA_META_VideoDamage`; the cursor from `SPA_META_Cursor` is drawn into
/// frames when `cursor` is on.
public final class PipeWireSource: FrameSource {
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

        public init(remote: PipeWireRemote = .daemon, node: UInt32? = nil, cursor: Bool = true,
                    slotCount: Int = FrameRing<MemorySlot>.defaultSlotCount,
                    negotiationTimeout: Duration = .seconds(5), frameWait: Duration = .milliseconds(50),
                    maxSize: FrameSize = FrameSize(width: 8192, height: 8192)) {
            self.remote = remote
            self.node = node
            self.cursor = cursor
            self.slotCount = slotCount
            self.negotiationTimeout = negotiationTimeout
            self.frameWait = frameWait
            self.maxSize = maxSize
        }
    }

    public let ring: FrameRing<MemorySlot>
    public let format: PixelFormat
    public let size: FrameSize
    public var stride: Int { size.width * 4 }
    public let options: Options
    /// Buffers the source could not use (corrupted, unmapped or too small for the format), for logs and tests.
    public var unusableBuffers: UInt64 { stream.shared.withLock { $0.unusable } }

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
        let slots = (0..<max(1, options.slotCount)).map { _ in
            MemorySlot(capacity: negotiated.size.width * 4 * negotiated.size.height)
        }
        ring = FrameRing(slots: slots)
        format = negotiated.format
        size = negotiated.size
        self.stream = stream
        stream.attach(ring: ring)
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
        if let outcome = stream.takeOutcome() { return outcome }
        let deadline = SystemMonotonicClock().now() + options.frameWait
        while stream.signal.wait(until: deadline) == .success {
            if let outcome = stream.takeOutcome() { return outcome }
        }
        if let outcome = stream.takeOutcome() { return outcome }
        if !onlyIfChanged, let frame = stream.republishLast() { return .frame(frame) }
        return .timeout
    }

    /// Waits for the stream to deliver a frame (PipeWire sends one per change) or to end.
    public func waitForChange(until deadline: Instant) -> Bool { stream.waitForOutcome(until: deadline) }

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
    /// The newest frame published since `capture` last returned one.
    var latest: Frame? = nil
    /// The last frame published and its ring slot (for refresh frames).
    var lastPublished: (index: Int, frame: Frame)? = nil
    var unusable: UInt64 = 0
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
    private let clock: any MonotonicClock
    private var connection: PipeWireConnection! = nil
    private var pw = PipeWireStream()
    private var stream: OpaquePointer? { pw.pointer }
    /// The registry, watched for the target node's removal (the end of a cast).
    private var registry = PipeWireRegistry()
    private var ring: FrameRing<MemorySlot>? = nil
    private var assembler = PipeWireFrameAssembler()
    private let damageScratch = UnsafeMutablePointer<Int32>.allocate(capacity: 4 * PipeWireFrameAssembler.maxDamageRects)

    init(options: PipeWireSource.Options, clock: any MonotonicClock) throws {
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

        var params = PodList()
        defer { params.free() }
        let formats = PipeWireFormats.accepted.map(\.spa)
        let max = options.maxSize
        params.add { buf, n in
            formats.withUnsafeBufferPointer { f in
                castd_pw_video_format(buf, n, SPA_PARAM_EnumFormat.rawValue, f.baseAddress, UInt32(f.count),
                                      1920, 1080, 1, 1, UInt32(max.width), UInt32(max.height), 30, 0, 1000)
            }
        }
        let flags = pw_stream_flags(PW_STREAM_FLAG_AUTOCONNECT.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue)
        let r = pw.connect(SPA_DIRECTION_INPUT, target: options.node ?? UInt32.max, flags: flags, params: params)
        guard r >= 0 else {
            throw CastError.posix(.capture, errno: -r) { "PipeWire: cannot connect the capture stream to node \(options.node.map(String.init) ?? "any") (\($0))" }
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
                throw CastError(.capture, "PipeWire: \(node) offered no frame format castd reads (BGRx, RGBx, BGRA, RGBA in shared memory) within \(timeout) (stream \(s.streamState)); is the node a screen stream, and does a session manager link it?")
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
        let size = FrameSize(width: Int(w), height: Int(h))
        shared.withLock { s in
            if let n = s.negotiated {
                if n.size != size || n.format != format { s.reinit = size }
            } else {
                s.negotiated = (format, spa, size)
            }
        }
        signal.signal()

        // Our side of the buffers: shared memory we can map, with damage and cursor metadata.
        // TODO: offer DMA-BUF (with modifiers) first once an encoder can import it (VA-API).
        var params = PodList()
        defer { params.free() }
        let types = UInt32(1 << SPA_DATA_MemPtr.rawValue) | UInt32(1 << SPA_DATA_MemFd.rawValue)
        params.add { castd_pw_buffers_param($0, $1, types, 0, 0) }
        params.add { castd_pw_meta_param($0, $1, SPA_META_Header.rawValue, castd_pw_meta_header_size(),
                                         castd_pw_meta_header_size(), castd_pw_meta_header_size()) }
        let region = castd_pw_meta_region_size()
        params.add { castd_pw_meta_param($0, $1, SPA_META_VideoDamage.rawValue,
                                         region * UInt32(PipeWireFrameAssembler.maxDamageRects), region,
                                         region * UInt32(PipeWireFrameAssembler.maxDamageRects)) }
        params.add { castd_pw_meta_param($0, $1, SPA_META_Cursor.rawValue, castd_pw_cursor_meta_size(64, 64),
                                         castd_pw_cursor_meta_size(1, 1), castd_pw_cursor_meta_size(256, 256)) }
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
        guard let ring, let negotiated = shared.withLock({ $0.reinit == nil ? $0.negotiated : nil }) else { return }
        let buf = b.pointee.buffer!

        // Metadata first: the cursor and damage count even when the pixels are unusable or dropped.
        var cursor = castd_pw_cursor()
        let cursorUpdate: PipeWireFrameAssembler.CursorUpdate?
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
        let headerFlags = castd_pw_header_flags(buf)
        guard buf.pointee.n_datas >= 1 else { return unusable() }
        let d = buf.pointee.datas[0]
        let chunk = d.chunk.pointee
        // A chunk of size 0 carries only metadata (a cursor move, Mutter sends those).
        if chunk.size == 0 && d.data != nil {
            assembler.noteMetadataOnly(cursor: cursorUpdate, damage: damage, size: size)
            return
        }
        guard headerFlags & UInt32(SPA_META_HEADER_FLAG_CORRUPTED) == 0,
              chunk.flags & Int32(SPA_CHUNK_FLAG_CORRUPTED) == 0,
              let data = d.data else { return unusable() }
        let stride = chunk.stride > 0 ? Int(chunk.stride) : rowBytes
        let maxSize = Int(d.maxsize)
        let offset = maxSize > 0 ? Int(chunk.offset) % maxSize : 0
        guard stride >= rowBytes, offset + stride * (size.height - 1) + rowBytes <= maxSize else { return unusable() }

        guard let lease = ring.beginWrite() else {
            // Dropped (counted by the ring); its changes must reach the next published frame.
            assembler.noteDropped(cursor: cursorUpdate, damage: damage, size: size)
            return
        }
        let src = UnsafeRawPointer(data) + offset
        let dst = lease.slot.bytes
        if stride == rowBytes {
            dst.copyMemory(from: src, byteCount: rowBytes * size.height)
        } else {
            for y in 0..<size.height { (dst + y * rowBytes).copyMemory(from: src + y * stride, byteCount: rowBytes) }
        }
        let frameDamage = assembler.finish(cursor: cursorUpdate, damage: damage, size: size, format: negotiated.format,
                                           pixels: dst, stride: rowBytes)
        let frame = Frame(format: negotiated.format, size: size, stride: rowBytes, captureTime: clock.now(),
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
}
