"""castkit: the Python library of castd's tests, benchmarks, fault runs and demo.

Everything the tests and the Scripts/ commands import is in this package (tests and scripts
alike import `castkit.…`); the local stack's server is the one other package. The venv puts
both import roots on sys.path (Scripts/bootstrap writes .venv's castd-paths.pth;
docs/testing.md, "Python layout"):

    IntegrationTests/castkit/         this package: peers, receivers, rigs, the stack client
    IntegrationTests/castkit/bench/   castkit.bench: Scripts/bench, Scripts/bench-capture-encode
    IntegrationTests/castkit/faults/  castkit.faults: Scripts/faults' scenario families
    Scripts/stack/gateway/            the local stack's server (run by Scripts/devstack)

No module edits sys.path, and IntegrationTests/**/conftest.py files hold pytest fixtures and
hooks only. Modules here that also run as programs (receiver_proc.py, chromium_proc.py,
bottleneck_rx.py, netns_*.py, tunrouter.py, …) are started as `.venv/bin/python <file>`
and import their siblings as `castkit.<name>`; the D-Bus and GTK stand-ins (portal_standin,
mutter_standin, mutter_*, wayland_pattern) run on the system python3 and import only each
other, by file. Paths to files and directories: castkit.paths.

    devstack         start/stop a local stack; sign_in, api, rest, db, paired_session
    rxproc           the receiver processes (receiver_proc, chromium_proc) driven by JSON lines
    castd_proc       castd as a subprocess: pair, Daemon, answered_cast, start_cast, chromium_cast
    castd_build      the castd binaries of this checkout
    signaling        the receiver's side of the signaling contract (StackClient, SessionSignals)
    receiver_*       receivers: aiortc answerer, the receiver pages, the JSON-line process
    chromium, firefox, chromium_proc       browsers driven over CDP / WebDriver BiDi
    browser_proc                           what the two browsers share (process, profile, connection)
    ref_sender, canvas_sender, devsender   senders other than castd, and castd dev-send
    xscreen, pattern                       Xvfb screens and the colour-bars picture
    netns, tunrouter, confine, bottleneck_link, turn_world, turn_cast, mdns_responder, tlsproxy
                                           network namespaces, faults, guards, TURN, mDNS, TLS
    mutter_rig, wayland_standin, *_standin the Wayland rigs and D-Bus stand-ins
    pw_session, audio_rig                  a private D-Bus + PipeWire session; the audio rig on it
    fuzz_seeds                             the fuzz corpora from real traffic (Scripts/fuzz-seeds)
"""
