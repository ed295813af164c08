"""Many source transactions as one sync transaction (sans-IO): what a source sends when Postgres
sends faster than one sync round trip per transaction.

A batch of consecutive committed transactions travels as one sync transaction numbered by its
**last** commit LSN, with one put per table holding that table's changes of every transaction in
commit order. The slot's rule is unchanged: the sync server reports the batch durable only once all
of it is, and a number at or below durable covers every transaction up to it; Postgres resends
from the confirmed position, and what a replayed batch holds is skipped whole.

One put is answered at a time, and the stream is read meanwhile (:meth:`Batch.due`): while a put
is answered the next batch grows, so the slower the server answers, the larger its puts. With none
being answered, a batch is sent once it holds ``max_rows`` rows, once its first transaction has
waited ``budget_s`` (the latency it may add), or as soon as nothing more is ready to read (so a
quiet stream sends each transaction at once, and a backlog fills batches by itself). Reading stops
while a put is answered only when the batch holds ``max_rows`` rows (the source's memory) or a
transaction waits that cannot join it (:meth:`Batch.held`): a transaction whose table is described
differently from the same table earlier in the batch (a column was added) starts the next batch (a
put has one schema).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spec.clock import after
from spec.pgoutput.changes import TableChanges, TableImage
from spec.pgoutput.transactions import SourceTransaction

MAX_ROWS = 20_000
"""Rows of one sync transaction at most (the sync client splits its puts under the message limit)."""
BUDGET_S = 0.05
"""How long the first transaction of a batch may wait for others."""


@dataclass
class Coalesced:
    """One sync transaction: its number (the last commit LSN), the changes per table in commit order."""

    number: int
    changes: dict[str, TableChanges]
    tables: dict[str, TableImage]
    transactions: list[SourceTransaction]
    """The source transactions it holds (those with rows), in commit order."""

    @property
    def row_count(self) -> int:
        return sum(tx.row_count for tx in self.transactions)


@dataclass
class Batch:
    """The transactions read and not yet sent."""

    max_rows: int = MAX_ROWS
    budget_s: float = BUDGET_S
    opened_at: float | None = None
    changes: dict[str, TableChanges] = field(default_factory=dict)
    tables: dict[str, TableImage] = field(default_factory=dict)
    rows: int = 0
    number: int | None = None
    transactions: list[SourceTransaction] = field(default_factory=list)
    deferred: tuple[SourceTransaction, float] | None = None
    """A transaction read that does not fit, and when: the first of the next batch."""

    def offer(self, tx: SourceTransaction, now: float) -> None:
        """Take the next transaction read: it joins the batch if it :meth:`fits`, or else waits to start the
        next one (the batch is then due, and nothing more is read into it)."""
        if self.fits(tx):
            self.add(tx, now)
        else:
            assert self.deferred is None, "send the batch first"
            self.deferred = (tx, now)

    def due(self, now: float, *, drained: bool, putting: bool) -> bool:
        """Hand the batch to the sync client now: never while a put is being answered (``putting``); else
        once it is :meth:`full`, a transaction waits that does not fit, or nothing more was ready to read
        (``drained``)."""
        return not self.empty and not putting and (drained or self.deferred is not None or self.full(now))

    def held(self, *, putting: bool) -> bool:
        """Stop reading until the put being answered is: the batch holds ``max_rows`` rows, or a transaction
        waits that does not fit."""
        return putting and (self.rows >= self.max_rows or self.deferred is not None)

    def fits(self, tx: SourceTransaction) -> bool:
        """Whether ``tx`` may join: every table it touched described as the batch has it, and neither it
        nor the batch spilled (a spilled transaction travels alone: its puts come first, from the spill)."""
        if not self.empty and (tx.spilled_rows or any(t.spilled_rows for t in self.transactions)):
            return False
        return all(self.tables.get(path, image) == image for path, image in tx.tables.items())

    def add(self, tx: SourceTransaction, now: float) -> None:
        """Take a transaction that :meth:`fits`."""
        assert self.fits(tx), "send the batch first"
        if self.opened_at is None:
            self.opened_at = now
        for path, changes in tx.changes.items():
            if changes:
                self.changes.setdefault(path, TableChanges()).extend(changes)
                self.tables[path] = tx.tables[path]
        if tx.row_count:
            self.transactions.append(tx)
        self.rows += tx.row_count
        self.number = tx.commit_lsn

    def full(self, now: float) -> bool:
        """Send now: the batch holds enough rows, or its first transaction waited its budget."""
        return self.rows >= self.max_rows or (self.opened_at is not None and now >= after(self.opened_at, self.budget_s))

    def take(self) -> Coalesced | None:
        """The batch as one sync transaction (None: no transaction, or none with rows); the next batch starts
        with the transaction that waited, if one did."""
        out = None if self.number is None or not self.rows else Coalesced(
            self.number, self.changes, self.tables, self.transactions)
        deferred, self.deferred = self.deferred, None
        self.opened_at, self.changes, self.tables, self.rows, self.number, self.transactions = None, {}, {}, 0, None, []
        if deferred is not None:
            self.add(*deferred)
        return out

    def drop(self) -> None:
        """Forget every transaction read and not handed over (Postgres sends them again)."""
        self.deferred = None
        self.take()

    @property
    def empty(self) -> bool:
        return self.number is None
