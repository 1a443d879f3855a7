import CastMedia
import CPipeWire

/// A cursor image from PipeWire metadata, still in the producer's buffer.
struct CursorBitmap {
    static let formatBGRA = SPA_VIDEO_FORMAT_BGRA.rawValue
    var format: UInt32
    var width: Int
    var height: Int
    var stride: Int
    var bytes: UnsafePointer<UInt8>

    /// Premultiplied ARGB words (what `CursorOverlay` draws), or nil for a format castd does not read.
    /// Compositors hand premultiplied pixels (Mutter's come from premultiplied textures).
    func argb() -> [UInt32]? {
        // Byte positions of (r, g, b, a) in one pixel.
        let order: (Int, Int, Int, Int)
        switch format {
        case SPA_VIDEO_FORMAT_BGRA.rawValue: order = (2, 1, 0, 3)
        case SPA_VIDEO_FORMAT_RGBA.rawValue: order = (0, 1, 2, 3)
        case SPA_VIDEO_FORMAT_ARGB.rawValue: order = (1, 2, 3, 0)
        case SPA_VIDEO_FORMAT_ABGR.rawValue: order = (3, 2, 1, 0)
        default: return nil
        }
        var out = [UInt32](repeating: 0, count: width * height)
        for y in 0..<height {
            let row = bytes + y * stride
            for x in 0..<width {
                let p = row + 4 * x
                out[y * width + x] = UInt32(p[order.3]) << 24 | UInt32(p[order.0]) << 16
                    | UInt32(p[order.1]) << 8 | UInt32(p[order.2])
            }
        }
        return out
    }
}

/// The metadata bookkeeping of the PipeWire process callback, kept apart from
/// the buffers so it can be tested: the cursor (bitmaps arrive only when the
/// shape changes), its damage (moving it changes two places), and the damage
/// of dropped frames that the next published frame must carry.
struct PipeWireFrameAssembler {
    static let maxDamageRects = 16

    struct CursorUpdate {
        var x: Int, y: Int, hotX: Int, hotY: Int
        var bitmap: CursorBitmap?
    }

    var cursorEnabled = true
    /// The cursor as last drawn (frame coordinates), for its damage.
    private(set) var cursor: CursorOverlay? = nil
    private var drawnRect: FrameRect? = nil
    private var cursorPixels: (width: Int, height: Int, pixels: [UInt32])? = nil
    /// Damage of frames not published yet: nil means unknown (everything).
    private var carried: [FrameRect]? = []
    private var first = true

    private mutating func apply(_ u: CursorUpdate?) {
        guard cursorEnabled, let u else { return }
        if let b = u.bitmap, let px = b.argb() { cursorPixels = (b.width, b.height, px) }
        guard let p = cursorPixels else { return }
        cursor = CursorOverlay(x: u.x - u.hotX, y: u.y - u.hotY, width: p.width, height: p.height, pixels: p.pixels)
    }

    private mutating func carry(_ damage: [FrameRect]?, size: FrameSize) {
        guard let d = damage else {
            carried = nil
            return
        }
        if carried != nil { carried! += d.compactMap { Self.clip($0, to: size) } }
    }

    /// The part of `r` inside a frame of `size`, nil when none.
    static func clip(_ r: FrameRect, to size: FrameSize) -> FrameRect? {
        let x0 = max(0, r.x), y0 = max(0, r.y)
        let x1 = min(size.width, r.x + r.width), y1 = min(size.height, r.y + r.height)
        return x0 < x1 && y0 < y1 ? FrameRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : nil
    }

    /// A buffer with only metadata: remember the cursor; its damage waits for the next frame.
    mutating func noteMetadataOnly(cursor u: CursorUpdate?, damage: [FrameRect]?, size: FrameSize) {
        apply(u)
        carry(damage ?? [], size: size)
    }

    /// A frame the ring had no room for.
    mutating func noteDropped(cursor u: CursorUpdate?, damage: [FrameRect]?, size: FrameSize) {
        apply(u)
        carry(damage, size: size)
    }

    /// A frame about to be published: draws the cursor into `pixels` and returns
    /// the frame's damage (nil for the first frame or when unknown).
    mutating func finish(cursor u: CursorUpdate?, damage: [FrameRect]?, size: FrameSize, format: PixelFormat,
                         pixels: UnsafeMutableRawPointer, stride: Int) -> [FrameRect]? {
        apply(u)
        carry(damage, size: size)
        if let c = cursor {
            c.draw(onto: pixels, format: format, size: size, stride: stride)
            // The cursor is drawn by castd, so the producer's damage does not cover where it went or left.
            if c.bounds != drawnRect {
                if let old = drawnRect, let r = Self.clip(old, to: size) { carried?.append(r) }
                if let r = Self.clip(c.bounds, to: size) { carried?.append(r) }
                drawnRect = c.bounds
            }
        }
        let out = first ? nil : carried
        first = false
        carried = []
        return out
    }
}
