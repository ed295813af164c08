"""The "Time in whole units" section every generated specification has: how a machine adds and compares
instants (:mod:`spec.clock`), with examples computed from the clock itself, and which of the protocol's
deadlines it covers (each page names its own)."""

from __future__ import annotations

from typing import Final, Sequence

from spec import clock
from spec.docs.markdown import anchor, table

EXAMPLES: Final = ((0.1, 200), (0.7, 100), (1.1, 2200))
"""(instant in seconds, milliseconds after it): whole milliseconds whose float sum is not the instant a millisecond
clock reads."""


def time_section(deadlines: Sequence[str]) -> str:
    """The section for a page whose protocol computes ``deadlines`` (one line each) through the clock."""
    rows = [(f"{start:g} s + {ms} ms", repr(start + ms / 1000), repr(clock.ms_after(start, ms)))
            for start, ms in EXAMPLES]
    return (anchor("time") + "## Time in whole units\n\n"
            "A machine takes the time as a parameter (`now`, seconds, a float), never reads a clock. Summing float "
            "seconds drifts, so every instant a machine computes is computed in whole units (`spec/clock.py`): each "
            "instant or duration is counted in whole tenths of a nanosecond (the double product `seconds * 1e10` "
            "rounded half to even, Java's `Math.rint`: 0.1 s is 1,000,000,000 units, 2^-10 s 9,765,625), instants "
            "and durations are added and subtracted as integers, and the sum divided by 1e10 once, to the nearest "
            "float (`after`, `ms_after`; an age: `elapsed`). "
            "A deadline is due when `now >= deadline`, silence past a bound when `now > deadline`. For instants and "
            "durations in whole milliseconds (the clock of the conformance traces, `ADVANCE` and `CLOCK STOP <ms>`) "
            "a machine therefore decides exactly where an implementation counting integer milliseconds decides: a "
            "timeout never fires a millisecond early or late because a float sum fell a hair to one side of its "
            "instant.\n\n"
            + table(["instant", "float sum", "the machines' instant"], rows)
            + "\nThe deadlines of this protocol computed so:\n\n" + "".join(f"- {d}\n" for d in deadlines))
