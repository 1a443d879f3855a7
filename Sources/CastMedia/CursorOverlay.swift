/// Draws a cursor image onto a captured packed frame (X11 XFixes and
/// PipeWire's cursor metadata both hand out premultiplied ARGB). Clipped to
/// the frame; pure pixel code.
public struct CursorOverlay: Equatable, Sendable {
    /// Top-left corner of the image in frame coordinates (hotspot already subtracted).
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    /// Premultiplied ARGB, row-major, `width * height` values (A in bits 24…31).
    public var pixels: [UInt32]

    public init(x: Int, y: Int, width: Int, height: Int, pixels: [UInt32]) {
        precondition(pixels.count == width * height, "cursor pixels do not match its size")
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    public var bounds: FrameRect { FrameRect(x: x, y: y, width: width, height: height) }

    /// Composites onto the frame at `dst`: out = src + dst·(255 − α)/255 per
    /// channel (Porter–Duff "over" with premultiplied source).
    public func draw(onto dst: UnsafeMutableRawPointer, format: PixelFormat, size: FrameSize, stride: Int) {
        precondition(format.isPacked)
        let x0 = max(0, x), y0 = max(0, y)
        let x1 = min(size.width, x + width), y1 = min(size.height, y + height)
        guard x0 < x1, y0 < y1 else { return }
        // Byte offsets of R and B inside a destination pixel.
        let (ri, bi) = format == .bgrx ? (2, 0) : (0, 2)
        for fy in y0..<y1 {
            let row = dst + fy * stride
            for fx in x0..<x1 {
                let p = pixels[(fy - y) * width + (fx - x)]
                let a = Int(p >> 24)
                if a == 0 { continue }
                let src = [Int((p >> 16) & 0xff), Int((p >> 8) & 0xff), Int(p & 0xff)]  // r, g, b
                let px = row + 4 * fx
                for (c, offset) in [(0, ri), (1, 1), (2, bi)] {
                    let d = Int(px.load(fromByteOffset: offset, as: UInt8.self))
                    let v = src[c] + (d * (255 - a) + 127) / 255
                    px.storeBytes(of: UInt8(min(255, v)), toByteOffset: offset, as: UInt8.self)
                }
            }
        }
    }
}
