#!/usr/bin/python3
"""A desktop notification service for tests: owns org.freedesktop.Notifications on the session
bus it is given and implements the Desktop Notifications interface (Notify, CloseNotification,
GetCapabilities, GetServerInformation; the ActionInvoked and NotificationClosed signals) the way
a notification daemon does, without showing anything. Each Notify is appended to --log as one
JSON line ({"call": "Notify", "options": {id, replaces_id, summary, body, actions, hints, ...}}).

--no-actions: GetCapabilities leaves out "actions" (a service that shows no buttons).
SIGUSR1 plays a person choosing an action: it emits ActionInvoked(id, key) for the newest
notification that offers actions, with its first action key (logged as "ActionInvoked").

Run with the system python3 (python3-dbus and python3-gi from Debian). Prints "ready" once the
name is owned."""
import argparse
import signal

import dbus
import dbus.service
from gi.repository import GLib

from dbus_standin import StandIn, serve

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


class Notifications(StandIn):
    def __init__(self, bus, args):
        super().__init__(bus, PATH, NAME, args)
        self.next_id = 1
        self.with_actions = None   # (id, first action key) of the newest notification with actions
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, self.choose_action)

    def properties(self) -> dict:
        return {}

    @dbus.service.method(NAME, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout):
        nid = int(replaces_id) if replaces_id else self.next_id
        if not replaces_id:
            self.next_id += 1
        acts = [str(a) for a in actions]
        self.with_actions = (nid, acts[0]) if acts else (None if self.with_actions and self.with_actions[0] == nid else self.with_actions)
        self.record("Notify", {"id": nid, "app_name": app_name, "replaces_id": replaces_id, "app_icon": app_icon,
                               "summary": summary, "body": body, "actions": acts, "hints": hints,
                               "expire_timeout": expire_timeout})
        return dbus.UInt32(nid)

    @dbus.service.method(NAME, in_signature="u")
    def CloseNotification(self, nid):
        self.record("CloseNotification", {"id": nid})
        self.NotificationClosed(nid, dbus.UInt32(3))

    @dbus.service.method(NAME, out_signature="as")
    def GetCapabilities(self):
        return ["body", "persistence"] if self.args.no_actions else ["actions", "body", "persistence"]

    @dbus.service.method(NAME, out_signature="ssss")
    def GetServerInformation(self):
        return ("castd-test-notifications", "castd tests", "1", "1.2")

    @dbus.service.signal(NAME, signature="us")
    def ActionInvoked(self, nid, key):
        pass

    @dbus.service.signal(NAME, signature="uu")
    def NotificationClosed(self, nid, reason):
        pass

    def choose_action(self):
        if self.with_actions:
            nid, key = self.with_actions
            self.record("ActionInvoked", {"id": nid, "key": key})
            self.ActionInvoked(dbus.UInt32(nid), key)
        else:
            self.record("ActionInvoked", {"id": None, "key": None})
        return True   # keep the handler


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-actions", action="store_true", help="a service that cannot show actions (GetCapabilities)")
    serve(NAME, parser, Notifications)
