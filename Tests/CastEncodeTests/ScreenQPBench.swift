import Foundation
import Testing
import CastCore
import CastMedia
@testable import CastEncode

/// castd's X264Encoder on recorded screen content: reads raw yuv420p frames
/// (BT.709 limited range) from CASTD_QP_YUV (CASTD_QP_SIZE, default 1920x1080,
/// taken as 30 fps), encodes them at CASTD_QP_KBPS (default 8000) with x264's minimum
/// QP CASTD_QP_MIN (default: castd's), and writes the Annex-B stream to CASTD_QP_OUT.
/// A measuring tool for docs/quality.md, not a test.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["CASTD_QP_YUV"] != nil, "a measuring tool: set CASTD_QP_YUV"))
struct ScreenQPBench {
    @Test func encodeRecordedFrames() throws {
        let env = ProcessInfo.processInfo.environment
        let dims = (env["CASTD_QP_SIZE"] ?? "1920x1080").split(separator: "x").compactMap { Int($0) }
        let size = FrameSize(width: dims[0], height: dims[1])
        let kbps = env["CASTD_QP_KBPS"].flatMap { Int($0) } ?? 8000
        let input = try #require(FileHandle(forReadingAtPath: env["CASTD_QP_YUV"]!))
        let enc = try X264Encoder(config: EncoderConfig(size: size, frameRate: 30, bitrate: kbps * 1000),
                                  minimumQP: env["CASTD_QP_MIN"].flatMap { Int($0) } ?? X264Encoder.defaultMinimumQP)
        let image = PlanarImage(format: .i420, size: size)
        let frameBytes = size.pixelCount * 3 / 2
        var out = Data(), n: Int64 = 0
        while let frame = try input.read(upToCount: frameBytes), frame.count == frameBytes {
            frame.withUnsafeBytes { src in
                var offset = 0
                for plane in 0..<3 {
                    let w = plane == 0 ? size.width : size.width / 2, h = plane == 0 ? size.height : size.height / 2
                    for y in 0..<h { memcpy(image.plane(plane) + y * image.strides[plane], src.baseAddress! + offset + y * w, w) }
                    offset += w * h
                }
            }
            if let au = try enc.encode(image, pts: Instant(nanoseconds: n * 33_333_333)) { out.append(contentsOf: au.bytes) }
            n += 1
        }
        try out.write(to: URL(fileURLWithPath: env["CASTD_QP_OUT"] ?? "/tmp/castd-qp.h264"))
    }
}
