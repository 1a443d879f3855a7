// libsystemd: sd-bus (portal D-Bus), sd_notify, the journal.
#pragma once
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
