#!/usr/bin/python3
"""A stand-in for xdg-desktop-portal's ScreenCast interface, for tests.

It owns org.freedesktop.portal.Desktop on the session bus it is given and
implements org.freedesktop.portal.ScreenCast the way the real portal does
(CreateSession, SelectSources, Start answer through the Response signal of a
Request object whose path is made of the caller's unique name and its
handle_token; OpenPipeWireRemote returns a file descriptor), but with no
dialog: Start hands out the REAL PipeWire node given with --node, and
OpenPipeWireRemote a socket connected to the real daemon (--pipewire-socket).
Every Start issues a fresh single-use restore token. Each call's options are
appended to --log as one JSON line, so a test can see what castd offered.

Run with the system python3 (python3-dbus and python3-gi from Debian). It
prints "ready" on stdout once the name is owned.
"""
import argparse
import secrets
import socket
import sys

import dbus
import dbus.service
from gi.repository import GLib

from dbus_standin import StandIn, serve

BUS_NAME = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
SCREENCAST = "org.freedesktop.portal.ScreenCast"
REQUEST = "org.freedesktop.portal.Request"
SESSION = "org.freedesktop.portal.Session"


class Request(dbus.service.Object):
    @dbus.service.signal(REQUEST, signature="ua{sv}")
    def Response(self, response, results):
        pass

    @dbus.service.method(REQUEST)
    def Close(self):
        self.remove_from_connection()


class Session(dbus.service.Object):
    def __init__(self, bus, path, portal):
        super().__init__(bus, path)
        self.portal = portal
        self.path = path

    @dbus.service.method(SESSION)
    def Close(self):
        self.portal.record("Close", {"session": self.path})
        self.remove_from_connection()


class Portal(StandIn):
    def __init__(self, bus, args):
        super().__init__(bus, PORTAL_PATH, SCREENCAST, args)
        self.offered = {}   # session path -> the restore token SelectSources got
        self.types = {}     # session path -> the source types SelectSources asked for
        self.pending = []   # Requests of Starts left unanswered (--never-answer)

    def answer(self, sender, token, code, results):
        """A Request object at the path the caller predicted; its Response goes out after the method returns."""
        path = "/org/freedesktop/portal/desktop/request/%s/%s" % (sender[1:].replace(".", "_"), token)
        request = Request(self.bus, path)

        def emit():
            request.Response(dbus.UInt32(code), dbus.Dictionary(results, signature="sv"))
            request.remove_from_connection()
            return False

        GLib.timeout_add(5, emit)
        return dbus.ObjectPath(path)

    def properties(self):
        return {"AvailableSourceTypes": dbus.UInt32(7), "AvailableCursorModes": dbus.UInt32(self.args.cursor_modes),
                "version": dbus.UInt32(4)}

    @dbus.service.method(SCREENCAST, in_signature="a{sv}", out_signature="o", sender_keyword="sender")
    def CreateSession(self, options, sender=None):
        self.record("CreateSession", options)
        path = "/org/freedesktop/portal/desktop/session/%s/%s" % (sender[1:].replace(".", "_"), options["session_handle_token"])
        Session(self.bus, path, self)
        return self.answer(sender, options["handle_token"], 0, {"session_handle": dbus.String(path)})

    @dbus.service.method(SCREENCAST, in_signature="oa{sv}", out_signature="o", sender_keyword="sender")
    def SelectSources(self, session, options, sender=None):
        self.record("SelectSources", options)
        self.offered[str(session)] = options.get("restore_token")
        self.types[str(session)] = int(options.get("types", 1))
        return self.answer(sender, options["handle_token"], 0, {})

    @dbus.service.method(SCREENCAST, in_signature="osa{sv}", out_signature="o", sender_keyword="sender")
    def Start(self, session, parent_window, options, sender=None):
        self.record("Start", options)
        if self.args.cancel:
            return self.answer(sender, options["handle_token"], 1, {})
        if self.args.never_answer:
            # A dialog nobody accepts: the Request exists, its Response never comes.
            path = "/org/freedesktop/portal/desktop/request/%s/%s" % (sender[1:].replace(".", "_"), options["handle_token"])
            self.pending.append(Request(self.bus, path))
            return dbus.ObjectPath(path)
        if self.args.reject_tokens and self.offered.get(str(session)):
            return self.answer(sender, options["handle_token"], 2, {})
        props = dbus.Dictionary({"size": dbus.Struct((dbus.Int32(self.args.width), dbus.Int32(self.args.height)), signature="ii"),
                                 "position": dbus.Struct((dbus.Int32(self.args.x), dbus.Int32(0)), signature="ii"),
                                 # Portal 1.17+ names each stream (id) and, in version 5, maps it (mapping_id).
                                 "id": dbus.String("0"), "mapping_id": dbus.String("standin-mapping-%d" % self.args.node),
                                 # The "person" picks a window when only windows were offered, else a monitor.
                                 "source_type": dbus.UInt32(2 if self.types.get(str(session)) == 2 else 1)}, signature="sv")
        streams = dbus.Array([dbus.Struct((dbus.UInt32(self.args.node), props), signature="ua{sv}")], signature="(ua{sv})")
        results = {"streams": streams, "persist_mode": dbus.UInt32(2),
                   "restore_token": dbus.String("standin-" + secrets.token_hex(8))}
        return self.answer(sender, options["handle_token"], 0, results)

    @dbus.service.method(SCREENCAST, in_signature="oa{sv}", out_signature="h")
    def OpenPipeWireRemote(self, session, options):
        self.record("OpenPipeWireRemote", options)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.args.pipewire_socket)
        fd = dbus.types.UnixFd(s.fileno())   # dbus-python dups it
        s.close()
        return fd


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--node", type=int, required=True, help="PipeWire node id Start hands out")
    p.add_argument("--pipewire-socket", required=True)
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--x", type=int, default=0, help="the stream's position (x; y is 0)")
    p.add_argument("--cursor-modes", type=int, default=7)
    p.add_argument("--cancel", action="store_true", help="Start answers 'cancelled by the user'")
    p.add_argument("--reject-tokens", action="store_true", help="Start fails (response 2) when a restore token was offered")
    p.add_argument("--never-answer", action="store_true",
                   help="Start never answers (a dialog waiting for a person who is not there)")
    serve(BUS_NAME, p, Portal)


if __name__ == "__main__":
    sys.exit(main())
