"""Instants on every machine's clock (seconds, a float), computed in whole units, so that a whole number of
milliseconds after a whole number of milliseconds is exactly the instant a millisecond clock reads.

Summing floats drifts: 0.1 s + 200 ms is 0.30000000000000004, a hair after 0.3, so a timer due 200 ms after
t = 0.1 s would not fire at t = 0.3 s (the conformance traces' clocks move in whole milliseconds) but a millisecond
later, where a Java or Rust implementation counting integer milliseconds fires it on time. So every machine (shuffle,
sync, cluster, the servers' connection bounds) computes its instants here: each instant or duration is counted in
whole tenths of a nanosecond (the IEEE double product ``seconds * 1e10``, rounded half to even: Java's
``Math.rint``), summed as integers, and the sum divided by 1e10 once (the nearest float). The unit holds whole
milliseconds and microseconds and the binary fractions down to 2**-10 s (0.0009765625) exactly, and is coarse enough
that a float's own rounding in a duration (400 ms x 0.75 is 0.30000000000000004 s) disappears. For instants below
2**20 s (12 days) that are whole units, an instant computed here is the float nearest its exact value, so comparing
it with ``now`` (``now >= due``) decides what integers decide; above that a float cannot hold a tenth of a
nanosecond and the rounding is a float's own. An instant or a duration of :data:`FOR_EVER` or more (a sync client's
deadline of for ever) is added as floats add. A few integer operations, not decimal arithmetic: the writer asks once per buffer it opens.
"""

from __future__ import annotations

from typing import Final

_PER_SECOND: Final = 10_000_000_000
"""Units in a second: a tenth of a nanosecond is what an instant or a duration is counted in."""
_PER_MS: Final = _PER_SECOND // 1000
FOR_EVER: Final = 1e12
"""Seconds (31,700 years) no clock reaches: an instant or a duration this far (a sync client's deadline of for ever,
1e300, or infinity) is added as floats add, since its product with the unit may not be finite."""


def _units(seconds: float) -> int:
    """``seconds`` in whole units, rounded half to even."""
    return round(seconds * _PER_SECOND)


def ms_after(now: float, ms: float) -> float:
    """The instant ``ms`` milliseconds after ``now``."""
    return (_units(now) + round(ms * _PER_MS)) / _PER_SECOND


def after(now: float, seconds: float) -> float:
    """The instant ``seconds`` after ``now`` (before it, for a negative duration); past :data:`FOR_EVER`, as floats
    add."""
    if max(abs(now), abs(seconds)) >= FOR_EVER:
        return now + seconds
    return (_units(now) + _units(seconds)) / _PER_SECOND


def elapsed(since: float, now: float) -> float:
    """The seconds from ``since`` to ``now``; past :data:`FOR_EVER`, as floats subtract."""
    if max(abs(since), abs(now)) >= FOR_EVER:
        return now - since
    return (_units(now) - _units(since)) / _PER_SECOND


def periods_past(start: float, now: float, period_ms: int) -> int:
    """How many whole periods of ``period_ms`` have begun from ``start`` (itself the first) up to ``now``,
    for ``now`` >= ``start``: 1 at ``start``, 2 at one period after it, and so on."""
    return (_units(now) - _units(start)) // (period_ms * _PER_MS) + 1
