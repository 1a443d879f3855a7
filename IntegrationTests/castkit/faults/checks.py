"""Checks over the whole run, after every row: no secret in any log, credential file modes."""
from __future__ import annotations

import re
import stat

from castkit.faults.world import Result, World, check


# The key=value fields of castd's logs whose values are measurements (a rate in bit/s, a time in
# ms, a byte count): one of the run's 6-digit PINs can equal such a value by chance (a debug
# castd.log of a 30 s row holds ~600 distinct 6-digit bps= values, and a full run hands out ~50
# PINs), which is no leak. A PIN anywhere else, and every token, is a hit.
MEASURED_FIELD = re.compile(r"(?:^|[\s,])(?:bps|t_ms|[a-z_]*_(?:bps|kbps|ms|bytes))=$")


def secret_hits(text: str, secret: str) -> int:
    """Occurrences of `secret` in `text` that can be a leak: for a numeric secret (a PIN), only
    where it stands alone (not inside a longer run of letters and digits) and is not a measured
    field's value."""
    if not secret.isdigit():
        return text.count(secret)
    n = 0
    # Standing alone among letters and digits too: inside a hex identifier (a row's UUID, a
    # redacted address's hash: ~380 distinct 6-digit runs in a debug castd.log of the hostile
    # rows) it is chance, as in a longer number (a CI rehearsal flagged one such run as a PIN).
    for m in re.finditer(rf"(?<![0-9A-Za-z]){secret}(?![0-9A-Za-z])", text):
        if not MEASURED_FIELD.search(text[max(0, m.start() - 40):m.start()]):
            n += 1
    return n


def secrets_grep(w: World) -> Result:
    r = Result("secrets in logs", "tokens, refresh tokens, PINs never appear in any log the scenarios produced "
                                  "(SRTP keys: castd exports none; long hex/base64 runs flagged)")
    logs = [p for p in w.out.rglob("*.log")]
    hits = []
    long_runs = []
    for p in logs:
        text = p.read_text(errors="replace")
        for s in w.secrets:
            if secret_hits(text, s):
                hits.append(f"{p.relative_to(w.out)}: a secret of {len(s)} chars")
        if p.name == "castd.log" or p.name == "pair.log":
            for m in re.finditer(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{40,}={0,2}", text):
                run = m.group(0)
                # An absolute file path (e.g. the certificate the TLS row trusts, under --out) is no
                # key: base64 starts with "/" and holds 3 or more of them in 40 characters rarely.
                if run.startswith("/") and run.count("/") >= 3:
                    continue
                long_runs.append(f"{p.relative_to(w.out)}: {run[:12]}…")
    ok = not hits and not long_runs and bool(w.secrets) and bool(logs)
    return check(r, ok, f"{len(w.secrets)} secrets searched in {len(logs)} logs: {len(hits)} found; "
                        f"{len(long_runs)} key-like runs in castd logs", secrets=len(w.secrets), logs=len(logs),
                 hits=hits[:10], key_like=long_runs[:10])


def credential_modes(w: World) -> Result:
    r = Result("credential file modes", "credential files 0600, their directories 0700 (docs/security.md)")
    bad, seen = [], 0
    for home in w.out.glob("*/state"):
        for p in home.rglob("*"):
            mode = stat.S_IMODE(p.stat().st_mode)
            seen += 1
            want = 0o700 if p.is_dir() else 0o600
            if mode != want:
                bad.append(f"{p.relative_to(w.out)} {oct(mode)}")
    return check(r, seen > 0 and not bad, f"{seen} paths checked, {len(bad)} wrong", checked=seen, wrong=bad[:10])
