"""Instants on every machine's clock (seconds, a float), computed in whole units, so that a whole number of
milliseconds after a whole number of milliseconds is exactly the instant a millisecond clock reads.

Summing floats drifts: 0.1 s + 200 ms is 0.30000000000000004, a hair after 0.3, so a timer due 200 ms after
t = 0.1 s would not fire at t = 0.3 s (the conformance traces' clocks move in whole milliseconds) but a millisecond
later, where a Java or Rust implementation counting integer milliseconds fires it on time. So every machine (shuffle,
sync, cluster, the servers' connection bounds) computes its instants here: each instant or duration is taken at its
decimal value (the shortest that reads back as the same float: 0.1 is 0.1) in whole tenths of a nanosecond, summed as
integers, and the result rounded to a float once. The unit holds whole milliseconds and microseconds and the binary
fractions down to 2**-10 s (0.0009765625) exactly, and is coarse enough that a float's own rounding in a duration
(400 ms x 0.75 is 0.30000000000000004 s) disappears. An instant computed here is the float nearest its exact value,
so comparing it with ``now`` (``now >= due``) decides what integers decide.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from typing import Final

_UNIT: Final = Decimal("1e-10")
"""A tenth of a nanosecond: what an instant or a duration is counted in."""
_ROOM: Final = Context(prec=330)
"""Digits enough for any finite float in whole units, and for a sum of two."""


def _exact(seconds: float) -> Decimal:
    """``seconds`` in whole units: its decimal value (the shortest that reads back as the same float), rounded to
    the nearest unit (infinity as it is)."""
    value = Decimal(repr(seconds))
    return value.quantize(_UNIT, context=_ROOM) if math.isfinite(seconds) else value


def ms_after(now: float, ms: float) -> float:
    """The instant ``ms`` milliseconds after ``now``."""
    return float(_ROOM.add(_exact(now), _exact(ms / 1000)))


def after(now: float, seconds: float) -> float:
    """The instant ``seconds`` after ``now`` (before it, for a negative duration)."""
    return float(_ROOM.add(_exact(now), _exact(seconds)))


def elapsed(since: float, now: float) -> float:
    """The seconds from ``since`` to ``now``."""
    return float(_ROOM.subtract(_exact(now), _exact(since)))


def periods_past(start: float, now: float, period_ms: int) -> int:
    """How many whole periods of ``period_ms`` have begun from ``start`` (itself the first) up to ``now``,
    for ``now`` >= ``start``: 1 at ``start``, 2 at one period after it, and so on."""
    return int(_ROOM.subtract(_exact(now), _exact(start)).scaleb(3) // period_ms) + 1
