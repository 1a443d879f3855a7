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
