"""Figures of a run: latency percentiles, throughput, the summary line, JSON and a latency plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from reference.pipeline.records import PartTiming

PERCENTILES = (50, 90, 99)


def _column(timings: Sequence[PartTiming], name: str) -> npt.NDArray[np.int64]:
    return np.fromiter((getattr(t, name) for t in timings), dtype=np.int64, count=len(timings))


def _latencies_ms(timings: Sequence[PartTiming], until: str) -> npt.NDArray[np.float64]:
    """Per part, milliseconds from its commit to ``until`` (``accepted_ns`` or ``durable_ns``)."""
    return (_column(timings, until) - _column(timings, "committed_ns")) / 1e6


def _per_change(timings: Sequence[PartTiming], until: str) -> npt.NDArray[np.float64]:
    """Each part's latency once per change it carried."""
    return np.repeat(_latencies_ms(timings, until), _column(timings, "changes"))


STAGES = (("accepted", "accepted_ns"), ("durable", "durable_ns"))
"""The latencies reported: commit to accepted by the server, commit to durable in the table."""


def latency_ms(timings: Sequence[PartTiming]) -> dict[str, dict[str, float]]:
    """Per-change percentiles (ms) from commit to accepted by the server and to durable in the table."""
    if not timings:
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, until in STAGES:
        values = _per_change(timings, until)
        figures = {f"p{p}": round(float(np.percentile(values, p)), 1) for p in PERCENTILES}
        figures["max"] = round(float(values.max()), 1)
        out[name] = figures
    return out


def throughput(changes: int, timings: Sequence[PartTiming], fallback_s: float) -> tuple[float, float]:
    """(changes/s, seconds) from the first commit to the last durable observation."""
    if timings:
        seconds = float(max(t.durable_ns for t in timings) - min(t.committed_ns for t in timings)) / 1e9
    else:
        seconds = fallback_s
    return (changes / seconds if seconds > 0 else 0.0), seconds


def summary_line(rows: int, durable: dict[str, int], rate: float) -> str:
    points = " ".join(f"{o}={n}" for o, n in durable.items())
    return f"pipeline OK: {rows} rows, table matches, durable {points}, {rate:,.0f} changes/s"


def run_title(figures: dict[str, Any]) -> str:
    """The plot's title: which run it is and the parameters that shape its latencies."""
    o = figures.get("options", {})
    rate = o.get("rate") or 0
    return (f"pipeline {figures.get('run_id', '?')}: {o.get('changes')} changes, {o.get('keys')} keys, "
            f"{o.get('origins')} origins, {o.get('writers')} writers -> {figures.get('shuffle')} shuffle -> "
            f"{o.get('readers')} sinks, rate {f'{rate:g}/s' if rate else 'unthrottled'}"
            f"{', chaos' if o.get('chaos') else ''}")


def write(directory: Path, figures: dict[str, Any], timings: Sequence[PartTiming],
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
        committed = _column(timings, "committed_ns")
        commit_s = (committed - committed.min()) / 1e9
        for name, until in reversed(STAGES):
            ax_time.scatter(commit_s, _latencies_ms(timings, until), s=2, label=f"commit → {name}")
            values = np.sort(_per_change(timings, until))
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
    ax_progress.set(xlabel="time since job start (s)", ylabel="sink rows synced", title="progress")
    fig.suptitle(run_title(figures))
    fig.tight_layout()
    fig.savefig(plot_path, dpi=100)
    plt.close(fig)
    return [figures_path, plot_path]
