import CastCore
import CX11

/// Draws flat rectangles on an X screen's root window: the test patterns of
/// the integration tests and the on-glass timecode of the benchmarks. Owns its
/// Display connection and GC. One thread uses it.
public final class X11Painter {
    private let display: OpaquePointer
    private let root: Window
    private let gc: GC
    public let width: Int
    public let height: Int

    public init(display name: String? = nil) throws {
        guard let dpy = XOpenDisplay(name) else {
            throw CastError(.io, "X11: cannot open display \(name ?? "$DISPLAY")")
        }
        display = dpy
        let screen = castd_x11_default_screen(dpy)
        root = castd_x11_root_window(dpy, screen)
        width = Int(XDisplayWidth(dpy, screen))
        height = Int(XDisplayHeight(dpy, screen))
        gc = XCreateGC(dpy, root, 0, nil)
    }

    deinit {
        XFreeGC(display, gc)
        XCloseDisplay(display)
    }

    /// Fills a rectangle with an RGB colour (TrueColor 24/32-bit visuals: 0xRRGGBB is the pixel).
    public func fill(x: Int, y: Int, width w: Int, height h: Int, rgb: UInt32) {
        XSetForeground(display, gc, UInt(rgb & 0xff_ffff))
        XFillRectangle(display, root, gc, Int32(x), Int32(y), UInt32(max(0, w)), UInt32(max(0, h)))
    }

    /// Sends what was drawn and waits until the server has done it.
    public func sync() { XSync(display, 0) }
}

/// The test picture: SMPTE-like colour bars over the top two thirds (flat,
/// for exact pixel checks) and a white block that moves along the bottom
/// third (so every frame differs and damage is real).
public enum TestPattern {
    /// 75 % bars, left to right: white, yellow, cyan, green, magenta, red, blue.
    public static let bars: [UInt32] = [0xBFBFBF, 0xBFBF00, 0x00BFBF, 0x00BF00, 0xBF00BF, 0xBF0000, 0x0000BF]

    public static func drawBars(_ p: X11Painter) {
        let top = p.height * 2 / 3
        for (i, c) in bars.enumerated() {
            let x0 = i * p.width / bars.count, x1 = (i + 1) * p.width / bars.count
            p.fill(x: x0, y: 0, width: x1 - x0, height: top, rgb: c)
        }
        p.fill(x: 0, y: top, width: p.width, height: p.height - top, rgb: 0x101010)
    }

    /// Frame `n` of the moving block.
    public static func drawBlock(_ p: X11Painter, frame n: Int) {
        let top = p.height * 2 / 3, band = p.height - top
        let size = max(8, band / 2)
        let span = max(1, p.width - size)
        let x = (n * 16) % span, prev = ((n - 1) * 16 % span + span) % span
        p.fill(x: prev, y: top + band / 4, width: size, height: size, rgb: 0x101010)
        p.fill(x: x, y: top + band / 4, width: size, height: size, rgb: 0xFFFFFF)
    }
}
