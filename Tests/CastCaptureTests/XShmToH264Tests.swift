// The X11 path end to end: Xvfb → XShmSource → Scaler → EncoderChain (x264)
// → Annex-B file → ffmpeg → PSNR against the pattern. CastCaptureTests declares
// CastEncode in Package.swift; no `#if canImport` here, so that losing that
// dependency fails the build instead of quietly compiling the test away.
import Testing
import Foundation
import CastCore
import CastMedia
import CastEncode
@testable import CastCapture

@Suite(.serialized, .enabled(if: XvfbServer.installed, "Xvfb is not installed (apt install xvfb); the XShm capture tests need an X server"))
struct XShmToH264Tests {
    /// PSNR over all three planes of two equally sized 4:2:0 pictures.
    static func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
        precondition(a.count == b.count)
        var se = 0.0
        for i in a.indices {
            let d = Double(Int(a[i]) - Int(b[i]))
            se += d * d
        }
        let mse = se / Double(a.count)
        return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }

    static func ffmpeg(_ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = ["-v", "error", "-y"] + args
        let err = Pipe()
        p.standardError = err
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        if p.terminationStatus != 0 { throw CastError(.io, "ffmpeg failed: \(text)") }
        return text
    }

    /// 35 dB is "visually lossless" territory for 8-bit video; flat colour bars at 4 Mbps land far above it.
    static let minimumPSNR = 35.0

    @Test(arguments: [(1920, 1080), (2560, 1440)])
    func patternSurvivesCaptureScaleEncodeDecode(screen: (Int, Int)) throws {
        let screenSize = FrameSize(width: screen.0, height: screen.1)
        let x = try XvfbServer(width: screenSize.width, height: screenSize.height)
        defer { x.stop() }
        TestPattern.paint(display: x.display, size: screenSize)
        let source = try XShmSource(options: .init(display: x.display, cursor: false))
        #expect(source.size == screenSize)
        let config = EncoderConfig(caps: .default, captured: source.size)
        #expect(config.size == FrameSize(width: 1920, height: 1080))
        #expect(config.bitrate == 4_000_000)
        let scaler = config.size == source.size ? nil : Scaler(from: source.size, to: config.size)
        let scaled = MemorySlot(capacity: config.size.pixelCount * 4)
        var logs: [LogLine] = []
        let chain = EncoderChain(preference: .x264, config: config, log: { logs.append($0) })
        try chain.start()
        #expect(chain.current?.kind == .x264)

        var stream: [UInt8] = []
        let frames = 3
        for i in 0..<frames {
            // Forced reads: the screen is static, so these are the pacer's refreshes.
            guard case .frame = source.capture(onlyIfChanged: false) else { Issue.record("capture \(i) failed"); return }
            let read = try #require(source.ring.takeNewest())
            var frame = read.frame
            var pixels = UnsafeRawPointer(read.slot.bytes)
            if let scaler {
                scaler.scale(read.slot.bytes, srcStride: frame.stride, into: scaled.bytes, dstStride: config.size.width * 4)
                frame.size = config.size
                frame.stride = config.size.width * 4
                pixels = UnsafeRawPointer(scaled.bytes)
            }
            let au = try #require(try chain.encode(pixels: pixels, frame: frame))
            source.ring.finishRead(read)
            #expect(au.isKeyframe == (i == 0))
            #expect(au.pts == read.frame.captureTime)
            stream += au.bytes
        }

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("castd-xshm-\(getpid())-\(screen.0)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h264 = dir.appendingPathComponent("capture.h264"), yuv = dir.appendingPathComponent("decoded.yuv")
        try Data(stream).write(to: h264)
        _ = try Self.ffmpeg(["-f", "h264", "-i", h264.path, "-f", "rawvideo", "-pix_fmt", "yuv420p", yuv.path])
        let decoded = [UInt8](try Data(contentsOf: yuv))
        let frameBytes = config.size.pixelCount * 3 / 2
        #expect(decoded.count == frames * frameBytes)

        // What the decoder should show: the pattern drawn at the encoded size, converted.
        let ideal = MemorySlot(capacity: config.size.pixelCount * 4)
        for y in 0..<config.size.height {
            for x in 0..<config.size.width {
                let (r, g, b) = TestPattern.colour(x: x, y: y, size: config.size)
                ideal.bytes.storeBytes(of: UInt32(r) << 16 | UInt32(g) << 8 | UInt32(b), toByteOffset: 4 * (y * config.size.width + x), as: UInt32.self)
            }
        }
        let expected = PlanarImage(format: .i420, size: config.size)
        PixelConverter.convert(from: ideal.bytes, format: .bgrx, size: config.size, stride: config.size.width * 4, to: expected)
        let last = Array(decoded[(frames - 1) * frameBytes..<frames * frameBytes])
        let value = Self.psnr(last, expected.packedBytes())
        #expect(value >= Self.minimumPSNR, "PSNR \(value) dB at \(screenSize) → \(config.size)")
        print("castd-measure xshm-x264 screen=\(screenSize) encoded=\(config.size) bytes=\(stream.count) psnr_db=\(String(format: "%.2f", value))")
    }
}
