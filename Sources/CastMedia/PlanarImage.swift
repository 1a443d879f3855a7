/// A 4:2:0 picture an encoder reads: I420 (Y, U, V planes) for x264, NV12
/// (Y plane, interleaved UV plane) for VA-API. Width and height are even
/// (`CaptureCaps.targetSize` guarantees it). One owner; it frees its memory.
public final class PlanarImage {
    public let format: PixelFormat
    public let size: FrameSize
    /// Row strides of the planes: I420 has 3, NV12 has 2.
    public let strides: [Int]
    /// Byte offsets of the planes in `bytes`.
    public let offsets: [Int]
    public let bytes: UnsafeMutableRawPointer
    public let byteCount: Int

    public init(format: PixelFormat, size: FrameSize) {
        precondition(format == .i420 || format == .nv12, "PlanarImage holds I420 or NV12")
        precondition(size.width > 0 && size.height > 0 && size.width % 2 == 0 && size.height % 2 == 0,
                     "4:2:0 needs even dimensions, got \(size)")
        self.format = format
        self.size = size
        // Strides rounded up to 64 bytes: aligned rows for SIMD stores and x264's loads.
        let yStride = (size.width + 63) & ~63
        let cHeight = size.height / 2
        switch format {
        case .i420:
            let cStride = (size.width / 2 + 63) & ~63
            strides = [yStride, cStride, cStride]
            offsets = [0, yStride * size.height, yStride * size.height + cStride * cHeight]
            byteCount = yStride * size.height + 2 * cStride * cHeight
        default:
            strides = [yStride, yStride]
            offsets = [0, yStride * size.height]
            byteCount = yStride * size.height + yStride * cHeight
        }
        bytes = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 64)
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount)
    }

    deinit { bytes.deallocate() }

    public func plane(_ i: Int) -> UnsafeMutablePointer<UInt8> {
        (bytes + offsets[i]).assumingMemoryBound(to: UInt8.self)
    }

    /// The planes' visible bytes, tightly packed (what ffmpeg's rawvideo yuv420p/nv12 is), for tests.
    public func packedBytes() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(size.pixelCount * 3 / 2)
        let rows: [(plane: Int, width: Int, height: Int)]
        if format == .i420 {
            rows = [(0, size.width, size.height), (1, size.width / 2, size.height / 2), (2, size.width / 2, size.height / 2)]
        } else {
            rows = [(0, size.width, size.height), (1, size.width, size.height / 2)]
        }
        for r in rows {
            let p = plane(r.plane)
            for y in 0..<r.height {
                out.append(contentsOf: UnsafeBufferPointer(start: p + y * strides[r.plane], count: r.width))
            }
        }
        return out
    }
}
