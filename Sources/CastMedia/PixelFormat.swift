/// The pixel layouts castd moves between capture, conversion and encoding.
public enum PixelFormat: String, Sendable, CaseIterable {
    /// 32-bit little-endian B, G, R, unused: X11 TrueColor depth 24/32 and PipeWire's BGRx.
    case bgrx
    /// 32-bit R, G, B, unused: PipeWire's RGBx.
    case rgbx
    /// Planar Y, U, V at 4:2:0 (x264's input).
    case i420
    /// Y plane plus interleaved UV at 4:2:0 (VA-API surfaces).
    case nv12

    public var isPacked: Bool { self == .bgrx || self == .rgbx }
}
