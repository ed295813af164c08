"""How much of an open transaction a source holds in memory: the spill budget (sans-IO).

Under pgoutput protocol version 1, Postgres sends a transaction only once it has committed, whole,
between its Begin and its Commit (a larger one than ``logical_decoding_work_mem`` waits in
Postgres's own spill files first; an aborted transaction or a rolled-back subtransaction is never
sent), and one transaction at a time. So a source needs no abort handling to hold a transaction
until its Commit: only a bound. It counts the pgoutput bytes of the open transaction's messages;
once they reach ``limit``, the changes it holds are written out (the reference's spill file, as
the puts they become) and the count starts again, so what is held in memory is bounded by
``limit`` whatever the transaction's size. Nothing written out is put before the Commit arrives,
and a spilled transaction travels alone (:class:`~spec.pgoutput.coalesce.Batch`), its puts read
back one at a time.

On PySpark the same bound holds twice: the source task spills the open transaction's changes as
they are (it routes each to the sink that owns its key once the Commit arrived), and each sink
weighs each change it holds of the parts it has not sent (:func:`change_weight`, about its text
bytes, so a few wide rows count as much as many narrow ones) against its own budget, writing every
open part out once it is reached; at the transaction's end each part goes as one put (one sync
transaction), its pieces read back one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from spec.pgoutput.changes import RowChange

SPILL_BYTES: Final = 8 * 1024 * 1024
"""The default bound: pgoutput bytes of an open transaction held as changes before they are written out
(decoded changes take several times their wire size)."""


@dataclass
class SpillBudget:
    """The open transaction's bytes held in memory, against ``limit``."""

    limit: int = SPILL_BYTES
    held: int = 0

    def __post_init__(self) -> None:
        if self.limit <= 0:
            raise ValueError(f"a spill budget must be positive, not {self.limit}")

    def note(self, size: int) -> bool:
        """``size`` more bytes of the open transaction arrived; True when what is held must be written out."""
        self.held += size
        return self.held >= self.limit

    def released(self) -> None:
        """What was held was written out, or its transaction committed."""
        self.held = 0


VALUE_BYTES: Final = 8
"""What a value that is not text or bytes (a number, a date, a NULL) counts for in :func:`change_weight`."""


def change_weight(change: RowChange) -> int:
    """About the bytes a routed change holds: its text and bytes values by length, others as :data:`VALUE_BYTES`
    (what a sink notes in its :class:`SpillBudget`; pgoutput sends text, so close to the source's count)."""
    values = (*(change.old_key or ()), *(change.new_key or ()), *(change.values or ()))
    return sum(len(v) if isinstance(v, (str, bytes)) else VALUE_BYTES for v in values)
