/// A frame's width and height in pixels.
public struct FrameSize: Hashable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var pixelCount: Int { width * height }
    public var description: String { "\(width)x\(height)" }
}

/// A rectangle in a frame's pixel coordinates (damage, a RandR output's area).
public struct FrameRect: Hashable, Sendable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var isEmpty: Bool { width <= 0 || height <= 0 }
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }

    /// Whether the two rectangles share at least one pixel.
    public func intersects(_ o: FrameRect) -> Bool {
        !isEmpty && !o.isEmpty && x < o.x + o.width && o.x < x + width && y < o.y + o.height && o.y < y + height
    }
}

extension FrameSize {
    /// Where a picture of this size goes in a fixed `frame` (issue 31, a shared window that changes
    /// size): shrunk to fit with its aspect kept, never grown, centred; the rest of the frame is the
    /// letterbox (bars above and below) or pillarbox (bars left and right).
    /// 1280x720 in 640x480 → 640x360+0+60; 300x600 in 640x480 → 240x480+200+0; 320x240 in 640x480 → 320x240+160+120.
    public func fitted(into frame: FrameSize) -> FrameRect {
        var w = width, h = height
        if w > frame.width || h > frame.height {
            // Scale by the tighter side, rounded to the nearest pixel (integer arithmetic keeps exact ratios exact).
            if w * frame.height >= h * frame.width {
                h = (h * frame.width + w / 2) / w
                w = frame.width
            } else {
                w = (w * frame.height + h / 2) / h
                h = frame.height
            }
        }
        w = min(max(1, w), frame.width)
        h = min(max(1, h), frame.height)
        return FrameRect(x: (frame.width - w) / 2, y: (frame.height - h) / 2, width: w, height: h)
    }
}

extension FrameRect {
    public var size: FrameSize { FrameSize(width: width, height: height) }

    /// This rectangle, given in a picture of size `from`, in the frame where that picture
    /// is drawn at `placement` (scaled): grown outward to whole pixels, clipped to the placement.
    public func mapped(from: FrameSize, to placement: FrameRect) -> FrameRect {
        guard from.width > 0, from.height > 0 else { return placement }
        let x0 = placement.x + x * placement.width / from.width
        let y0 = placement.y + y * placement.height / from.height
        let x1 = placement.x + ((x + width) * placement.width + from.width - 1) / from.width
        let y1 = placement.y + ((y + height) * placement.height + from.height - 1) / from.height
        let cx0 = max(x0, placement.x), cy0 = max(y0, placement.y)
        let cx1 = min(x1, placement.x + placement.width), cy1 = min(y1, placement.y + placement.height)
        return FrameRect(x: cx0, y: cy0, width: max(0, cx1 - cx0), height: max(0, cy1 - cy0))
    }
}
