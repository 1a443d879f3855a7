#!/usr/bin/python3
"""Click the left mouse button at points of a running Mutter's monitor.

Input goes through org.gnome.Mutter.RemoteDesktop, the interface GNOME's own
remote desktop uses: CreateSession, a ScreenCast session of the monitor tied to
it (absolute pointer motion is in that stream's coordinates), Start, then for
each point NotifyPointerMotionAbsolute and a press and release of BTN_LEFT.
Usage: mutter_click.py X Y [X Y ...]; an argument `key=KEYSYM` (e.g. key=0xff1b,
Escape) in place of a point presses and releases that key
(NotifyKeyboardKeysym). Runs with Debian's python3-gi, as the rig's user, on
its session bus; prints `clicked X Y` per point and `pressed KEYSYM` per key.
"""
import sys
import time

from gi.repository import Gio, GLib

RD = "org.gnome.Mutter.RemoteDesktop"
SC = "org.gnome.Mutter.ScreenCast"
BTN_LEFT = 0x110


def main() -> int:
    actions, args = [], sys.argv[1:]
    try:
        while args:
            if args[0].startswith("key="):
                actions.append(("key", int(args.pop(0)[4:], 0)))
            else:
                actions.append(("click", (float(args.pop(0)), float(args.pop(0)))))
    except (ValueError, IndexError):
        actions = []
    if not actions:
        print("usage: mutter_click.py X Y|key=KEYSYM [X Y|key=KEYSYM ...]", file=sys.stderr)
        return 2
    bus = Gio.bus_get_sync(Gio.BusType.SESSION)

    def call(name, path, iface, method, params, reply=None):
        r = bus.call_sync(name, path, iface, method, params, GLib.VariantType(reply) if reply else None, 0, 5000, None)
        return r.unpack() if reply else None

    rd_session = call(RD, "/org/gnome/Mutter/RemoteDesktop", RD, "CreateSession", None, "(o)")[0]
    session_id = call(RD, rd_session, "org.freedesktop.DBus.Properties", "Get",
                      GLib.Variant("(ss)", (RD + ".Session", "SessionId")), "(v)")[0]
    cast = call(SC, "/org/gnome/Mutter/ScreenCast", SC, "CreateSession",
                GLib.Variant("(a{sv})", ({"remote-desktop-session-id": GLib.Variant("s", session_id)},)), "(o)")[0]
    stream = call(SC, cast, SC + ".Session", "RecordMonitor", GLib.Variant("(sa{sv})", ("", {})), "(o)")[0]
    call(RD, rd_session, RD + ".Session", "Start", None)
    time.sleep(0.3)   # the stream's monitor mapping exists once the session runs
    for kind, what in actions:
        if kind == "key":
            for down in (True, False):
                call(RD, rd_session, RD + ".Session", "NotifyKeyboardKeysym", GLib.Variant("(ub)", (what, down)))
                time.sleep(0.1)
            print(f"pressed {what:#x}", flush=True)
            time.sleep(0.3)
            continue
        x, y = what
        call(RD, rd_session, RD + ".Session", "NotifyPointerMotionAbsolute", GLib.Variant("(sdd)", (stream, x, y)))
        time.sleep(0.2)   # GTK sees the pointer enter before the press
        call(RD, rd_session, RD + ".Session", "NotifyPointerButton", GLib.Variant("(ib)", (BTN_LEFT, True)))
        time.sleep(0.1)
        call(RD, rd_session, RD + ".Session", "NotifyPointerButton", GLib.Variant("(ib)", (BTN_LEFT, False)))
        print(f"clicked {x:g} {y:g}", flush=True)
        time.sleep(0.3)
    call(RD, rd_session, RD + ".Session", "Stop", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
