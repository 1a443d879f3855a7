import Foundation
import CastMedia

/// Test-side H.264 helpers, independent of the code under test.
enum AnnexB {
    /// NAL units split at 3- and 4-byte start codes (H.264 Annex B.1).
    static func nalUnits(_ b: [UInt8]) -> [[UInt8]] {
        var starts: [(at: Int, len: Int)] = []
        var i = 0
        while i + 2 < b.count {
            if b[i] == 0 && b[i + 1] == 0 && b[i + 2] == 1 {
                let four = i > 0 && b[i - 1] == 0
                starts.append((four ? i - 1 : i, four ? 4 : 3))
                i += 3
            } else {
                i += 1
            }
        }
        return starts.enumerated().map { k, s in
            let end = k + 1 < starts.count ? starts[k + 1].at : b.count
            return Array(b[(s.at + s.len)..<end])
        }
    }

    static func types(_ b: [UInt8]) -> [UInt8] { nalUnits(b).map { $0[0] & 0x1f } }
}

/// Busy synthetic frames for rate-control tests: scrolling 8×8 blocks of
/// random grey with low-amplitude noise, made from a precomputed source
/// with row copies (fast even in debug builds).
final class BusyFrames {
    let size: FrameSize
    private let source: [UInt8]  // (width + 256) × (height + 256) luma
    private let sw: Int

    init(size: FrameSize) {
        self.size = size
        sw = size.width + 256
        let sh = size.height + 256
        var s = [UInt8](repeating: 0, count: sw * sh)
        var r: UInt32 = 0x9e37_79b9
        func next() -> UInt32 { r ^= r << 13; r ^= r >> 17; r ^= r << 5; return r }
        var blocks = [UInt8](repeating: 0, count: (sw / 8 + 1) * (sh / 8 + 1))
        for i in blocks.indices { blocks[i] = UInt8(next() % 200 + 28) }
        for y in 0..<sh {
            for x in 0..<sw {
                let base = Int(blocks[(y / 8) * (sw / 8 + 1) + x / 8])
                s[y * sw + x] = UInt8(base + Int(next() % 24) - 12)
            }
        }
        source = s
    }

    /// Frame `n` into an I420 image: the block field scrolled diagonally, flat chroma.
    func fill(_ img: PlanarImage, frame n: Int) {
        let dx = (n * 7) % 256, dy = (n * 3) % 256
        source.withUnsafeBufferPointer { src in
            for y in 0..<size.height {
                memcpy(img.plane(0) + y * img.strides[0], src.baseAddress! + (y + dy) * sw + dx, size.width)
            }
        }
        for p in 1...2 {
            for y in 0..<(size.height / 2) { memset(img.plane(p) + y * img.strides[p], Int32(100 + 20 * p + n % 5), size.width / 2) }
        }
    }
}
