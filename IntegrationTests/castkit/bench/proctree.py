"""CPU and memory of a process tree from /proc (Linux)."""
from __future__ import annotations

import os

TICK = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(d))
    return out


def tree(pid: int) -> list[int]:
    kids, todo, seen = _children(), [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(kids.get(p, []))
    return seen


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process and its live descendants (all threads),
    plus what their reaped children used."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])   # utime stime cutime cstime
        except (OSError, ValueError):
            continue
    return total / TICK


def _status_kib(pid: int, key: str) -> int:
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith(key + ":")), 0)
        except OSError:
            continue
    return total


def peak_rss_mib(pid: int) -> float:
    """Sum of VmHWM (peak resident set) over the tree."""
    return round(_status_kib(pid, "VmHWM") / 1024, 1)


def rss_mib(pid: int) -> float:
    """Sum of VmRSS (resident set now) over the tree."""
    return round(_status_kib(pid, "VmRSS") / 1024, 1)


def rss_breakdown_mib(pid: int) -> dict:
    """Resident memory now by kind, summed over the tree: anonymous (heap, encoder
    buffers), file-backed (mostly shared libraries, shared with other processes)
    and shared memory (castd's XShm ring segments)."""
    return {k: round(_status_kib(pid, k) / 1024, 1) for k in ("RssAnon", "RssFile", "RssShmem")}


def smaps_breakdown_mib(pid: int, top: int = 16) -> dict:
    """Where one process's resident memory is, from /proc/PID/smaps: anonymous
    ([heap] and unnamed mappings: malloc arenas, encoder buffers), thread stacks,
    System V shared memory (castd's XShm ring), and file mappings grouped by
    file (the largest `top` by name, the rest summed). `files_pss` is the file
    mappings' proportional share: pages shared with other processes (the Swift
    runtime, libc...) counted once per sharer."""
    kinds = {"anon": 0, "stack": 0, "shm": 0, "files": 0, "files_pss": 0}
    files: dict[str, int] = {}
    name = ""
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):          # a mapping's header line
                    parts = line.split(None, 5)
                    name = parts[5].strip() if len(parts) > 5 else ""
                    continue
                is_file = bool(name) and not name.startswith(("[", "/SYSV", "/dev/shm"))
                if head == "Pss:" and is_file:
                    kinds["files_pss"] += int(line.split()[1])
                if head != "Rss:":
                    continue
                kib = int(line.split()[1])
                if name.startswith("/SYSV") or name.startswith("/dev/shm"):
                    kinds["shm"] += kib
                elif name.startswith("[stack"):
                    kinds["stack"] += kib
                elif name == "" or name == "[heap]" or name.startswith("[anon"):
                    kinds["anon"] += kib
                elif name.startswith("["):                            # [vdso], [vvar]...
                    kinds["files"] += kib
                else:
                    kinds["files"] += kib
                    base = name.rsplit("/", 1)[-1]
                    files[base] = files.get(base, 0) + kib
    except OSError:
        return {}
    out = {k: round(v / 1024, 1) for k, v in kinds.items()}
    ranked = sorted(files.items(), key=lambda kv: -kv[1])
    out["largest_files"] = {k: round(v / 1024, 1) for k, v in ranked[:top]}
    return out
