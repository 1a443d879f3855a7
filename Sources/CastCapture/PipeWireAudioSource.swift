import CastCore
import CastMedia
import CPipeWire
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension CastError.Code {
    /// No audio to capture (no PipeWire, or no sink): castd sends video only.
    public static let audioUnavailable = Self("audio-unavailable")
}

/// What the audio thread gets from `PipeWireAudioSource.read`.
public enum AudioCaptureOutcome: Sendable {
    case chunk(AudioRing.Chunk)
    /// Not a whole frame within the wait (nothing plays, or the graph is paused).
    case timeout
    case interrupted
    case error(CastError)
}

/// Desktop audio: what the user hears, captured from the default sink's
/// monitor through a PipeWire input stream with `stream.capture.sink = true`
/// (the session manager links it to the default sink, and moves it when the
/// default changes). 48 kHz interleaved F32, stereo by default; PipeWire's
/// stream adapter converts whatever the sink runs at.
///
/// PipeWire pushes: the process callback (PipeWire's thread) copies every
/// buffer into an `AudioRing`, which drops the oldest samples when the
/// reader lags; it never waits for the reader, and the reader never waits
/// for video. `read` hands out fixed frames for the encoder.
///
/// The sink being captured is followed through the registry (the link into
/// our node): `onSinkChange` is called with its description on each change.
public final class PipeWireAudioSource: @unchecked Sendable {
    // @unchecked: the pw objects are used on the PipeWire thread or under the
    // loop lock; everything shared with the reader is in `shared`.
    public struct Options: Sendable {
        public var remote: PipeWireRemote
        public var channels: Int
        /// How much audio the ring holds before dropping the oldest.
        public var bufferDuration: Duration
        /// How long `init` waits for the sink's monitor to be linked and a format agreed.
        public var negotiationTimeout: Duration

        public init(remote: PipeWireRemote = .daemon, channels: Int = 2, bufferDuration: Duration = .milliseconds(200),
                    negotiationTimeout: Duration = .seconds(3)) {
            self.remote = remote
            self.channels = channels
            self.bufferDuration = bufferDuration
            self.negotiationTimeout = negotiationTimeout
        }
    }

    public static let sampleRate = 48_000

    struct Shared {
        var ring: AudioRing
        var negotiated = false
        var streamState = "connecting"
        var failure: String? = nil
        var interrupted = false
        /// The registry's first enumeration is complete (the core's `done`).
        var registrySynced = false
        /// Audio/Sink nodes: id → description.
        var sinks: [UInt32: String] = [:]
        /// Links: id → (output node, input node).
        var links: [UInt32: (output: UInt32, input: UInt32)] = [:]
        var ourNode: UInt32? = nil
        var currentSink: UInt32? = nil
        var sinkChanges = 0
        /// Process callback durations (the copy into the ring; the last 4096), for benchmarks.
        var processNanos: [Int64] = []
        var callbacks = 0
    }

    public let options: Options
    let shared: Mutex<Shared>
    private let signal = DispatchSemaphore(value: 0)
    private let clock: any MonotonicClock
    private let onSinkChange: @Sendable (String) -> Void
    private var connection: PipeWireConnection! = nil
    private var pw = PipeWireStream()
    private var stream: OpaquePointer? { pw.pointer }
    private var registry = PipeWireRegistry()
    private let coreHook: UnsafeMutablePointer<spa_hook>
    private let coreEvents: UnsafeMutablePointer<pw_core_events>
    private var syncSeq: Int32 = 0

    /// Connects and waits until the default sink's monitor is linked and a
    /// format is agreed. Throws `.audioUnavailable` with a sentence when there
    /// is nothing to capture (no PipeWire daemon, no sink); any other failure is `.capture`.
    public init(options: Options = Options(), clock: any MonotonicClock = SystemMonotonicClock(),
                onSinkChange: @escaping @Sendable (String) -> Void = { _ in }) throws {
        guard options.channels == 1 || options.channels == 2 else {
            throw CastError(.usage, "audio capture: \(options.channels) channels; castd captures mono or stereo")
        }
        self.options = options
        self.clock = clock
        self.onSinkChange = onSinkChange
        let capacity = Int(options.bufferDuration.totalNanoseconds * Int64(Self.sampleRate) / 1_000_000_000)
        shared = Mutex(Shared(ring: AudioRing(channels: options.channels, sampleRate: Self.sampleRate,
                                              capacity: max(960, capacity))))
        coreHook = .cell(spa_hook())
        coreEvents = .cell(pw_core_events())
        do {
            // unowned(unsafe), like `borrow`: a weak load is a retain whose release could be the
            // last one, on PipeWire's thread. The connection never outlives `self` (`close`).
            connection = try PipeWireConnection(remote: options.remote) { [unowned(unsafe) self] message in self.fail(message) }
        } catch let e as CastError {
            close()
            throw CastError(.audioUnavailable, "no audio: \(e.message)")
        }
        do {
            try connection.withLock { try connect() }
            try waitUntilLinked(timeout: options.negotiationTimeout)
        } catch {
            close()
            throw error
        }
    }

    /// Closes on the owner's thread (see `close`), never on PipeWire's.
    deinit { close() }

    /// Calls `body` with the source a PipeWire callback's user data points to, without
    /// retaining it. A retain there (`takeUnretainedValue`) could make that callback's
    /// release the last one: `deinit` would then run on PipeWire's own thread, where the
    /// loop cannot be stopped, and free the hooks and event tables under a live stream
    /// (`castd doctor` aborted with "malloc(): invalid size"; issue 18). Borrowed, the
    /// object's lifetime stays with its owner: `close()`, from the owner's thread, stops
    /// the loop (joining any callback in flight) before anything is freed.
    private static func borrow(_ data: UnsafeMutableRawPointer?, _ body: (PipeWireAudioSource) -> Void) {
        guard let data else { return }
        Unmanaged<PipeWireAudioSource>.fromOpaque(data)._withUnsafeGuaranteedRef(body)
    }

    /// The description of the sink being captured, when linked.
    public var currentSink: String? {
        shared.withLock { s in s.currentSink.flatMap { s.sinks[$0] } }
    }

    /// Samples per channel the ring dropped because the reader lagged, and silence inserted for gaps.
    public var droppedSamples: Int64 { shared.withLock { $0.ring.droppedSamples } }
    public var silenceInserted: Int64 { shared.withLock { $0.ring.silenceInserted } }
    var processNanos: [Int64] { shared.withLock { $0.processNanos } }
    var callbacks: Int { shared.withLock { $0.callbacks } }

    /// The next frame of `samplesPerChannel` samples, waiting up to `wait` for it.
    public func read(samplesPerChannel n: Int, wait: Duration) -> AudioCaptureOutcome {
        let deadline = SystemMonotonicClock().now() + wait
        while true {
            let outcome = shared.withLock { s -> AudioCaptureOutcome? in
                if s.interrupted { return .interrupted }
                if let f = s.failure { return .error(CastError(.capture, f)) }
                return s.ring.read(samplesPerChannel: n).map { .chunk($0) }
            }
            if let outcome { return outcome }
            if signal.wait(until: deadline) == .timedOut {
                return shared.withLock { s in s.ring.read(samplesPerChannel: n).map { .chunk($0) } } ?? .timeout
            }
        }
    }

    /// Makes a waiting or later `read` return `.interrupted` (any thread).
    public func interrupt() {
        shared.withLock { $0.interrupted = true }
        signal.signal()
    }

    // MARK: - Setup

    private func connect() throws {
        // stream.capture.sink: capture a sink's monitor, not a source (PipeWire's
        // pw-stream property; WirePlumber links it to the default sink and
        // follows the default). media.role Music keeps role-based policies out of the way.
        // node.latency 960/48000: one 20 ms Opus frame per graph cycle. The graph
        // runs at the smallest latency any node asks for, so asking for less would
        // tighten every client's cycle (players' too) for little gain.
        let me = Unmanaged.passUnretained(self).toOpaque()
        let created = pw.create(core: connection.core, name: "castd-audio",
                                properties: "media.type=Audio media.category=Capture media.role=Music stream.capture.sink=true node.name=castd-audio app.name=castd node.latency=960/48000",
                                userData: me) { events in
            events.state_changed = { data, _, new, error in
                PipeWireAudioSource.borrow(data) { $0.stateChanged(new, error: error.map { String(cString: $0) }) }
            }
            events.param_changed = { data, id, param in
                PipeWireAudioSource.borrow(data) { $0.paramChanged(id, param) }
            }
            events.process = { data in
                PipeWireAudioSource.borrow(data) { $0.process() }
            }
        }
        guard created != nil else {
            throw CastError.posix(.capture) { "PipeWire: cannot create the audio stream (\($0))" }
        }

        registry.listen(core: connection.core, userData: me) { events in
            events.global = { data, id, _, type, _, props in
                guard let type else { return }
                PipeWireAudioSource.borrow(data) { $0.global(id: id, type: String(cString: type), props: props) }
            }
            events.global_remove = { data, id in
                PipeWireAudioSource.borrow(data) { $0.globalRemoved(id: id) }
            }
        }
        coreEvents.pointee.version = UInt32(PW_VERSION_CORE_EVENTS)
        coreEvents.pointee.done = { data, id, seq in
            guard id == 0 else { return }   // PW_ID_CORE
            PipeWireAudioSource.borrow(data) { $0.coreDone(seq: seq) }
        }
        _ = castd_pw_core_add_listener(connection.core, coreHook, coreEvents, me)
        syncSeq = castd_pw_core_sync(connection.core, 0)

        var params = PodList()
        defer { params.free() }
        let channels = UInt32(options.channels)
        params.add { castd_pw_audio_format($0, $1, SPA_PARAM_EnumFormat.rawValue, SPA_AUDIO_FORMAT_F32.rawValue,
                                           UInt32(Self.sampleRate), channels) }
        // Not RT_PROCESS: the callback runs on the loop thread, like video's, and takes a lock.
        let flags = pw_stream_flags(PW_STREAM_FLAG_AUTOCONNECT.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue)
        let r = pw.connect(SPA_DIRECTION_INPUT, target: UInt32.max, flags: flags, params: params)
        guard r >= 0 else {
            throw CastError.posix(.capture, errno: -r) { "PipeWire: cannot connect the audio stream (\($0))" }
        }
    }

    /// Blocks until a format is agreed (the monitor is linked), or fails with a sentence.
    private func waitUntilLinked(timeout: Duration) throws {
        let deadline = SystemMonotonicClock().now() + timeout
        while true {
            let s = shared.withLock { s in (s.failure, s.negotiated, s.registrySynced, s.sinks.isEmpty, s.streamState) }
            if let f = s.0 { throw CastError(.capture, f) }
            if s.1 { return }
            // The registry listed everything and no sink is among it: nothing to wait for.
            if s.2 && s.3 { throw Self.noSink }
            if signal.wait(until: deadline) == .timedOut {
                let s = shared.withLock { s in (s.negotiated, s.sinks.isEmpty, s.streamState) }
                if s.0 { return }
                if s.1 { throw Self.noSink }
                throw CastError(.audioUnavailable, "no audio: PipeWire did not link castd's audio stream to the default sink's monitor within \(timeout) (stream \(s.2)); is a session manager (WirePlumber) running?")
            }
        }
    }

    static let noSink = CastError(.audioUnavailable, "no audio: PipeWire has no audio sink in this session (nothing could play sound), so castd sends video only")

    /// Leaves the graph and frees everything: the loop thread is stopped first (so no
    /// callback runs after it), then the stream, the registry and the connection go.
    /// Idempotent; owners call it from their own thread when they are done (`deinit`
    /// does it too). Not from a PipeWire callback.
    public func close() {
        guard let connection else {
            freeCells()
            return
        }
        // On the loop's own thread nothing can be stopped: freeing now would pull the
        // tables from under the stream. Leave it to the owner's call.
        guard !pw_thread_loop_in_thread(connection.loop) else { return }
        connection.shutDown {
            pw.destroy()
            registry.destroy()
            spa_hook_remove(coreHook)
        }
        self.connection = nil
        freeCells()
    }

    private var cellsFreed = false
    private func freeCells() {
        guard !cellsFreed else { return }
        cellsFreed = true
        pw.deallocate()
        registry.deallocate()
        coreHook.deallocate()
        coreEvents.deallocate()
    }

    // MARK: - PipeWire thread

    private func fail(_ message: String) {
        shared.withLock { if $0.failure == nil { $0.failure = message } }
        signal.signal()
    }

    private func coreDone(seq: Int32) {
        guard seq == syncSeq else { return }
        shared.withLock { $0.registrySynced = true }
        signal.signal()
    }

    private func stateChanged(_ new: pw_stream_state, error: String?) {
        let name = String(cString: pw_stream_state_as_string(new))
        let node = stream.map { pw_stream_get_node_id($0) }
        shared.withLock { s in
            s.streamState = name
            if let node, node != UInt32.max { s.ourNode = node }
        }
        if new == PW_STREAM_STATE_ERROR {
            fail("PipeWire: the audio capture stream failed: \(error ?? "no reason given")")
        }
        updateSink()
        signal.signal()
    }

    private func paramChanged(_ id: UInt32, _ param: UnsafePointer<spa_pod>?) {
        guard id == SPA_PARAM_Format.rawValue, let param else { return }
        var format: UInt32 = 0, rate: UInt32 = 0, channels: UInt32 = 0
        let r = castd_pw_parse_audio_format(param, &format, &rate, &channels)
        guard r == 0, format == SPA_AUDIO_FORMAT_F32.rawValue, rate == UInt32(Self.sampleRate),
              channels == UInt32(options.channels) else {
            fail("PipeWire: the audio stream was offered a format castd did not ask for (error \(r), format \(format), \(rate) Hz, \(channels) channels); castd reads 48 kHz F32 with \(options.channels) channels")
            return
        }
        shared.withLock { $0.negotiated = true }
        signal.signal()
    }

    private func global(id: UInt32, type: String, props: UnsafePointer<spa_dict>?) {
        func prop(_ key: String) -> String? { castd_pw_dict_get(props, key).map { String(cString: $0) } }
        if type == "PipeWire:Interface:Node", prop("media.class") == "Audio/Sink" {
            let name = prop("node.description") ?? prop("node.name") ?? "node \(id)"
            shared.withLock { $0.sinks[id] = name }
        } else if type == "PipeWire:Interface:Link",
                  let out = prop("link.output.node").flatMap({ UInt32($0) }),
                  let inp = prop("link.input.node").flatMap({ UInt32($0) }) {
            shared.withLock { $0.links[id] = (out, inp) }
        } else {
            return
        }
        updateSink()
        signal.signal()
    }

    private func globalRemoved(id: UInt32) {
        shared.withLock { s in
            s.sinks[id] = nil
            s.links[id] = nil
        }
        updateSink()
    }

    /// Finds the sink linked into our node; reports a change once it has one.
    private func updateSink() {
        let changed = shared.withLock { s -> String? in
            guard let ours = s.ourNode else { return nil }
            let sink = s.links.values.first { $0.input == ours && s.sinks[$0.output] != nil }?.output
            guard let sink, sink != s.currentSink else { return nil }
            let was = s.currentSink
            s.currentSink = sink
            if was != nil { s.sinkChanges += 1 }
            return s.sinks[sink]
        }
        if let changed { onSinkChange(changed) }
    }

    private func process() {
        guard let stream else { return }
        let started = clock.now()
        // Every buffer, in order (audio is a stream; unlike video, none may be skipped here).
        var buffers: [(UnsafeMutablePointer<pw_buffer>, UnsafeBufferPointer<Float>)] = []
        var total = 0
        while let b = pw_stream_dequeue_buffer(stream) {
            var samples = UnsafeBufferPointer<Float>(start: nil, count: 0)
            if let buf = b.pointee.buffer, buf.pointee.n_datas >= 1, let datas = buf.pointee.datas {
                let d = datas[0]
                if let data = d.data, let chunk = d.chunk {
                    let maxSize = Int(d.maxsize)
                    let offset = maxSize > 0 ? Int(chunk.pointee.offset) % maxSize : 0
                    let size = min(Int(chunk.pointee.size), maxSize - offset)
                    if size > 0, chunk.pointee.flags & Int32(SPA_CHUNK_FLAG_CORRUPTED) == 0 {
                        let floats = (data + offset).bindMemory(to: Float.self, capacity: size / 4)
                        samples = UnsafeBufferPointer(start: floats, count: size / 4)
                    }
                }
            }
            buffers.append((b, samples))
            total += samples.count / options.channels
        }
        guard !buffers.isEmpty else { return }
        // The newest sample left the sink when this graph cycle started (pw_time.now,
        // CLOCK_MONOTONIC), earlier ones by their duration before. The cycle's
        // start, not this callback's, so a late callback does not shift the timeline
        // (seen under load: callbacks 5 to 10 ms late). The sink's own latency to
        // the device is not subtracted: it is the same for every sample.
        var t = pw_time()
        var end = started
        if pw_stream_get_time_n(stream, &t, MemoryLayout<pw_time>.size) == 0, t.now > 0 {
            let age = SystemMonotonicClock().now().nanoseconds - t.now
            if (0...100_000_000).contains(age) { end = started - .nanoseconds(age) }
        }
        var remaining = total
        shared.withLock { s in
            for (_, samples) in buffers where samples.count > 0 {
                let frames = samples.count / options.channels
                let t = end - .nanoseconds(Int64(remaining) * 1_000_000_000 / Int64(Self.sampleRate))
                s.ring.write(samples, captureTime: t)
                remaining -= frames
            }
        }
        for (b, _) in buffers { pw_stream_queue_buffer(stream, b) }
        let took = (clock.now() - started).totalNanoseconds
        shared.withLock { s in
            s.callbacks += 1
            if s.processNanos.count >= 4096 { s.processNanos.removeFirst(1024) }
            s.processNanos.append(took)
        }
        signal.signal()
    }
}
