#!/usr/bin/python3
"""Two things the KWin rig (castkit/kwin_rig.py) does on its own session bus, as the rig user,
with Debian's python3-gi (not the venv):

  grant TOKEN OUTPUT   stores in org.freedesktop.impl.portal.PermissionStore (table
                       "screencast") a restore token for the host application ("") with the
                       restore data xdg-desktop-portal-kde 5.27 keeps when a person shares a
                       screen and leaves "Allow restoring on future sessions" ticked:
                       ("KDE", 1, <payload>), the payload a Qt QDataStream of the map
                       {"outputs": [OUTPUT]} (an output's id is its position, "0x0").
  dialog               prints, as JSON, the portal's open "Screen Sharing" dialogs read over
                       AT-SPI (the a11y bus): title, push buttons with their actions, and the
                       actions of each screen card ("list item").
"""
import json
import struct
import sys

from gi.repository import Gio, GLib

STORE = ("org.freedesktop.impl.portal.PermissionStore", "/org/freedesktop/impl/portal/PermissionStore",
         "org.freedesktop.impl.portal.PermissionStore")
QT_VARIANT_LIST, QT_STRING = 9, 10   # QMetaType ids


def qt_string(s: str) -> bytes:
    data = s.encode("utf-16-be")
    return struct.pack(">I", len(data)) + data


def qt_variant(type_id: int, body: bytes) -> bytes:
    return struct.pack(">IB", type_id, 0) + body   # type, not null, value


def kde_restore_payload(output: str) -> bytes:
    outputs = struct.pack(">I", 1) + qt_variant(QT_STRING, qt_string(output))
    return struct.pack(">I", 1) + qt_string("outputs") + qt_variant(QT_VARIANT_LIST, outputs)


def grant(token: str, output: str) -> None:
    bus = Gio.bus_get_sync(Gio.BusType.SESSION)

    def call(method, args):
        bus.call_sync(*STORE, method, args, None, Gio.DBusCallFlags.NONE, 10000, None)

    call("SetPermission", GLib.Variant("(sbssas)", ("screencast", True, token, "", ["yes"])))
    data = GLib.Variant("(suv)", ("KDE", 1, GLib.Variant("ay", kde_restore_payload(output))))
    call("SetValue", GLib.Variant("(sbsv)", ("screencast", True, token, data)))


class A11y:
    def __init__(self):
        session = Gio.bus_get_sync(Gio.BusType.SESSION)
        address = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress", None, None,
                                    Gio.DBusCallFlags.NONE, 10000, None).unpack()[0]
        self.bus = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)

    def call(self, node, iface, method, args=None):
        return self.bus.call_sync(node[0], node[1], iface, method, args, None, Gio.DBusCallFlags.NONE, 5000,
                                  None).unpack()

    def name(self, node) -> str:
        return self.call(node, "org.freedesktop.DBus.Properties", "Get",
                         GLib.Variant("(ss)", ("org.a11y.atspi.Accessible", "Name")))[0]

    def role(self, node) -> str:
        return self.call(node, "org.a11y.atspi.Accessible", "GetRoleName")[0]

    def children(self, node) -> list:
        return self.call(node, "org.a11y.atspi.Accessible", "GetChildren")[0]

    def actions(self, node) -> list[str]:
        if "org.a11y.atspi.Action" not in self.call(node, "org.a11y.atspi.Accessible", "GetInterfaces")[0]:
            return []
        return [a[0] for a in self.call(node, "org.a11y.atspi.Action", "GetActions")[0]]

    def descendants(self, node):
        for child in self.children(node):
            yield child
            yield from self.descendants(child)


def dialogs() -> list[dict]:
    a11y = A11y()
    found = []
    for app in a11y.children(("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root")):
        try:
            if a11y.name(app) != "xdg-desktop-portal-kde":
                continue
            for window in a11y.children(app):
                nodes = list(a11y.descendants(window))
                found.append({
                    "title": a11y.name(window),
                    "buttons": {a11y.name(n): a11y.actions(n) for n in nodes if a11y.role(n) == "push button"},
                    "cards": [a11y.actions(n) for n in nodes if a11y.role(n) == "list item"],
                })
        except GLib.Error:
            continue   # an application that left while being read
    return found


def main() -> int:
    if sys.argv[1:2] == ["grant"] and len(sys.argv) == 4:
        grant(sys.argv[2], sys.argv[3])
    elif sys.argv[1:] == ["dialog"]:
        print(json.dumps(dialogs()))
    else:
        print("usage: kde_portal_tool.py grant TOKEN OUTPUT | dialog", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
