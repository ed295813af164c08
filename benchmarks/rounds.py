"""Measurements alternated in rounds, so that the drift of a shared machine hits every variant alike.

A ratio between two variants means something only when they ran side by side: round r runs every variant once,
starting r places further into their order, and each ratio is taken within its round."""

from __future__ import annotations

from typing import Callable, Mapping


def alternated(runs: Mapping[str, Callable[[], float]], rounds: int,
               done: Callable[[dict[str, float]], None] = lambda row: None) -> list[dict[str, float]]:
    """``rounds`` rounds of every run in ``runs`` (round r in the order rotated by r); each round's figures in
    ``runs``' order, also given to ``done`` as each round ends (for progress)."""
    names = list(runs)
    table: list[dict[str, float]] = []
    for index in range(rounds):
        shift = index % len(names)
        measured = {name: runs[name]() for name in names[shift:] + names[:shift]}
        table.append({name: measured[name] for name in names})
        done(table[-1])
    return table
