import CastCore
import CastMedia
import CastSystem
import CPipeWire
import Dispatch
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A PipeWire Video/Source node that sends castd's PipeWire test picture,
/// driven by its own clock like a compositor's screen stream: the producer of
/// the capture tests, the stand-in portal and `castd-pattern --pipewire`.
/// Every frame carries damage metadata (`damage`, or the whole frame) and,
/// with `cursor`, cursor metadata (a 16×16 square moving one pixel a frame).
/// The frame counter is written into pixel (0, 0)…(3, 0) of each frame.
/// With `crop` each frame carries `SPA_META_VideoCrop` (as Mutter's window
/// streams do, the window at a place in a larger stream), changed by `setCrop`.
/// With `dmabufModifier` it offers only DMA-BUF buffers with that modifier,
/// negotiated as PipeWire's DMA-BUF procedure asks (announced unchosen, then
/// chosen) and backed by memfds it allocates: PipeWire passes the fd like a
/// compositor's linear DMA-BUF, and the consumer maps it itself.
public final class PipeWirePatternProducer: @unchecked Sendable {
    // @unchecked: pw objects and `size` are used under the loop lock only.
    public struct Options: Sendable {
        public var size: FrameSize
        public var format: PixelFormat
        public var fps: Int
        public var nodeName: String
        public var cursor: Bool
        /// The damage each frame reports (nil: the whole frame).
        public var damage: FrameRect?
        /// Offer only DMA-BUF buffers with this DRM modifier (0: linear); nil: shared memory.
        public var dmabufModifier: UInt64?
        /// With `dmabufModifier`: the DMA-BUF fds handed out cannot be mapped for reading (as with a
        /// driver that refuses CPU mappings), and shared memory is offered after DMA-BUF, as a compositor does.
        public var unmappableDmabuf: Bool
        /// The video crop every frame carries (when the consumer asks for the metadata); nil: none.
        public var crop: FrameRect?

        public init(size: FrameSize, format: PixelFormat = .bgrx, fps: Int = 30, nodeName: String = "castd-pattern",
                    cursor: Bool = false, damage: FrameRect? = nil, dmabufModifier: UInt64? = nil,
                    unmappableDmabuf: Bool = false, crop: FrameRect? = nil) {
            self.size = size
            self.format = format
            self.fps = fps
            self.nodeName = nodeName
            self.cursor = cursor
            self.damage = damage
            self.dmabufModifier = dmabufModifier
            self.unmappableDmabuf = unmappableDmabuf
            self.crop = crop
        }
    }

    /// The picture's colour at (x, y), as (r, g, b): every pixel tells where it is.
    public static func colour(x: Int, y: Int) -> (UInt8, UInt8, UInt8) {
        (UInt8(x & 0xff), UInt8(y & 0xff), UInt8(((x >> 8) * 16 + (y >> 8)) & 0xff))
    }

    /// The frame counter written into the first four pixels of `row`.
    public static func counter(in row: UnsafeRawPointer) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(row.load(fromByteOffset: 4 * $1, as: UInt8.self)) << (8 * UInt32($1)) }
    }

    public static let cursorSize = 16
    /// The cursor's colour: opaque magenta (premultiplied ARGB).
    public static let cursorARGB: UInt32 = 0xffff00ff

    public let options: Options
    private var connection: PipeWireConnection! = nil
    private var pw = PipeWireStream()
    private var stream: OpaquePointer? { pw.pointer }
    private var size: FrameSize
    private var picture: [UInt8] = []
    private let state = Mutex<(node: UInt32?, sent: UInt64, failure: String?)>((nil, 0, nil))
    private let changed = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(true)
    private let paused = Atomic<Bool>(false)
    private let tickerDone = DispatchSemaphore(value: 0)
    /// The crop the next frames carry.
    private let crop: Mutex<FrameRect?>

    public init(remote: PipeWireRemote = .daemon, options: Options) throws {
        self.options = options
        size = options.size
        crop = Mutex(options.crop)
        picture = Self.render(size, options.format)
        connection = try PipeWireConnection(remote: remote) { [weak self] message in
            self?.state.withLock { $0.failure = message }
            self?.changed.signal()
        }
        try connection.withLock { try connect() }
        SystemThread.start(name: "castd-pattern-pw") { [self] in tick() }
    }

    private static func render(_ size: FrameSize, _ format: PixelFormat) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size.width * size.height * 4)
        for y in 0..<size.height {
            for x in 0..<size.width {
                let (r, g, b) = colour(x: x, y: y)
                let i = (y * size.width + x) * 4
                if format == .bgrx { out[i] = b; out[i + 2] = r } else { out[i] = r; out[i + 2] = b }
                out[i + 1] = g
                out[i + 3] = 255
            }
        }
        return out
    }

    /// The EnumFormat: shared memory, or the DMA-BUF modifier left for this side to choose;
    /// with `chosen`, first the same format with that modifier fixed (the producer's choice).
    private func formatPod(_ list: inout PodList, chosen: Bool = false) {
        let spa = options.format == .bgrx ? SPA_VIDEO_FORMAT_BGRx.rawValue : SPA_VIDEO_FORMAT_RGBx.rawValue
        let w = UInt32(size.width), h = UInt32(size.height), fps = UInt32(options.fps)
        let modifiers = options.dmabufModifier.map { [$0] } ?? []
        let mandatory = UInt32(SPA_POD_PROP_FLAG_MANDATORY)
        var variants: [(modifiers: [UInt64], flags: UInt32)] = [(modifiers, mandatory | UInt32(SPA_POD_PROP_FLAG_DONT_FIXATE))]
        if chosen { variants.insert((modifiers, mandatory), at: 0) }
        if options.unmappableDmabuf { variants.append(([], 0)) }   // shared memory after DMA-BUF
        for v in variants {
            list.add { buf, n in
                withUnsafePointer(to: spa) { f in
                    v.modifiers.withUnsafeBufferPointer { m in
                        castd_pw_video_format(buf, n, SPA_PARAM_EnumFormat.rawValue, f, 1, w, h, w, h, w, h, fps, fps, fps,
                                              m.baseAddress, UInt32(m.count), v.flags)
                    }
                }
            }
        }
    }

    private func connect() throws {
        let created = pw.create(core: connection.core, name: options.nodeName,
                                properties: "media.class=Video/Source media.type=Video media.category=Source media.role=Screen node.name=\(options.nodeName)",
                                userData: Unmanaged.passUnretained(self).toOpaque()) { events in
            Self.setEvents(&events)
        }
        guard created != nil else {
            throw CastError(.capture, "PipeWire: cannot create the pattern stream")
        }
        var params = PodList()
        defer { params.free() }
        formatPod(&params)
        // DMA-BUF: this side allocates the buffers (memfds standing in for a GPU's linear buffers).
        let alloc = options.dmabufModifier != nil ? PW_STREAM_FLAG_ALLOC_BUFFERS.rawValue : 0
        let flags = pw_stream_flags(PW_STREAM_FLAG_DRIVER.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue | alloc)
        let r = pw.connect(SPA_DIRECTION_OUTPUT, target: UInt32.max, flags: flags, params: params)
        guard r >= 0 else { throw CastError(.capture, "PipeWire: cannot connect the pattern stream (\(r))") }
    }

    private static func setEvents(_ events: inout pw_stream_events) {
        events.state_changed = { data, _, new, _ in
            let me = Unmanaged<PipeWirePatternProducer>.fromOpaque(data!).takeUnretainedValue()
            if new == PW_STREAM_STATE_PAUSED || new == PW_STREAM_STATE_STREAMING, let s = me.stream {
                let id = pw_stream_get_node_id(s)
                me.state.withLock { $0.node = id }
            }
            me.changed.signal()
        }
        events.param_changed = { data, id, param in
            let me = Unmanaged<PipeWirePatternProducer>.fromOpaque(data!).takeUnretainedValue()
            guard id == SPA_PARAM_Format.rawValue, let param, let s = me.stream else { return }
            let stride = UInt32(me.size.width * 4), bytes = stride * UInt32(me.size.height)
            var params = PodList()
            defer { params.free() }
            var modifier: UInt64 = 0
            let state = castd_pw_format_modifier(param, &modifier)
            if state == 2 {
                // The consumers left the modifier to this side: choose it (the only one offered)
                // and announce the format again with it fixed; a new Format follows.
                me.formatPod(&params, chosen: true)
                _ = params.withPods { pw_stream_update_params(s, $0, $1) }
                return
            }
            let types = state == 1 ? UInt32(1 << SPA_DATA_DmaBuf.rawValue)
                                   : UInt32(1 << SPA_DATA_MemFd.rawValue) | UInt32(1 << SPA_DATA_MemPtr.rawValue)
            params.add { castd_pw_buffers_param($0, $1, types, bytes, stride) }
            params.add { castd_pw_meta_param($0, $1, SPA_META_Header.rawValue, castd_pw_meta_header_size(),
                                             castd_pw_meta_header_size(), castd_pw_meta_header_size()) }
            let region = castd_pw_meta_region_size()
            params.add { castd_pw_meta_param($0, $1, SPA_META_VideoDamage.rawValue, region * 16, region, region * 16) }
            let cs = UInt32(PipeWirePatternProducer.cursorSize)
            params.add { castd_pw_meta_param($0, $1, SPA_META_Cursor.rawValue, castd_pw_cursor_meta_size(cs, cs),
                                             castd_pw_cursor_meta_size(1, 1), castd_pw_cursor_meta_size(256, 256)) }
            if me.options.crop != nil {
                params.add { castd_pw_meta_param($0, $1, SPA_META_VideoCrop.rawValue, region, region, region) }
            }
            _ = params.withPods { pw_stream_update_params(s, $0, $1) }
        }
        events.process = { data in
            Unmanaged<PipeWirePatternProducer>.fromOpaque(data!).takeUnretainedValue().fill()
        }
        events.add_buffer = { data, b in
            Unmanaged<PipeWirePatternProducer>.fromOpaque(data!).takeUnretainedValue().allocate(b!)
        }
        events.remove_buffer = { data, b in
            Unmanaged<PipeWirePatternProducer>.fromOpaque(data!).takeUnretainedValue().release(b!)
        }
    }

    /// With PW_STREAM_FLAG_ALLOC_BUFFERS (DMA-BUF only): a memfd of one frame per buffer,
    /// typed DmaBuf (the consumer maps it itself), mapped here for `fill`.
    private func allocate(_ b: UnsafeMutablePointer<pw_buffer>) {
        guard options.dmabufModifier != nil, let buf = b.pointee.buffer, buf.pointee.n_datas >= 1,
              let d = buf.pointee.datas else { return }
        let bytes = size.width * 4 * size.height
        let fd = castd_memfd("castd-pattern-dmabuf", UInt64(bytes))
        guard fd >= 0 else { return }
        guard let p = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), p != MAP_FAILED else {
            close(fd)
            return
        }
        let dmabuf = d[0].type & UInt32(1 << SPA_DATA_DmaBuf.rawValue) != 0
        var shared = fd
        if dmabuf && options.unmappableDmabuf {
            // The same memory through a write-only descriptor: a consumer's read mapping fails (EACCES).
            shared = open("/proc/self/fd/\(fd)", O_WRONLY | O_CLOEXEC)
            close(fd)
            guard shared >= 0 else { munmap(p, bytes); return }
        }
        d[0].type = dmabuf ? SPA_DATA_DmaBuf.rawValue : SPA_DATA_MemFd.rawValue
        d[0].flags = UInt32(SPA_DATA_FLAG_READABLE)
        d[0].fd = Int64(shared)
        d[0].mapoffset = 0
        d[0].maxsize = UInt32(bytes)
        d[0].data = p
    }

    private func release(_ b: UnsafeMutablePointer<pw_buffer>) {
        guard options.dmabufModifier != nil, let buf = b.pointee.buffer, buf.pointee.n_datas >= 1,
              let d = buf.pointee.datas else { return }
        if let p = d[0].data { munmap(p, Int(d[0].maxsize)) }
        if d[0].fd >= 0 { close(Int32(d[0].fd)) }
        d[0].data = nil
        d[0].fd = -1
    }

    /// The node id consumers connect to, once the daemon gave one.
    public func nodeId(timeout: Duration = .seconds(5)) throws -> UInt32 {
        let deadline = SystemMonotonicClock().now() + timeout
        while true {
            let s = state.withLock { $0 }
            if let f = s.failure { throw CastError(.capture, f) }
            if let n = s.node, n != UInt32.max { return n }
            if changed.wait(until: deadline) == .timedOut {
                throw CastError(.capture, "PipeWire: the pattern node got no id within \(timeout)")
            }
        }
    }

    /// Stops sending frames (a static screen, as Mutter does) or resumes.
    public func pause(_ paused: Bool) { self.paused.store(paused, ordering: .relaxed) }

    /// The crop the next frames carry (a window that moved or changed size).
    public func setCrop(_ r: FrameRect) { crop.withLock { $0 = r } }

    /// Frames sent so far (the next frame carries this number).
    public var framesSent: UInt64 { state.withLock { $0.sent } }

    /// Changes the picture's size: a new format for the consumers (a screen resize).
    public func resize(to newSize: FrameSize) {
        let pic = Self.render(newSize, options.format)
        connection.withLock {
            size = newSize
            picture = pic
            guard let stream else { return }
            var params = PodList()
            defer { params.free() }
            formatPod(&params)
            _ = params.withPods { pw_stream_update_params(stream, $0, $1) }
        }
    }

    private func tick() {
        let interval = Duration.seconds(1) / max(1, options.fps)
        while running.load(ordering: .relaxed) {
            if !paused.load(ordering: .relaxed) {
                connection.withLock { if let stream { _ = pw_stream_trigger_process(stream) } }
            }
            SystemThread.sleep(interval)
        }
        tickerDone.signal()
    }

    /// PipeWire thread: one frame into the next free buffer.
    private func fill() {
        guard let stream, let b = pw_stream_dequeue_buffer(stream) else { return }
        defer { pw_stream_queue_buffer(stream, b) }
        let buf = b.pointee.buffer!
        let d = buf.pointee.datas[0]
        let stride = size.width * 4, bytes = stride * size.height
        guard let data = d.data, Int(d.maxsize) >= bytes else {
            d.chunk.pointee.size = 0
            return
        }
        let n = state.withLock { s -> UInt64 in
            s.sent += 1
            return s.sent - 1
        }
        picture.withUnsafeBytes { data.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
        for i in 0..<4 { data.storeBytes(of: UInt8(truncatingIfNeeded: n >> (8 * UInt64(i))), toByteOffset: 4 * i, as: UInt8.self) }
        d.chunk.pointee.offset = 0
        d.chunk.pointee.size = UInt32(bytes)
        d.chunk.pointee.stride = Int32(stride)
        d.chunk.pointee.flags = 0
        let r = options.damage ?? FrameRect(x: 0, y: 0, width: size.width, height: size.height)
        let rect: [Int32] = [Int32(r.x), Int32(r.y), Int32(r.width), Int32(r.height)]
        _ = rect.withUnsafeBufferPointer { castd_pw_set_damage(buf, $0.baseAddress, 1) }
        if let r = crop.withLock({ $0 }) {
            _ = castd_pw_set_video_crop(buf, Int32(r.x), Int32(r.y), UInt32(r.width), UInt32(r.height))
        }
        if options.cursor {
            let c = Self.cursorSize
            let px = [UInt32](repeating: Self.cursorARGB, count: c * c)
            let pos = Int32(truncatingIfNeeded: 10 + Int(n % 100))
            _ = px.withUnsafeBufferPointer { castd_pw_set_cursor(buf, 1, pos, pos, 0, 0, $0.baseAddress, UInt32(c), UInt32(c)) }
        }
    }

    /// Stops sending and leaves the graph (also done by `deinit`).
    public func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        tickerDone.wait()
        connection.shutDown {
            pw.destroy()
        }
        connection = nil
    }

    deinit {
        stop()
        pw.deallocate()
    }
}
