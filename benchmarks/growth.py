"""How a figure grows with the work: fitted power-law exponents and log-log plots of measured curves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path


def exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log y over log x: 0 is flat, 1 linear, 2 quadratic (None below two points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(points) < 2:
        return None
    mx = sum(p[0] for p in points) / len(points)
    my = sum(p[1] for p in points) / len(points)
    var = sum((p[0] - mx) ** 2 for p in points)
    return round(sum((p[0] - mx) * (p[1] - my) for p in points) / var, 3) if var else None


def plot(path: Path, title: str, xlabel: str, ylabel: str, xs: Sequence[float],
         curves: Mapping[str, Sequence[float]]) -> None:
    """One log-log PNG of ``curves`` (label -> values over ``xs``), each labelled with its exponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, ys in curves.items():
        ax.loglog(xs, ys, marker="o", label=f"{label} (exponent {exponent(xs, ys)})")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
