"""Live conformance cases for streaming-shuffle writers and readers (Spark 4.3.0's protocol).

The implementation under test plays one role; the scripted peer (:mod:`conformance.shuffle.peer`)
plays the other on the spec's machines, deviating on purpose in the fault cases. Verdicts come from
the wire and from connections closing, never from an exit status. Where the wire alone cannot tell
a rejection from a success, a case keeps a second connection waiting: a writer that rejected a fault
abandons it, one that accepted the fault keeps waiting for it.

What counts as **rejecting** a fault (used by every ``rejects-`` case): within its window
(:func:`.helpers.reject_window`: :data:`REJECT_WINDOW_S` where the rejection is a SHOULD, a wider one where it is a
MUST, which only an implementation failing the case waits out) the implementation closes the connection, or (targets with ``reports``)
reports an error whose condition is the one the case names (a report without a condition is
accepted, one naming another condition is not); and it sends nothing the case forbids, such as a
CREDIT for the faulty DATA, including for :data:`SETTLE_S` after the rejection.

Targets and their capabilities: :mod:`conformance.shuffle.targets`.

The suite is split by role: :mod:`.helpers` (constants, watching an implementation, raw frames,
workloads), :mod:`.writer_cases` and :mod:`.reader_cases` (the checks), :mod:`.catalogue` (the
cases themselves, as data, and :data:`SUITE`).
"""

from __future__ import annotations

from conformance.shuffle.suite.catalogue import CASES, SUITE

__all__ = ["CASES", "SUITE"]
