"""castkit.faults: the scenario families of Scripts/faults, one module each.

    world       the namespaces, the receiver process, a cast and what it measures; Result, check
    loss        random and burst loss on the media path (aiortc, Chromium)
    cuts        link cuts, consent freshness
    hostile     hostile receiver rows, a wrong DTLS fingerprint, a self-signed TLS endpoint
    ends        SIGTERM under load, the receiver's Stop, SIGKILL then restart, authorization expiry
    media       encoder and capture faults, the watchdog
    backend     Realtime cuts, gateway and PostgreSQL restarts, REST 500, P0429, short tokens
    soak        memory and file descriptors over a long cast
    bottleneck  tc tbf bottlenecks, webrtcbin as the receiver
    turn        TURN through coturn across two NATs
    package     the .deb installed, cast from and purged in a fresh Debian 12 root
    checks      run-wide checks: secrets in logs, credential file modes

A row is a coroutine `fn(world, *args, **kw)` returning a Result (or a list of them);
Scripts/faults.py lists the rows in their running order (SCENARIOS: name, in --quick, fn,
args, kw) and runs them.
"""
