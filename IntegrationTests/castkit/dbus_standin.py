"""What the D-Bus stand-ins (mutter_standin.py, portal_standin.py) share: their command
line's --bus and --log, the one JSON line per call they log, the read-only properties of
their main object, and serving that object under a well-known name until killed.

Imported by those scripts, which run with the system python3 (python3-dbus and python3-gi
from Debian), not the test venv."""
from __future__ import annotations

import argparse
import json
from typing import Callable

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib


def plain(value):
    """D-Bus values as JSON-able Python values."""
    if isinstance(value, (dbus.Dictionary, dict)):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (dbus.Array, dbus.Struct, list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (dbus.UInt32, dbus.Int32, dbus.UInt64, dbus.Int64, int)):
        return int(value)
    return str(value)


class StandIn(dbus.service.Object):
    """A stand-in's main object: `args` is its command line; `record` appends a call to
    --log; org.freedesktop.DBus.Properties serves `properties()` for `interface` only."""

    def __init__(self, bus, path: str, interface: str, args: argparse.Namespace):
        super().__init__(bus, path)
        self.bus, self.interface, self.args = bus, interface, args

    def properties(self) -> dict:
        raise NotImplementedError

    def record(self, call: str, options) -> None:
        with open(self.args.log, "a") as f:
            f.write(json.dumps({"call": call, "options": plain(options)}) + "\n")

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        return self.GetAll(interface)[name]

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != self.interface:
            raise dbus.exceptions.DBusException("no such interface", name="org.freedesktop.DBus.Error.UnknownInterface")
        return self.properties()


def serve(bus_name: str, parser: argparse.ArgumentParser, make: Callable[[object, argparse.Namespace], StandIn]) -> None:
    """Adds --bus and --log to `parser`, parses the command line, makes the object on that
    bus, owns `bus_name` (failing if it is taken), prints "ready" and serves until killed."""
    parser.add_argument("--bus", required=True, help="session bus address")
    parser.add_argument("--log", required=True, help="file each call is appended to, one JSON line")
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.bus)
    make(bus, args)
    name = dbus.service.BusName(bus_name, bus, do_not_queue=True)
    print("ready", flush=True)
    GLib.MainLoop().run()
    del name
