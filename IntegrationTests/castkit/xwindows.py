"""Top-level X11 windows for window-capture tests (issue 31): plain windows with a title and a
solid background colour, which the X server paints itself on every exposure and resize (no
client drawing, so no event loop), moved, resized, raised and closed on request. python-xlib,
its own connection; no window manager, so each window is a child of the root."""
from __future__ import annotations

from Xlib import X, display as xdisplay


class XWindows:
    def __init__(self, display: str):
        self.d = xdisplay.Display(display)
        self.screen = self.d.screen()
        self.windows = {}

    def open(self, title: str, x: int, y: int, w: int, h: int, rgb: tuple[int, int, int]) -> int:
        """Maps a window with this title and colour; returns its id."""
        r, g, b = rgb
        pixel = (r << 16) | (g << 8) | b   # a 24-bit TrueColor visual (Xvfb's depth 24)
        win = self.screen.root.create_window(x, y, w, h, 0, self.screen.root_depth, X.InputOutput, X.CopyFromParent,
                                             background_pixel=pixel, event_mask=X.StructureNotifyMask)
        win.set_wm_name(title.encode("latin-1", "replace").decode("latin-1"))   # WM_NAME is Latin-1; _NET_WM_NAME has the UTF-8
        net_wm_name = self.d.intern_atom("_NET_WM_NAME")
        win.change_property(net_wm_name, self.d.intern_atom("UTF8_STRING"), 8, title.encode())
        win.map()
        self.d.sync()
        self.windows[title] = win
        return win.id

    def move(self, title: str, x: int, y: int):
        self.windows[title].configure(x=x, y=y)
        self.d.sync()

    def resize(self, title: str, w: int, h: int):
        self.windows[title].configure(width=w, height=h)
        self.d.sync()

    def raise_(self, title: str):
        self.windows[title].configure(stack_mode=X.Above)
        self.d.sync()

    def unmap(self, title: str):
        self.windows[title].unmap()
        self.d.sync()

    def map(self, title: str):
        self.windows[title].map()
        self.d.sync()

    def close(self, title: str):
        self.windows.pop(title).destroy()
        self.d.sync()

    def shut(self):
        try:
            self.d.close()
        except Exception:   # the X server already went away (the cast's screen is stopped first)
            pass
