"""PNG plots of a Scripts/bench --bottleneck result: per scenario, the delivered rate (with the
link's capacity), tbf's queue and the candidate-pair RTT, and glass-to-glass latency over
time, one line per sender."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"castd": "#1f77b4", "libwebrtc": "#ff7f0e", "libwebrtc-detail": "#2ca02c"}


def _xy(points: list) -> tuple[list, list]:
    return [p[0] for p in points], [p[1] for p in points]


def draw(result: dict, outdir: Path) -> list[str]:
    files = []
    for e in result["scenarios"]:
        fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
        cap_drawn = False
        for kind, colour in COLOURS.items():
            s = e.get(kind)
            if not s or "error" in s:
                continue
            tl = s["timeline"]
            axes[0].plot(*_xy(tl["delivered_mbps"]), color=colour, label=f"{kind} delivered")
            if tl.get("tcp_mbps"):
                axes[0].plot(*_xy(tl["tcp_mbps"]), color=colour, linestyle="-.", label=f"TCP beside {kind}")
            if not cap_drawn and tl["capacity_mbps"] and tl["capacity_mbps"][0][1] is not None:
                xs, ys = _xy(tl["capacity_mbps"])
                end = max(xs[-1], tl["delivered_mbps"][-1][0] if tl["delivered_mbps"] else xs[-1])
                axes[0].step(xs + [end], ys + [ys[-1]], where="post", color="grey", linestyle="--", label="link capacity")
                cap_drawn = True
            if tl["queue_ms"]:
                axes[1].plot(*_xy(tl["queue_ms"]), color=colour, label=f"{kind}: tbf queue")
            axes[1].plot(*_xy(tl["rtt_ms"]), color=colour, linestyle=":", marker=".", label=f"{kind}: candidate-pair RTT")
            axes[2].plot(*_xy(tl["glass_to_glass_ms"]), color=colour, linestyle="", marker=".", markersize=2,
                         label=f"{kind}")
        axes[0].set_ylabel("Mbit/s (payload received)")
        axes[1].set_ylabel("ms")
        axes[1].axhline(50, color="grey", linewidth=0.8)
        axes[2].set_ylabel("glass to glass, ms")
        axes[2].set_yscale("log")
        axes[2].set_xlabel("seconds since the first frame")
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper right")
        loss = f", {e['loss'] * 100:.0f} % loss" if e.get("loss") else ""
        axes[0].set_title(f"bottleneck {e['scenario']}{loss}: castd vs Chromium's libwebrtc (same link, same receiver)")
        fig.tight_layout()
        f = outdir / f"bottleneck-{e['scenario']}.png"
        fig.savefig(f, dpi=90)
        plt.close(fig)
        files.append(str(f))
    return files
