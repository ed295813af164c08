"""Instants on the machines' clock (seconds, a float), computed so that a whole number of milliseconds
after a whole number of milliseconds is exactly the instant a millisecond clock reads.

Summing floats drifts: 0.1 s + 50 ms is 0.15000000000000002, a hair after 0.15, so a timer due at 150 ms
would not fire at t = 150 ms (the trace contract's clock, docs/conformance.md) but a millisecond later.
The machines therefore count in whole microseconds and divide once.
"""

from __future__ import annotations

_US: float = 1_000_000


def ms_after(now: float, ms: float) -> float:
    """The instant ``ms`` milliseconds after ``now``."""
    return (round(now * _US) + round(ms * 1000)) / _US


def periods_past(start: float, now: float, period_ms: int) -> int:
    """How many whole periods of ``period_ms`` have begun from ``start`` (itself the first) up to ``now``,
    for ``now`` >= ``start``: 1 at ``start``, 2 at one period after it, and so on."""
    return (round(now * _US) - round(start * _US)) // (period_ms * 1000) + 1
