#!/usr/bin/python3
"""castd's test picture as a Wayland client (GTK 3), for the headless Mutter rig.

The same seven 75 % colour bars as `castd-pattern` draws on X (top two thirds)
and a white box that moves one step per frame over grey in the bottom third,
so the compositor always has damage to report. `--static` draws once and then
never again (a damage-free screen). `--window WxH` draws in an undecorated WxH
window instead of fullscreen (a window to share that is not the whole screen); SIGUSR1 then makes that window 1.5
times as wide (a resize asked by the client: GNOME Shell moves and resizes other clients' windows only through its
own APIs, and a Wayland client cannot move itself). Runs with Debian's python3-gi, not the venv.
"""
import argparse
import signal
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

BARS = [(0xBF, 0xBF, 0xBF), (0xBF, 0xBF, 0), (0, 0xBF, 0xBF), (0, 0xBF, 0), (0xBF, 0, 0xBF), (0xBF, 0, 0), (0, 0, 0xBF)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--window", metavar="WxH", help="an undecorated WxH window instead of a fullscreen one")
    args = ap.parse_args()

    win = Gtk.Window(title="castd pattern")
    area = Gtk.DrawingArea()
    win.add(area)
    state = {"n": 0}

    def draw(widget, cr):
        w, h = widget.get_allocated_width(), widget.get_allocated_height()
        bottom = h * 2 // 3
        for i, (r, g, b) in enumerate(BARS):
            x0, x1 = i * w // len(BARS), (i + 1) * w // len(BARS)
            cr.set_source_rgb(r / 255, g / 255, b / 255)
            cr.rectangle(x0, 0, x1 - x0, bottom)
            cr.fill()
        cr.set_source_rgb(64 / 255, 64 / 255, 64 / 255)
        cr.rectangle(0, bottom, w, h - bottom)
        cr.fill()
        box = max(8, (h - bottom) // 2)
        span = max(1, w - box)
        cr.set_source_rgb(1, 1, 1)
        cr.rectangle((state["n"] * 4) % span, bottom + (h - bottom - box) // 2, box, box)
        cr.fill()
        return False

    def tick():
        state["n"] += 1
        area.queue_draw()
        return True

    area.connect("draw", draw)
    win.connect("destroy", Gtk.main_quit)
    if args.window:
        w, h = (int(v) for v in args.window.split("x"))
        win.set_decorated(False)   # no GTK title bar or shadow: the window's picture is the pattern alone
        area.set_size_request(w, h)
        win.set_resizable(False)

        def wider():
            w2 = w * 3 // 2
            area.set_size_request(w2, h)
            win.resize(w2, h)
            sys.stdout.write("resized to %dx%d\n" % (w2, h))
            sys.stdout.flush()
            return True

        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, wider)
    else:
        win.fullscreen()
    win.show_all()

    def announce():
        sys.stdout.write("drawing on wayland\n")
        sys.stdout.flush()
        return False

    GLib.timeout_add(200, announce)
    if not args.static:
        GLib.timeout_add(max(1, 1000 // args.fps), tick)
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
