#!/usr/bin/python3
"""A stand-in for GNOME Mutter's org.gnome.Mutter.ScreenCast, for tests of
castd's Mutter client where the real compositor cannot do what the test needs
(Mutter never closes a headless virtual monitor's session on request).

It owns org.gnome.Mutter.ScreenCast on the session bus it is given:
CreateSession returns a Session object; Session.RecordMonitor("" or
--connector) returns a Stream object (any other connector is refused as
Mutter does); Session.Start answers, then the stream announces the REAL
PipeWire node given with --node through PipeWireStreamAdded. The test-only
method org.castd.StandIn.CloseAll on /org/gnome/Mutter/ScreenCast makes every
started session emit Closed (what Mutter does when the monitor goes away).
Each call is appended to --log as one JSON line.

Run with the system python3 (python3-dbus and python3-gi from Debian). It
prints "ready" on stdout once the name is owned.
"""
import argparse
import sys

import dbus
import dbus.service
from gi.repository import GLib

from dbus_standin import StandIn, serve

NAME = "org.gnome.Mutter.ScreenCast"
PATH = "/org/gnome/Mutter/ScreenCast"


class Stream(dbus.service.Object):
    @dbus.service.signal(NAME + ".Stream", signature="u")
    def PipeWireStreamAdded(self, node_id):
        pass


class Session(dbus.service.Object):
    def __init__(self, bus, path, caster):
        super().__init__(bus, path)
        self.bus, self.path, self.caster = bus, path, caster
        self.streams: list[Stream] = []
        self.started = False

    @dbus.service.method(NAME + ".Session", in_signature="sa{sv}", out_signature="o")
    def RecordMonitor(self, connector, properties):
        self.caster.record("RecordMonitor", {"session": self.path, "connector": str(connector),
                                             "cursor-mode": int(properties.get("cursor-mode", -1))})
        if connector not in ("", self.caster.args.connector):
            raise dbus.exceptions.DBusException(f"Unknown monitor {connector}", name="org.freedesktop.DBus.Error.Failed")
        path = f"{PATH}/Stream/u{self.caster.next_id()}"
        self.streams.append(Stream(self.bus, path))
        return dbus.ObjectPath(path)

    @dbus.service.method(NAME + ".Session")
    def Start(self):
        self.caster.record("Start", {"session": self.path})
        self.started = True

        def announce():
            for s in self.streams:
                s.PipeWireStreamAdded(dbus.UInt32(self.caster.args.node))
            return False
        if not self.caster.args.no_node:
            GLib.timeout_add(5, announce)

    @dbus.service.method(NAME + ".Session")
    def Stop(self):
        self.caster.record("Stop", {"session": self.path})
        self.close()

    @dbus.service.signal(NAME + ".Session")
    def Closed(self):
        pass

    def close(self):
        if self.started:
            self.started = False
            self.Closed()


class ScreenCast(StandIn):
    def __init__(self, bus, args):
        super().__init__(bus, PATH, NAME, args)
        self.sessions: list[Session] = []
        self.counter = 0

    def next_id(self) -> int:
        self.counter += 1
        return self.counter

    def properties(self):
        return {"Version": dbus.Int32(4)}

    @dbus.service.method(NAME, in_signature="a{sv}", out_signature="o")
    def CreateSession(self, properties):
        self.record("CreateSession", {})
        session = Session(self.bus, f"{PATH}/Session/u{self.next_id()}", self)
        self.sessions.append(session)
        return dbus.ObjectPath(session.path)

    @dbus.service.method("org.castd.StandIn")
    def CloseAll(self):
        self.record("CloseAll", {})
        for s in self.sessions:
            s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--node", type=int, required=True, help="PipeWire node id each started stream announces")
    p.add_argument("--connector", default="Virtual-1", help="the one monitor connector besides \"\"")
    p.add_argument("--no-node", action="store_true", help="Start succeeds but no stream is ever announced")
    serve(NAME, p, ScreenCast)


if __name__ == "__main__":
    sys.exit(main())
