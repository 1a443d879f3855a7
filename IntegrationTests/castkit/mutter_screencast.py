#!/usr/bin/python3
"""Ask a running Mutter for a screen cast of its monitor and keep it alive.

org.gnome.Mutter.ScreenCast: CreateSession → RecordMonitor("" = the primary
monitor) → Start; the stream object then announces its PipeWire node with the
PipeWireStreamAdded signal. Prints `node <id>` on stdout and keeps running:
Mutter ends the cast when the D-Bus client that made it goes away. Runs with
Debian's python3-gi (not the venv), as the rig's user, on its session bus.
"""
import argparse
import sys

from gi.repository import Gio, GLib

NAME = "org.gnome.Mutter.ScreenCast"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cursor-mode", type=int, default=1, help="0 hidden, 1 embedded, 2 metadata")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for the node")
    args = ap.parse_args()
    bus = Gio.bus_get_sync(Gio.BusType.SESSION)

    def call(path, iface, method, params, reply):
        return bus.call_sync(NAME, path, iface, method, params,
                             GLib.VariantType(reply) if reply else None, 0, 5000, None)

    session = call("/org/gnome/Mutter/ScreenCast", NAME, "CreateSession",
                   GLib.Variant("(a{sv})", ({},)), "(o)").unpack()[0]
    stream = call(session, NAME + ".Session", "RecordMonitor",
                  GLib.Variant("(sa{sv})", ("", {"cursor-mode": GLib.Variant("u", args.cursor_mode)})),
                  "(o)").unpack()[0]
    loop = GLib.MainLoop()
    found = {}

    def added(_conn, _sender, _path, _iface, _signal, params, *_):
        found["node"] = params.unpack()[0]
        sys.stdout.write(f"node {found['node']}\n")
        sys.stdout.flush()

    def closed(*_):
        sys.stderr.write("mutter closed the screen-cast session\n")
        loop.quit()

    bus.signal_subscribe(NAME, NAME + ".Stream", "PipeWireStreamAdded", stream, None, 0, added)
    bus.signal_subscribe(NAME, NAME + ".Session", "Closed", session, None, 0, closed)
    call(session, NAME + ".Session", "Start", None, None)

    def give_up():
        if "node" not in found:
            sys.stderr.write("mutter announced no PipeWire node\n")
            loop.quit()
        return False

    GLib.timeout_add(int(args.timeout * 1000), give_up)
    loop.run()
    return 0 if "node" in found else 1


if __name__ == "__main__":
    sys.exit(main())
