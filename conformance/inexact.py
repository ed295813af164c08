"""Whole-millisecond instants at which float arithmetic on seconds falls on the wrong side of a deadline (issue 43).

A machine that adds or subtracts float seconds (``now + timeout``, ``now - since >= bound``) instead of computing
its instants exactly (spec/clock.py) decides otherwise than an implementation counting integer milliseconds only at
instants whose float sum or difference is off by a hair: 0.1 + 0.2 is 0.30000000000000004. Cases that hit such an
instant are derived here by search (the fewest whole milliseconds from a start), never typed: a case states the
timeout's duration and where its clock stands, and asks for the first instant that tells the two apart.
"""

from __future__ import annotations

import itertools
from typing import Callable, Final

from spec.clock import ms_after

NEAR_MS: Final = 10_000
"""How far a search looks from where it starts before it looks near the next binades' edges."""
EDGES: Final = 8
"""How many binade edges (powers of two seconds) past the start a search looks near."""


def _first(wrong: Callable[[float], bool], start: float, first_ms: int, duration_ms: int) -> int:
    """The fewest whole ms (at least ``first_ms``) after ``start`` to an instant where ``wrong`` holds. A duration that
    is a multiple of the float spacing at the instant's magnitude (whole seconds past 512 s, say) sums exactly within a
    binade, so past the first ``NEAR_MS`` the search looks where the sum crosses a power of two."""
    near = range(first_ms, first_ms + NEAR_MS)
    edges = (round((2.0 ** k - start) * 1000) for k in range(1, 1100) if 2.0 ** k > start + first_ms / 1000)
    around = (d for edge in itertools.islice(edges, EDGES) for d in range(edge - duration_ms - 2, edge + 3)
              if d >= first_ms + NEAR_MS)
    found = next((d for d in itertools.chain(near, around) if wrong(ms_after(start, d))), None)
    if found is None:
        raise ValueError(f"no instant near {start} s where {duration_ms} ms sums otherwise: the search's premise broke")
    return found


def sum_late(duration_ms: int, start: float = 0.0, first_ms: int = 1) -> int:
    """The fewest whole ms (at least ``first_ms``) after ``start`` to an instant after which ``duration_ms`` summed as
    float seconds lands past the exact instant: a deadline so computed is not due at its instant."""
    return _first(lambda at: at + duration_ms / 1000 > ms_after(at, duration_ms), start, first_ms, duration_ms)


def sum_early(duration_ms: int, start: float = 0.0, first_ms: int = 1) -> int:
    """The fewest whole ms (at least ``first_ms``) after ``start`` to an instant after which ``duration_ms`` summed as
    float seconds lands short of the exact instant: a bound so computed is passed at its instant."""
    return _first(lambda at: at + duration_ms / 1000 < ms_after(at, duration_ms), start, first_ms, duration_ms)


def difference_long(duration_ms: int, start: float = 0.0, first_ms: int = 1) -> int:
    """The fewest whole ms (at least ``first_ms``) after ``start`` to an instant from which the float difference to
    the instant ``duration_ms`` later exceeds ``duration_ms``: an age so computed is past its bound at its instant."""
    return _first(lambda at: ms_after(at, duration_ms) - at > duration_ms / 1000, start, first_ms, duration_ms)
