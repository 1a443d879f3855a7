import CastMedia

/// Where a shared window is in its PipeWire stream and where it goes in castd's frame (issue 31),
/// decided without touching pixels. A compositor's window stream can be larger than the window
/// (Mutter 43's is the size of the monitor, the window at a place in it) and says where the
/// window is in each buffer's `SPA_META_VideoCrop`. castd sends only that region, in a steady
/// frame chosen once — the first crop's size within the caps, even sides — and draws later crops
/// of another size into it shrunk with their aspect kept and centred (`FrameSize.fitted(into:)`),
/// as the X11 window source does: the receiver never sees a new size.
public struct WindowCrop: Equatable, Sendable {
    /// The steady frame.
    public let frame: FrameSize
    /// The window's area in the stream (the last crop; the whole stream when there is none).
    public private(set) var crop: FrameRect
    /// Where the crop's picture goes in `frame`.
    public private(set) var placement: FrameRect

    /// The frame for the first buffer: its crop (the whole stream without one) within `caps`, or
    /// `frame` when one was chosen before (the stream was opened again after a format change).
    public init(stream: FrameSize, crop: FrameRect?, caps: CaptureCaps, frame: FrameSize? = nil) {
        let c = Self.region(crop, in: stream)
        self.frame = frame ?? caps.targetSize(for: c.size)
        self.crop = c
        placement = c.size.fitted(into: self.frame)
    }

    /// The crop as castd uses it: clipped to the stream; the whole stream when there is none
    /// or nothing of it is inside.
    public static func region(_ crop: FrameRect?, in stream: FrameSize) -> FrameRect {
        let whole = FrameRect(x: 0, y: 0, width: stream.width, height: stream.height)
        guard let r = crop, !r.isEmpty else { return whole }
        let x0 = max(0, r.x), y0 = max(0, r.y)
        let x1 = min(stream.width, r.x + r.width), y1 = min(stream.height, r.y + r.height)
        return x0 < x1 && y0 < y1 ? FrameRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : whole
    }

    /// A buffer's crop (nil: it carries none, keep the last). True when the crop moved or changed
    /// size: the next frame is a whole new picture (and, with a new placement, new bars).
    @discardableResult
    public mutating func update(crop new: FrameRect?, stream: FrameSize) -> Bool {
        guard let new else { return false }
        let c = Self.region(new, in: stream)
        guard c != crop else { return false }
        crop = c
        placement = c.size.fitted(into: frame)
        return true
    }

    /// The producer's damage (stream coordinates) in the frame: the part inside the crop, scaled
    /// to the placement; nil (unknown, everything) stays nil.
    public func damage(_ rects: [FrameRect]?) -> [FrameRect]? {
        rects.map { rs in
            rs.compactMap { r -> FrameRect? in
                let inside = FrameRect(x: r.x - crop.x, y: r.y - crop.y, width: r.width, height: r.height)
                guard let clipped = PipeWireFrameAssembler.clip(inside, to: crop.size) else { return nil }
                let m = clipped.mapped(from: crop.size, to: placement)
                return m.isEmpty ? nil : m
            }
        }
    }

    /// A point of the stream (the cursor's position) in the frame.
    public func point(x: Int, y: Int) -> (x: Int, y: Int) {
        (placement.x + (x - crop.x) * placement.width / max(1, crop.width),
         placement.y + (y - crop.y) * placement.height / max(1, crop.height))
    }

    /// Whether the crop's picture needs the scaler (it is larger than its place in the frame).
    public var scaled: Bool { placement.size != crop.size }
}
