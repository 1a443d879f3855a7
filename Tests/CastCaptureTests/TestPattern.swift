import CX11
import CastMedia
import Foundation

/// A tiny X client (its own connection) that paints the root window, the
/// "known test pattern" the capture tests read back.
enum TestPattern {
    /// Top half: eight 100 % colour bars. Third quarter: an eight-step grey
    /// ramp. Bottom quarter: a horizontal colour gradient with a blue
    /// sawtooth (64 teeth across the screen), detail that costs bits.
    static let bars: [(UInt8, UInt8, UInt8)] = [
        (255, 255, 255), (255, 255, 0), (0, 255, 255), (0, 255, 0),
        (255, 0, 255), (255, 0, 0), (0, 0, 255), (0, 0, 0),
    ]
    static let ramp: [(UInt8, UInt8, UInt8)] = (0..<8).map { i in
        let v = UInt8(i * 255 / 7)
        return (v, v, v)
    }

    /// The pattern's colour at (x, y) for a screen of `size`.
    static func colour(x: Int, y: Int, size: FrameSize) -> (UInt8, UInt8, UInt8) {
        let bar = min(7, x * 8 / size.width)
        if y < size.height / 2 { return bars[bar] }
        if y < size.height * 3 / 4 { return ramp[bar] }
        return gradient(x: x, width: size.width)
    }

    /// The bottom band's colour of column x, in coordinates relative to the width.
    static func gradient(x: Int, width: Int) -> (UInt8, UInt8, UInt8) {
        let u = (Double(x) + 0.5) / Double(width)
        let r = UInt8(255 * u)
        let tooth = u * 64 - (u * 64).rounded(.down)
        return (r, 255 - r, UInt8(255 * tooth))
    }

    static func paint(display: String, size: FrameSize) {
        let dpy = XOpenDisplay(display)!
        defer { XCloseDisplay(dpy) }
        let screen = castd_x11_default_screen(dpy)
        let root = castd_x11_root_window(dpy, screen)
        let gc = XCreateGC(dpy, root, 0, nil)!
        defer { XFreeGC(dpy, gc) }
        let rows = [(0, size.height / 2, bars), (size.height / 2, size.height / 4, ramp)]
        for (top, height, colours) in rows {
            for bar in 0..<8 {
                let (r, g, b) = colours[bar]
                XSetForeground(dpy, gc, UInt(r) << 16 | UInt(g) << 8 | UInt(b))
                XFillRectangle(dpy, root, gc, Int32(bar * size.width / 8), Int32(top),
                               UInt32(size.width / 8), UInt32(height))
            }
        }
        let top = size.height * 3 / 4
        for x in 0..<size.width {
            let (r, g, b) = gradient(x: x, width: size.width)
            XSetForeground(dpy, gc, UInt(r) << 16 | UInt(g) << 8 | UInt(b))
            XFillRectangle(dpy, root, gc, Int32(x), Int32(top), 1, UInt32(size.height - top))
        }
        XSync(dpy, 0)
    }

    static func fill(display: String, rect: FrameRect, rgb: (UInt8, UInt8, UInt8)) {
        let dpy = XOpenDisplay(display)!
        defer { XCloseDisplay(dpy) }
        let root = castd_x11_root_window(dpy, castd_x11_default_screen(dpy))
        let gc = XCreateGC(dpy, root, 0, nil)!
        defer { XFreeGC(dpy, gc) }
        XSetForeground(dpy, gc, UInt(rgb.0) << 16 | UInt(rgb.1) << 8 | UInt(rgb.2))
        XFillRectangle(dpy, root, gc, Int32(rect.x), Int32(rect.y), UInt32(rect.width), UInt32(rect.height))
        XSync(dpy, 0)
    }

    static func warpPointer(display: String, x: Int, y: Int) {
        let dpy = XOpenDisplay(display)!
        defer { XCloseDisplay(dpy) }
        let root = castd_x11_root_window(dpy, castd_x11_default_screen(dpy))
        XWarpPointer(dpy, 0, root, 0, 0, 0, 0, Int32(x), Int32(y))
        XSync(dpy, 0)
    }
}
