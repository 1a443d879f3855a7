"""PNG plots of a Scripts/bench result: glass-to-glass latency per sender
(box plots per scenario), and CPU / peak memory / bitrate bars; for the quality rows,
SSIM and PSNR over time (quality-<scenario>.png)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"castd": "#1f77b4", "gstreamer": "#ff7f0e"}
SENDERS = ("castd", "gstreamer")


def _latencies(scenario: dict, kind: str) -> list[float]:
    return [v for r in scenario["rounds"].get(kind, []) for v in r.get("latencies_ms", [])]


def draw(result: dict, outdir: Path) -> list[str]:
    scen = result["scenarios"]
    names = [s["scenario"] for s in scen]
    files = []

    fig, ax = plt.subplots(figsize=(10, 5))
    pos, data, colours = [], [], []
    for i, s in enumerate(scen):
        for j, kind in enumerate(SENDERS):
            pos.append(i * 3 + j)
            data.append(_latencies(s, kind) or [float("nan")])
            colours.append(COLOURS[kind])
    bp = ax.boxplot(data, positions=pos, widths=0.8, whis=(5, 95), showfliers=False, patch_artist=True,
                    medianprops={"color": "black"})
    for patch, c in zip(bp["boxes"], colours):
        patch.set_facecolor(c)
    ax.set_xticks([i * 3 + 0.5 for i in range(len(scen))], names)
    ax.set_ylabel("glass-to-glass latency, ms (box: quartiles, whiskers: p5–p95)")
    ax.set_title("Glass to glass: castd vs GStreamer (same screen, same receiver)")
    ax.legend([plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in SENDERS], SENDERS)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    f = outdir / "latency.png"
    fig.savefig(f, dpi=100)
    plt.close(fig)
    files.append(str(f))

    metrics = [("cpu_percent_of_one_core", "CPU, % of one core"), ("peak_rss_mib", "peak RSS, MiB"),
               ("mean_bitrate_bps", "mean bitrate, Mbps"), ("fps", "frames delivered per second")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(18, 4.5))
    for ax, (key, label) in zip(axes, metrics):
        for j, kind in enumerate(SENDERS):
            vals = [(s.get(kind) or {}).get(key) or 0 for s in scen]
            if key.endswith("bps"):
                vals = [v / 1e6 for v in vals]
            ax.bar([i * 3 + j for i in range(len(scen))], vals, width=0.9, color=COLOURS[kind], label=kind)
        ax.set_xticks([i * 3 + 0.5 for i in range(len(scen))], names, rotation=20)
        ax.set_title(label)
        ax.grid(axis="y", alpha=0.3)
        if key == "peak_rss_mib":
            ax.axhline(50, color="grey", linestyle="--", linewidth=1)
            ax.set_title(label + " (dashed: the 50 MiB budget, spec §12)")
    axes[0].legend()
    fig.tight_layout()
    f = outdir / "cpu_memory_bitrate.png"
    fig.savefig(f, dpi=100)
    plt.close(fig)
    files.append(str(f))
    files += [_quality_over_time(s, outdir) for s in scen if s.get("content")]
    return files


def _quality_over_time(scenario: dict, outdir: Path) -> str:
    """The quality rows: SSIM and PSNR of each compared frame over the measured window, per
    sender and round (slides: a still page should sharpen between the changes)."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for kind in SENDERS:
        for r in scenario["rounds"].get(kind, []):
            rows = r.get("quality_per_frame") or []
            t = [q[0] for q in rows]
            top.plot(t, [q[1] for q in rows], ".-", color=COLOURS[kind], label=f"{kind} round {r.get('round')}")
            bottom.plot(t, [q[2] for q in rows], ".-", color=COLOURS[kind])
    top.set_ylabel("SSIM (luma)")
    bottom.set_ylabel("PSNR-Y, dB")
    bottom.set_xlabel("seconds into the measured window")
    top.set_title(f"Quality over time: {scenario['scenario']}")
    top.legend()
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    f = outdir / f"quality-{scenario['scenario']}.png"
    fig.savefig(f, dpi=100)
    plt.close(fig)
    return str(f)
