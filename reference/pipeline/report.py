"""Figures of a run: latency percentiles, throughput, the summary line, JSON and a latency plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

PERCENTILES = (50, 90, 99)


def latency_ms(timings: Sequence[tuple[int, int, int, int]]) -> dict[str, dict[str, float]]:
    """Per-change percentiles (ms) from commit to accepted by the server and to durable in the table."""
    if not timings:
        return {}
    t = np.array(timings, dtype=np.int64)
    weights = t[:, 3]
    out: dict[str, dict[str, float]] = {}
    for name, column in (("accepted", 1), ("durable", 2)):
        values = np.repeat((t[:, column] - t[:, 0]) / 1e6, weights)
        figures = {f"p{p}": round(float(np.percentile(values, p)), 1) for p in PERCENTILES}
        figures["max"] = round(float(values.max()), 1)
        out[name] = figures
    return out


def throughput(changes: int, timings: Sequence[tuple[int, int, int, int]], fallback_s: float) -> tuple[float, float]:
    """(changes/s, seconds) from the first commit to the last durable observation."""
    if timings:
        t = np.array(timings, dtype=np.int64)
        seconds = float(t[:, 2].max() - t[:, 0].min()) / 1e9
    else:
        seconds = fallback_s
    return (changes / seconds if seconds > 0 else 0.0), seconds


def summary_line(rows: int, durable: dict[str, int], rate: float) -> str:
    points = " ".join(f"{o}={n}" for o, n in durable.items())
    return f"pipeline OK: {rows} rows, table matches, durable {points}, {rate:,.0f} changes/s"


def write(directory: Path, figures: dict[str, Any], timings: Sequence[tuple[int, int, int, int]],
          samples: Sequence[tuple[float, int]], events: Sequence[tuple[float, str]]) -> list[Path]:
    """Write ``figures.json`` and ``latency.png`` (latency over time, its distribution, progress)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    figures_path = directory / "figures.json"
    figures_path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plot_path = directory / "latency.png"
    fig, (ax_time, ax_cdf, ax_progress) = plt.subplots(1, 3, figsize=(16, 4.5))
    if timings:
        t = np.array(timings, dtype=np.int64)
        start = t[:, 0].min()
        commit_s = (t[:, 0] - start) / 1e9
        ax_time.scatter(commit_s, (t[:, 2] - t[:, 0]) / 1e6, s=2, label="commit → durable")
        ax_time.scatter(commit_s, (t[:, 1] - t[:, 0]) / 1e6, s=2, label="commit → accepted")
        for name, column in (("durable", 2), ("accepted", 1)):
            values = np.sort(np.repeat((t[:, column] - t[:, 0]) / 1e6, t[:, 3]))
            ax_cdf.plot(values, np.arange(1, len(values) + 1) / len(values), label=name)
    ax_time.set(xlabel="commit time (s)", ylabel="latency (ms)", title="end-to-end latency per sink part")
    ax_time.legend(loc="upper left")
    ax_cdf.set(xlabel="latency (ms)", ylabel="fraction of changes", title="latency distribution")
    ax_cdf.legend(loc="lower right")
    if samples:
        ax_progress.plot([s[0] for s in samples], [s[1] for s in samples], label="synced changes")
    for at, text in events:
        ax_progress.axvline(at, color="red", linestyle=":")
        ax_progress.annotate(text.split(" (")[0][:40], (at, 0), rotation=90, fontsize=7, va="bottom")
    ax_progress.set(xlabel="time since job start (s)", ylabel="change rows synced", title="progress")
    fig.tight_layout()
    fig.savefig(plot_path, dpi=100)
    plt.close(fig)
    return [figures_path, plot_path]
