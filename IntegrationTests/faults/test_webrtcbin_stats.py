"""The webrtcbin receiver reads its rtpsession's per-source statistics without touching
freed memory. The receiver (castkit/webrtcbin_receiver.py) segfaulted in about one run of
three at the end of Scripts/faults' webrtcbin row, inside gst_structure_get_uint, with
main's castd as with the packet-path branch's: the per-source structures were read after
the "stats" structure that owns them had been freed (a temporary in one expression).

With glibc filling freed memory (MALLOC_PERTURB_) and GLib allocating through malloc
(G_SLICE=always-malloc), a read of freed structures crashes or finds no field every time,
so this check does not depend on luck. A child process does the reading, so a crash is a
failed assertion here, not a dead test run."""

import subprocess

from castkit.paths import PYTHON

CHILD = r"""
import time
from castkit.bench.gst import Gst
from castkit.webrtcbin_receiver import session_sent_nacks

pipe = Gst.parse_launch("appsrc name=src format=time caps=application/x-rtp,media=video,"
                        "clock-rate=90000,encoding-name=H264,payload=96 ! rtpsession name=s ! fakesink")
pipe.set_state(Gst.State.PLAYING)
src = pipe.get_by_name("src")
for i in range(5):                      # five senders: five remote sources in the session
    rtp = bytes([0x80, 96, 0, i, 0, 0, 0, i]) + (1000 + i).to_bytes(4, "big") + bytes([1, 2, 3, 4])
    src.emit("push-buffer", Gst.Buffer.new_wrapped(rtp))
sess = pipe.get_by_name("s").get_property("internal-session")
deadline = time.monotonic() + 5
while len(sess.get_property("stats").get_value("source-stats") or []) < 5 and time.monotonic() < deadline:
    time.sleep(0.02)
totals = set()
for _ in range(300):                    # allocations in between reuse what was freed
    junk = [Gst.Structure.new_empty("junk%d" % i) for i in range(50)]
    totals.add(session_sent_nacks(sess))
pipe.set_state(Gst.State.NULL)
print(sorted(totals, key=str))
"""


def test_per_source_statistics_are_read_while_their_structure_lives():
    env = {"G_SLICE": "always-malloc", "MALLOC_PERTURB_": "165", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([PYTHON, "-c", CHILD], env=env, capture_output=True, text=True, timeout=50)
    assert p.returncode == 0, f"the reader died ({p.returncode}): {p.stderr[-800:]}"
    # Five sources, none of which sent a NACK: 0 every time (None would mean no field was read).
    assert p.stdout.strip().splitlines()[-1] == "[0]"
