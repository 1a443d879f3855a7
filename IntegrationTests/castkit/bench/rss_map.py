#!/usr/bin/env python3
"""Where one process's resident memory is (issue 19), from /proc/PID/smaps_rollup
and /proc/PID/smaps: peak and current RSS, then every kind of mapping with its
resident KiB: each file (shared library or the executable; its private dirty
pages are relocations and written data, its clean pages text and read-only data
shared with other processes), [heap], anonymous mappings (mmap'd malloc chunks,
thread arenas, x264's pictures) listed one by one when large, thread stacks and
System V shared memory (castd's XShm ring slots).

    .venv/bin/python IntegrationTests/castkit/bench/rss_map.py PID [--min-kib 256] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys


def _status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads"):
                out[k] = int(v.split()[0])
    return out


def mappings(pid: int) -> list[dict]:
    """One dict per mapping of /proc/PID/smaps: start, size, perms, name and its KiB counters."""
    out: list[dict] = []
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):   # a mapping's header line
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append({"start": lo, "size_kib": (hi - lo) // 1024, "perms": parts[1],
                            "name": parts[5].strip() if len(parts) > 5 else ""})
            elif head.endswith(":") and out:
                fields = line.split()
                if len(fields) >= 2 and fields[1].isdigit():
                    out[-1][head[:-1]] = int(fields[1])
    return out


def kind(m: dict) -> str:
    name = m["name"]
    if name.startswith(("/SYSV", "/dev/shm", "/memfd:")):
        return "shm"
    if name == "[heap]":
        return "heap"
    if name.startswith("[stack") or (not name and m["perms"].startswith("rw") and m["size_kib"] in (8192, 8196)):
        return "stack"   # the main stack, or a thread's default 8 MiB stack
    if not name or name.startswith("[anon"):
        return "anon"
    if name.startswith("["):
        return "kernel"  # [vdso], [vvar]
    return "file"


def breakdown(pid: int, min_kib: int = 256) -> dict:
    maps = mappings(pid)
    kinds: dict[str, int] = {}
    files: dict[str, dict[str, int]] = {}
    big_anon = []
    for m in maps:
        k = kind(m)
        rss = m.get("Rss", 0)
        kinds[k] = kinds.get(k, 0) + rss
        if k == "file":
            base = m["name"].rsplit("/", 1)[-1]
            f = files.setdefault(base, {"rss": 0, "pss": 0, "private_dirty": 0, "mapped": 0})
            f["rss"] += rss
            f["pss"] += m.get("Pss", 0)
            f["private_dirty"] += m.get("Private_Dirty", 0)
            f["mapped"] += m["size_kib"]
        elif k in ("anon", "heap", "shm") and rss >= min_kib:
            big_anon.append({"kind": k, "name": m["name"], "size_kib": m["size_kib"], "rss_kib": rss,
                             "at": hex(m["start"])})
    return {"status_kib": _status(pid), "by_kind_kib": kinds,
            "files_kib": dict(sorted(files.items(), key=lambda kv: -kv[1]["rss"])),
            "large_anon_and_shm": sorted(big_anon, key=lambda a: -a["rss_kib"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pid", type=int)
    ap.add_argument("--min-kib", type=int, default=256, help="list anonymous/shm mappings with at least this much resident")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    b = breakdown(a.pid, a.min_kib)
    if a.json:
        json.dump(b, sys.stdout, indent=1)
        print()
        return 0
    mib = lambda kib: f"{kib / 1024:7.1f}"  # noqa: E731
    s = b["status_kib"]
    print(f"peak RSS (VmHWM) {mib(s['VmHWM'])} MiB   now {mib(s['VmRSS'])}   anon {mib(s['RssAnon'])}"
          f"   file {mib(s['RssFile'])}   shmem {mib(s['RssShmem'])}   threads {s['Threads']}")
    print("\nby kind (MiB):")
    for k, v in sorted(b["by_kind_kib"].items(), key=lambda kv: -kv[1]):
        print(f"  {k:8} {mib(v)}")
    print("\nfiles (MiB): rss  pss  private-dirty  mapped")
    for name, f in b["files_kib"].items():
        if f["rss"] >= 64:
            print(f"  {mib(f['rss'])} {mib(f['pss'])} {mib(f['private_dirty'])} {mib(f['mapped'])}  {name}")
    rest = [f for f in b["files_kib"].values() if f["rss"] < 64]
    print(f"  {mib(sum(f['rss'] for f in rest))}   ({len(rest)} more files under 64 KiB each)")
    print(f"\nanonymous and shared mappings with ≥ {a.min_kib} KiB resident (MiB): rss / size")
    for m in b["large_anon_and_shm"]:
        print(f"  {mib(m['rss_kib'])} / {mib(m['size_kib'])}  {m['kind']:5} {m['at']} {m['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
