import Glibc
import Testing
import Synchronization
import CastCore
import CastMedia
@testable import CastEncode

/// A stand-in for a hardware encoder: counts frames, fails on command.
final class FakeEncoder: VideoEncoder {
    let kind: EncoderKind
    let inputFormat: PixelFormat
    let config: EncoderConfig
    let failOnFrame: Int?
    var frames = 0
    var keyframePending = false
    var lastLuma: UInt8 = 0

    init(kind: EncoderKind, format: PixelFormat, config: EncoderConfig, failOnFrame: Int?) {
        self.kind = kind
        inputFormat = format
        self.config = config
        self.failOnFrame = failOnFrame
    }

    func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit? {
        if frames == failOnFrame { throw CastError(.encoder, "fake \(kind): GPU hung") }
        frames += 1
        lastLuma = image.plane(0)[0]
        defer { keyframePending = false }
        return EncodedAccessUnit(bytes: [0, 0, 0, 1, keyframePending ? 0x65 : 0x41], isKeyframe: keyframePending, pts: pts)
    }
    func requestKeyframe() { keyframePending = true }
    func setBitrate(_ bitsPerSecond: Int) throws {}
    func setFrameRate(_ framesPerSecond: Int) throws {}
}

final class LogLines: Sendable {
    let lines = Mutex<[LogLine]>([])
    func append(_ l: LogLine) { lines.withLock { $0.append(l) } }
    var all: [LogLine] { lines.withLock { $0 } }
}

@Suite struct EncoderChainTests {
    let config = EncoderConfig(size: FrameSize(width: 64, height: 32), frameRate: 30, bitrate: 1_000_000)

    func whiteFrame(_ n: Int) -> (MemorySlot, Frame) {
        let slot = MemorySlot(capacity: 64 * 4 * 32)
        slot.bytes.initializeMemory(as: UInt8.self, repeating: 255, count: 64 * 4 * 32)
        return (slot, Frame(format: .bgrx, size: config.size, stride: 256, captureTime: Instant(nanoseconds: Int64(n))))
    }

    @Test func autoFallsBackToX264WhenVaapiFailsAtStart() throws {
        let log = LogLines()
        let table = [
            EncoderCandidate(kind: .vaapi) { _ in throw CastError(.encoderUnavailable, "VA-API: no DRM render node") },
            EncoderCandidate(kind: .x264) { try X264Encoder(config: $0) },
        ]
        let chain = EncoderChain(preference: .auto, config: config, table: table, log: log.append)
        try chain.start()
        #expect(chain.current?.kind == .x264)
        #expect(log.all.first == LogLine(.info, "encoder_unavailable", [("kind", "vaapi"), ("reason", "VA-API: no DRM render node")]))
        #expect(log.all.dropFirst().first == LogLine(.info, "encoder_started", [
            ("kind", "x264"), ("codec", "h264"), ("size", "64x32"), ("fps", 30), ("bitrate", 1_000_000), ("fell_back_from", "vaapi")]))
        let (slot, frame) = whiteFrame(7)
        let au = try #require(try chain.encode(pixels: slot.bytes, frame: frame))
        #expect(au.isKeyframe)
        #expect(au.pts == Instant(nanoseconds: 7))
        #expect(AnnexB.types(au.bytes).prefix(2) == [7, 8])
    }

    @Test func midStreamFailureSwitchesWithAnIdrOnTheSameFrameAndLogsOnce() throws {
        let log = LogLines()
        let table = [
            EncoderCandidate(kind: .vaapi) { [config] _ in FakeEncoder(kind: .vaapi, format: .nv12, config: config, failOnFrame: 3) },
            EncoderCandidate(kind: .x264) { [config] _ in FakeEncoder(kind: .x264, format: .i420, config: config, failOnFrame: nil) },
        ]
        let chain = EncoderChain(preference: .auto, config: config, table: table, log: log.append)
        try chain.start()
        var aus: [EncodedAccessUnit] = []
        for n in 0..<6 {
            let (slot, frame) = whiteFrame(n)
            aus.append(try #require(try chain.encode(pixels: slot.bytes, frame: frame)))
        }
        #expect(aus.map(\.isKeyframe) == [true, false, false, true, false, false])
        #expect(aus.map(\.pts.nanoseconds) == [0, 1, 2, 3, 4, 5])  // no frame lost, stream goes on
        #expect(chain.current?.kind == .x264)
        #expect(chain.current?.inputFormat == .i420)
        #expect(chain.fallbacks == 1)
        #expect(log.all.filter { $0.event == "encoder_fallback" } ==
                [LogLine(.warning, "encoder_fallback", [("from", "vaapi"), ("to", "x264"), ("reason", "fake vaapi: GPU hung")])])
        // The replacement got the converted picture (white → Y 235), in its own format.
        #expect((chain.current as? FakeEncoder)?.lastLuma == 235)
    }

    /// Issue 19: with no row left to fall back to, the capture slot is handed back once the
    /// pixels are converted, before the (slow) encode; with a fallback row left, only after
    /// the encode, since a failure re-converts the same pixels for the next row.
    @Test func pixelsAreLetGoOnceRightAfterConversionWhenNoFallbackIsLeft() throws {
        final class Probe: @unchecked Sendable { var calls = 0; var callsSeenByEncoder: [Int] = [] }
        final class WatchingEncoder: VideoEncoder {
            let kind = EncoderKind.x264
            let inputFormat = PixelFormat.i420
            let config: EncoderConfig
            let probe: Probe
            let fail: Bool
            init(config: EncoderConfig, probe: Probe, fail: Bool) { self.config = config; self.probe = probe; self.fail = fail }
            func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit? {
                probe.callsSeenByEncoder.append(probe.calls)
                if fail { throw CastError(.encoder, "fake: broken") }
                return EncodedAccessUnit(bytes: [0, 0, 0, 1, 0x65], isKeyframe: true, pts: pts)
            }
            func requestKeyframe() {}
            func setBitrate(_ bitsPerSecond: Int) throws {}
            func setFrameRate(_ framesPerSecond: Int) throws {}
        }
        let (slot, frame) = whiteFrame(1)
        // Last row: let go before the encoder runs.
        let last = Probe()
        let alone = EncoderChain(preference: .auto, config: config, table: [
            EncoderCandidate(kind: .x264) { [config] _ in WatchingEncoder(config: config, probe: last, fail: false) }],
                                 log: { _ in })
        try alone.start()
        _ = try alone.encode(pixels: slot.bytes, frame: frame) { last.calls += 1 }
        #expect(last.callsSeenByEncoder == [1])
        #expect(last.calls == 1)
        // A row left behind this one: the pixels stay held through the encode.
        let first = Probe()
        let chained = EncoderChain(preference: .auto, config: config, table: [
            EncoderCandidate(kind: .vaapi) { [config] _ in FakeEncoder(kind: .vaapi, format: .nv12, config: config, failOnFrame: nil) },
            EncoderCandidate(kind: .x264) { [config] _ in WatchingEncoder(config: config, probe: first, fail: false) }],
                                   log: { _ in })
        try chained.start()
        _ = try chained.encode(pixels: slot.bytes, frame: frame) { first.calls += 1 }
        #expect(first.calls == 1)
        #expect(first.callsSeenByEncoder.isEmpty)   // the vaapi row encoded it
        // The last row failing: let go once, and the error still comes out.
        let failing = Probe()
        let broken = EncoderChain(preference: .auto, config: config, table: [
            EncoderCandidate(kind: .x264) { [config] _ in WatchingEncoder(config: config, probe: failing, fail: true) }],
                                  log: { _ in })
        try broken.start()
        #expect(throws: CastError.self) { _ = try broken.encode(pixels: slot.bytes, frame: frame) { failing.calls += 1 } }
        #expect(failing.calls == 1)
        #expect(failing.callsSeenByEncoder == [1])
    }

    @Test func explicitVaapiDoesNotFallBack() {
        let table = [
            EncoderCandidate(kind: .vaapi) { _ in throw CastError(.encoderUnavailable, "VA-API: no DRM render node") },
            EncoderCandidate(kind: .x264) { try X264Encoder(config: $0) },
        ]
        let chain = EncoderChain(preference: .vaapi, config: config, table: table, log: { _ in })
        #expect { try chain.start() } throws: {
            ($0 as? CastError)?.code == .encoderUnavailable && "\($0)" ==
                "--encoder vaapi allows only VA-API, which cannot encode here: VA-API: no DRM render node. Use --encoder auto to fall back to x264."
        }
        #expect(chain.current == nil)
    }

    @Test func explicitX264SkipsVaapiEntirely() throws {
        let opened = Mutex<[EncoderKind]>([])
        let table = [
            EncoderCandidate(kind: .vaapi) { c in opened.withLock { $0.append(.vaapi) }; return try X264Encoder(config: c) },
            EncoderCandidate(kind: .x264) { c in opened.withLock { $0.append(.x264) }; return try X264Encoder(config: c) },
        ]
        let chain = EncoderChain(preference: .x264, config: config, table: table, log: { _ in })
        try chain.start()
        #expect(opened.withLock { $0 } == [.x264])
    }

    @Test func standardTableOnThisMachineEndsOnX264WithTheVaapiReason() throws {
        let log = LogLines()
        let chain = EncoderChain(preference: .auto, config: config, log: log.append)
        try chain.start()
        #expect(EncoderChain.standardTable.map(\.kind) == [.vaapi, .x264])
        if !VAAPIProbe.run().available {
            #expect(chain.current?.kind == .x264)
            let first = try #require(log.all.first)
            #expect(first.event == "encoder_unavailable" && first["kind"] == "vaapi")
            #expect(first["reason"]?.hasPrefix("VA-API:") == true)
        }
    }
}

@Suite struct VAAPIProbeTests {
    @Test func noRenderNodeFailsCleanlyWithASentence() throws {
        let probe = VAAPIProbe.run(directory: "/nonexistent-castd-dri")
        #expect(probe.nodes.isEmpty)
        #expect(!probe.available)
        #expect(probe.summary ==
                "VA-API: no DRM render node (/dev/dri/renderD*) on this machine, so no hardware encoder; using x264")
        #expect { try VAAPIEncoder(config: EncoderConfig(size: FrameSize(width: 64, height: 64), frameRate: 30, bitrate: 1_000_000), probe: probe) }
            throws: { ($0 as? CastError)?.code == .encoderUnavailable && "\($0)" == probe.unavailableReason }
        #expect(probe.unavailableReason == "VA-API: no DRM render node (/dev/dri/renderD*) on this machine, so no hardware encoder")
    }

    @Test func aNodeWithMainOnlyIsNotUsableBecauseReceiversWereOfferedConstrainedBaseline() {
        var probe = VAAPIProbe(nodes: [VAAPIProbe.Node(path: "/dev/dri/renderD128", driver: "d", h264Encode: ["Main/EncSlice"],
                                                       problem: "H.264 encode only as Main/EncSlice, no Constrained Baseline")])
        #expect(!probe.available)
        #expect(probe.summary == "VA-API: no usable H.264 encoder — /dev/dri/renderD128: H.264 encode only as Main/EncSlice, "
                + "no Constrained Baseline (driver d); using x264")
        probe.nodes.append(VAAPIProbe.Node(path: "/dev/dri/renderD129", driver: "e",
                                           h264Encode: ["ConstrainedBaseline/EncSlice"], problem: nil))
        #expect(probe.usable?.path == "/dev/dri/renderD129")
    }

    @Test func thisMachineHasNoDriNode() {
        // The build machines have no GPU (docs/encoding.md). Where one exists this pins the path format.
        let nodes = VAAPIProbe.renderNodes()
        #expect(nodes.allSatisfy { $0.hasPrefix("/dev/dri/renderD") })
        if nodes.isEmpty { #expect(!VAAPIProbe.run().available) }
    }

    @Test func aNodeThatIsNotADrmDeviceIsReportedNotTrusted() throws {
        // A regular file named like a render node: libva must refuse it, and the probe must say why.
        let dir = "/tmp/castd-fake-dri-\(getpid())"
        mkdir(dir, 0o700)
        defer { unlink(dir + "/renderD128"); rmdir(dir) }
        let fd = open(dir + "/renderD128", O_CREAT | O_WRONLY, 0o600)
        close(fd)
        let probe = VAAPIProbe.run(directory: dir)
        #expect(probe.nodes.map(\.path) == [dir + "/renderD128"])
        #expect(!probe.available)
        #expect(probe.nodes[0].problem != nil)
        #expect(probe.summary.hasPrefix("VA-API: no usable H.264 encoder — \(dir)/renderD128: "))
    }
}
