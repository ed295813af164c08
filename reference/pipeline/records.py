"""What travels between the pipeline's tasks and its driver: a change on the shuffle, a part's timing.

Both are named tuples, read by name everywhere. On the shuffle a change travels as the plain
tuple of its fields (:data:`WireRecord`): the shuffle pickles each record on its own, and a named
tuple carries its class path in every pickle (twice the bytes and about four times the pickling
time of the plain tuple, measured on this record).
"""

from __future__ import annotations

from typing import NamedTuple

from reference.pipeline.changes import Change, Op


class ChangeRecord(NamedTuple):
    """One change as the shuffle carries it from a source task to the sink that owns its key."""

    origin: int
    seq: int
    """Its source transaction's sequence number."""
    part_size: int
    """How many changes of that transaction this sink receives (the sink's part is then complete)."""
    committed_ns: int
    """When the source committed the transaction (wall clock, for end-to-end latency)."""
    change: Change

    def wire(self) -> WireRecord:
        """The record as the shuffle carries it; :meth:`read` is its inverse."""
        c = self.change
        return (self.origin, self.seq, self.part_size, self.committed_ns, int(c.op), c.entity, c.old_id,
                c.new_id, c.value, c.note, c.note_changed)

    @classmethod
    def read(cls, raw: WireRecord) -> ChangeRecord:
        origin, seq, part_size, committed_ns, op, entity, old_id, new_id, value, note, note_changed = raw
        return cls(origin, seq, part_size, committed_ns,
                   Change(Op(op), entity, old_id, new_id, value, note, note_changed))


WireRecord = tuple[int, int, int, int, int, int, int | None, int | None, int | None, str | None, bool]
"""A :class:`ChangeRecord` flattened to a plain tuple (what the shuffle carries)."""


class PartTiming(NamedTuple):
    """When one sink part was committed at its source, accepted by the sync server and seen durable."""

    committed_ns: int
    accepted_ns: int
    durable_ns: int
    changes: int
