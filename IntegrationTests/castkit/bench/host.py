"""What machine a bench ran on."""
from __future__ import annotations

import os
import platform
import subprocess


def machine() -> dict:
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GST_DEBUG")}
        gst = subprocess.run(["gst-launch-1.0", "--gst-version"], capture_output=True, text=True,
                             env=env).stdout.strip()
    except OSError:
        gst = ""
    return {"cpu": model, "cores": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
            "kernel": platform.release(), "gstreamer": gst.splitlines()[-1] if gst else "",
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
