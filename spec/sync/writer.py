"""The sync writer: Seafowl's transaction queue, sequence numbers and flush policy, sans-IO.

A transaction is durable once its last put arrived, every table it touched has been
flushed since, and every earlier transaction *of its origin* is durable (ours: Seafowl
keeps one queue of all origins, so one origin's unflushed table, a table whose flush
keeps failing, held back every other origin's numbers; a flush applies a table's pending
items in arrival order whatever the rule, so only when a number is reported differs, and
no number covers rows that are not in the tables).  Flushing is a two-step operation so
the runtime can do the I/O in between: ``plan_flush`` (pure) says what to write
and what the numbers will be afterwards, ``complete_flush`` records it.  Time is
always a parameter.

Sequence numbers (this project's rule; Seafowl leaves it open): a transaction that
closes with a number above the origin's memory number is new.  One that closes at or
below the origin's *durable* number is a replay of what the tables already hold: it
is acknowledged and not applied again, and no number moves.  Anything in between
(at or below memory, above durable) is refused with SequenceNotIncreasing and the
closing put is not recorded, so a number a client is told never goes backwards and
never covers rows that are not in the table.  A replay that closes an open transaction
drops that transaction's earlier puts at once (the tables hold them already).

Transaction timeout (ours; Seafowl waits for ever): an open transaction that received no
put for ``transaction_timeout_s`` is discarded with its pending puts (``expire``, or the
next put of another origin), so one silent origin does not refuse every other origin for
ever (interleaving).  Its origin's next put is refused with TransactionDiscarded: the
client replays from its durable number.
"""

from __future__ import annotations

import bisect
import enum
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spec.clock import after
from spec.sync.errors import (
    EmptyTransaction,
    InterleavedTransaction,
    SequenceNotIncreasing,
    SyncError,
    TransactionDiscarded,
)
from spec.sync.messages import MAX_MESSAGE_BYTES

P = TypeVar("P")

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class SyncSettings:
    """Seafowl's ``[misc.sync_conf]`` settings with its defaults."""

    max_in_memory_bytes: int = 3 * GIB
    max_replication_lag_s: float = 600.0
    max_syncs_per_url: int = 100
    write_lock_timeout_s: float = 3.0
    flush_task_interval_s: float = 900.0
    high_watermark_bytes: int | None = None
    """Pending plus in-flight bytes a put may not push past (None: max_in_memory_bytes + one largest message)."""
    transaction_timeout_s: float = 300.0
    """An open transaction that received no put for this long is discarded (ours; Seafowl waits forever)."""

    @property
    def high_watermark(self) -> int:
        """The memory high-watermark: above the flush threshold, so flushing starts first.

        The default leaves room for one largest message above the threshold, which the
        size policy keeps pending data under as long as flushes succeed.
        """
        if self.high_watermark_bytes is not None:
            return self.high_watermark_bytes
        return self.max_in_memory_bytes + MAX_MESSAGE_BYTES


class RunningTotals(Protocol):
    """Running totals read by position (a list, a NumPy array)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> int: ...


@dataclass(frozen=True)
class RowGroupLimits:
    """What a flush holds of the rows it writes at once: one Parquet row group, cut by rows and bytes.

    A flush writes its rows to its data files a row group at a time, each taken from the rows in
    key order as it is written, so beyond its inputs it holds one row group, never a sorted copy of
    everything it writes.  ``max_rows`` also bounds what reading one row back costs (a flush that
    needs stored values reads only the row groups holding them).
    """

    max_rows: int = 4096
    max_bytes: int = 4 * MIB

    def __post_init__(self) -> None:
        if self.max_rows < 1 or self.max_bytes < 1:
            raise ValueError("row groups hold at least one row and one byte")

    def cut(self, ends: RunningTotals) -> list[tuple[int, int]]:
        """``[start, end)`` row groups of rows whose byte sizes run up to ``ends`` (``ends[i]``: the bytes
        of rows ``0..i``, non-decreasing): each at most ``max_rows`` rows and ``max_bytes`` bytes, but
        never empty (a row larger than ``max_bytes`` is a row group of its own)."""
        groups: list[tuple[int, int]] = []
        start, rows = 0, len(ends)
        while start < rows:
            before = ends[start - 1] if start else 0
            end = min(bisect.bisect_right(ends, before + self.max_bytes, start, rows), start + self.max_rows)
            end = max(end, start + 1)
            groups.append((start, end))
            start = end
        return groups


def row_ends(rows: pa.Table, order: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The bytes of rows ``order[0..i]`` of ``rows`` for each i (what ``RowGroupLimits.cut`` reads): fixed-width
    values by their width, strings and binaries by their length and offset."""
    fixed = 0
    sizes = np.zeros(len(order), np.int64)
    for column in rows.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind) \
                or pa.types.is_large_binary(kind):
            # Lengths first, then their order: taking the column itself would copy every string.
            lengths = pc.fill_null(pc.binary_length(column), 0).take(order) if len(order) else pa.array([], pa.int64())
            sizes += lengths.to_numpy(zero_copy_only=False).astype(np.int64)
            fixed += 8 if pa.types.is_large_string(kind) or pa.types.is_large_binary(kind) else 4
        else:
            try:
                fixed += max(kind.bit_width // 8, 1)
            except ValueError:  # no fixed width: its average
                fixed += -(-column.nbytes // max(len(column), 1))
    return np.cumsum(sizes + fixed)


class FlushReason(enum.Enum):
    """Why a table is flushed; policy checks run in this order (requested aside)."""

    LAG = "lag"
    SIZE = "size"
    COUNT = "count"
    RETRY = "retry"
    """A table whose flush failed, tried again once its wait is over (``spec.sync.flush_failures``)."""
    REQUESTED = "requested"


class StaleFlushPlan(SyncError):
    """A flush plan was completed after its table received more data."""

    condition = "STALE_FLUSH_PLAN"


class Received(enum.Enum):
    """What ``SyncWriter.put`` did with a put."""

    RECORDED = "recorded"
    REPLAY = "replay"
    """A transaction closed at or below the origin's durable number: acknowledged, not applied."""


def is_probe(rows: int, sequence: int | None) -> bool:
    """A put with zero rows and no sequence number only asks for the current numbers."""
    return rows == 0 and sequence is None


@dataclass
class SyncTransaction:
    """One origin's run of puts; ``sequence`` is known once its last put arrived."""

    id: int
    origin: str
    sequence: int | None
    locations: set[str] = field(default_factory=set)
    last_put: float = 0.0


@dataclass(frozen=True)
class PendingItem(Generic[P]):
    """Data of one put (or of several squashed puts) waiting for one table."""

    tx_ids: tuple[int, ...]
    payload: P
    rows: int
    size: int


@dataclass
class _TableQueue(Generic[P]):
    items: list[PendingItem[P]]
    insertion_time: float
    # Squashed at most once between flushes: re-squashing on every put would be quadratic.
    squashed: bool = False

    @property
    def size(self) -> int:
        return sum(i.size for i in self.items)


@dataclass(frozen=True)
class SquashTable:
    """Policy action: squash this table's pending items, then ask again."""

    table: str


@dataclass(frozen=True)
class FlushTable:
    """Policy action: flush all pending items of this table."""

    table: str
    reason: FlushReason


@dataclass(frozen=True)
class FlushPlan(Generic[P]):
    """What a flush writes and what holds once it is committed.

    It names the pending items it covers (``items``, the table's whole queue when it was made):
    the plan is stale once the queue holds anything else, however it changed (a put, a squash, a
    dropped transaction), with no counter each of those must remember to move.
    """

    table: str
    reason: FlushReason
    items: tuple[PendingItem[P], ...]
    apply: tuple[PendingItem[P], ...]
    table_marks: dict[str, int]
    durable_after: dict[str, int]

    @property
    def skipped(self) -> int:
        """Items left out because the table already holds every transaction in them."""
        return len(self.items) - len(self.apply)

    def covers(self, queue: list[PendingItem[P]]) -> bool:
        """Whether ``queue`` is still exactly the items this plan was made from (the same objects)."""
        return len(queue) == len(self.items) and all(a is b for a, b in zip(queue, self.items))


class SyncWriter(Generic[P]):
    """Transactions, pending per-table data and the memory/durable numbers of every origin."""

    def __init__(self, settings: SyncSettings = SyncSettings(), durable: Mapping[str, int] | None = None) -> None:
        self.settings = settings
        self._txs: dict[int, SyncTransaction] = {}
        self._next_tx = 0
        self._tables: dict[str, _TableQueue[P]] = {}
        restored = dict(durable or {})
        # A restored durable number is also in memory: memory >= durable always holds.
        self._memory: dict[str, int] = dict(restored)
        self._durable: dict[str, int] = restored
        self._discarded: set[str] = set()

    # -- inspection -------------------------------------------------------
    def sequences(self, origin: str) -> tuple[int | None, int | None]:
        """(memory, durable) sequence numbers of ``origin``."""
        return self._memory.get(origin), self._durable.get(origin)

    @property
    def in_memory_bytes(self) -> int:
        """Total size of pending data."""
        return sum(q.size for q in self._tables.values())

    @property
    def pending_tables(self) -> list[str]:
        """Tables with pending data, oldest pending data first."""
        return list(self._tables)

    @property
    def open_transactions(self) -> int:
        """Transactions not yet durable."""
        return len(self._txs)

    def pending_items(self, table: str) -> list[PendingItem[P]]:
        """The pending items of ``table`` in arrival order."""
        q = self._tables.get(table)
        return list(q.items) if q else []

    def transaction(self, tx_id: int) -> SyncTransaction | None:
        """A transaction that is not yet durable."""
        return self._txs.get(tx_id)

    # -- puts -------------------------------------------------------------
    def put(
        self, *, table: str, origin: str, sequence: int | None, rows: int, size: int, payload: P | None, now: float,
        truncate: bool = False,
    ) -> Received:
        """Record a put (not a probe); raise InterleavedTransaction, EmptyTransaction or SequenceNotIncreasing.

        A truncating put (the truncate extension) is queued for its table like one with rows, even without."""
        queued = rows > 0 or truncate
        if is_probe(rows, sequence) and not truncate:
            raise ValueError("a probe is answered from sequences(), it is not a put")
        self.expire(now)
        if origin in self._discarded:
            self._discarded.discard(origin)
            raise TransactionDiscarded(origin, self.settings.transaction_timeout_s)
        open_tx = self._open_transaction()
        if open_tx is not None and origin != open_tx.origin:
            raise InterleavedTransaction(origin, open_tx.origin)
        if open_tx is None and not queued and sequence is not None:
            raise EmptyTransaction(origin, sequence)
        replay = sequence is not None and self._is_replay(origin, sequence)
        if replay:
            if open_tx is not None:  # its earlier puts are in the tables already
                self._drop(open_tx)
            return Received.REPLAY
        if open_tx is not None:
            tx = open_tx
            tx.sequence = sequence
            tx.last_put = now
            if queued:
                tx.locations.add(table)
        else:
            tx = SyncTransaction(self._next_tx, origin, sequence, {table}, now)
            self._next_tx += 1
            self._txs[tx.id] = tx
        if queued:
            if payload is None:
                raise ValueError("a put with rows needs a payload")
            item = PendingItem((tx.id,), payload, rows, size)
            q = self._tables.get(table)
            if q is None:
                self._tables[table] = _TableQueue([item], now)
            else:
                q.items.append(item)
        if sequence is not None:
            self._memory[origin] = sequence
            if not tx.locations:  # closed by a put without rows after its tables were flushed: durable now,
                self._retire_complete()  # not at some later flush of another table (which may never come)
        return Received.RECORDED

    def _open_transaction(self) -> SyncTransaction | None:
        """The open transaction: only the newest one can be (interleaving is refused)."""
        last = next(reversed(self._txs.values()), None)
        return last if last is not None and last.sequence is None else None

    def _drop(self, tx: SyncTransaction) -> None:
        """Forget an open transaction and its pending puts (the newest items of the tables it touched)."""
        del self._txs[tx.id]
        for table in tx.locations:
            q = self._tables[table]
            q.items = [item for item in q.items if tx.id not in item.tx_ids]
            if not q.items:
                del self._tables[table]
        self._retire_complete()

    def expire(self, now: float) -> str | None:
        """Discard the open transaction if it received no put for the transaction timeout; its origin."""
        tx = self._open_transaction()
        if tx is None or now < after(tx.last_put, self.settings.transaction_timeout_s):
            return None
        self._drop(tx)
        self._discarded.add(tx.origin)
        return tx.origin

    def next_deadline(self, skip: Collection[str] = ()) -> float | None:
        """When the policy or the transaction timeout next needs the writer, without a put: the oldest
        pending data (of tables not in ``skip``) reaching the replication lag, or the open transaction
        reaching its timeout."""
        due = [after(q.insertion_time, self.settings.max_replication_lag_s) for t, q in self._tables.items() if t not in skip]
        tx = self._open_transaction()
        if tx is not None:
            due.append(after(tx.last_put, self.settings.transaction_timeout_s))
        return min(due) if due else None

    def _is_replay(self, origin: str, sequence: int) -> bool:
        """True for a replay of a durable transaction; raise SequenceNotIncreasing for other old numbers."""
        memory, durable = self.sequences(origin)
        if memory is None or sequence > memory:
            return False
        if durable is not None and sequence <= durable:
            return True
        raise SequenceNotIncreasing(origin, sequence, memory, durable)

    # -- policy -----------------------------------------------------------
    def next_action(self, now: float, skip: Collection[str] = ()) -> SquashTable | FlushTable | None:
        """The flush policy: lag, then size (squash the largest table first), then count.

        Tables in ``skip`` (waiting to retry a failed flush) are left out, so one table
        that cannot be written never stops the others.
        """
        s = self.settings
        tables = {t: q for t, q in self._tables.items() if t not in skip}
        for table, q in tables.items():
            if now >= after(q.insertion_time, s.max_replication_lag_s):
                return FlushTable(table, FlushReason.LAG)
            break
        if tables and self.in_memory_bytes >= s.max_in_memory_bytes:
            table = max(tables, key=lambda t: tables[t].size)
            if not tables[table].squashed and len(self.squashable_items(table)) > 1:
                return SquashTable(table)
            return FlushTable(table, FlushReason.SIZE)
        for table, q in tables.items():
            if len(q.items) >= s.max_syncs_per_url:
                return FlushTable(table, FlushReason.COUNT)
        return None

    def oldest_table(self, skip: Collection[str] = ()) -> str | None:
        """The table whose pending data is oldest ("flush one table"), leaving out ``skip``."""
        return next((t for t in self._tables if t not in skip), None)

    def squashable_items(self, table: str) -> list[PendingItem[P]]:
        """The pending items of ``table`` whose transactions are closed (an open one may yet be dropped)."""
        q = self._tables.get(table)
        if q is None:
            return []
        return list(itertools.takewhile(lambda i: all(self._txs[t].sequence is not None for t in i.tx_ids), q.items))

    def squashed(self, table: str, items: Iterable[PendingItem[P]]) -> None:
        """Replace ``table``'s squashable items by their squashed form (same transactions, in order)."""
        q = self._tables[table]
        old = self.squashable_items(table)
        new_items = list(items)
        if [t for i in new_items for t in i.tx_ids] != [t for i in old for t in i.tx_ids]:
            raise ValueError("squashed items must cover the same transactions in order")
        q.items = new_items + q.items[len(old):]
        q.squashed = True

    # -- flushing ---------------------------------------------------------
    def plan_flush(
        self, table: str, table_marks: Mapping[str, int] | None = None, reason: FlushReason = FlushReason.REQUESTED
    ) -> FlushPlan[P]:
        """What flushing ``table`` writes, given the per-origin sequences the table already holds.

        Items whose transactions are complete and already in the table (a replay after a
        restart) are skipped; ``table_marks`` are ``held`` (the table's marks) advanced to the last
        complete transaction of each origin in this flush (its largest: an origin's transactions
        close with increasing numbers); ``durable_after`` is every origin's durable number once the
        flush is committed. ``held`` is only read: the plan's numbers are new mappings.
        """
        q = self._tables[table]
        held = table_marks or {}
        apply: list[PendingItem[P]] = []
        for item in q.items:
            txs = [self._txs[t] for t in item.tx_ids]
            if all(tx.sequence is not None and tx.sequence <= held.get(tx.origin, -1) for tx in txs):
                continue
            apply.append(item)
        closed = {tx.origin: tx.sequence for tx in (self._txs[t] for i in q.items for t in i.tx_ids)
                  if tx.sequence is not None}
        marks = {**held, **{origin: max(held.get(origin, seq), seq) for origin, seq in closed.items()}}
        flushed = {t for item in q.items for t in item.tx_ids}
        durable = dict(self._durable)
        for tx, sequence in self._durable_now(lambda tx: tx.locations - {table} if tx.id in flushed else tx.locations):
            durable[tx.origin] = sequence
        return FlushPlan(table, reason, tuple(q.items), tuple(apply), marks, durable)

    def complete_flush(self, plan: FlushPlan[P]) -> None:
        """Record that ``plan`` was committed to the table."""
        q = self._tables.get(plan.table)
        if q is None or not plan.covers(q.items):
            raise StaleFlushPlan(f"flush plan for {plan.table} is stale")
        del self._tables[plan.table]
        for t in {t for item in q.items for t in item.tx_ids}:
            self._txs[t].locations.discard(plan.table)
        self._retire_complete()

    def _durable_now(self, unflushed: Callable[[SyncTransaction], set[str]]) -> list[tuple[SyncTransaction, int]]:
        """The transactions (with their sequences) that are durable once each has ``unflushed(tx)``
        tables left to flush: closed, nothing left, and no earlier transaction of their origin waiting.
        They come in arrival order and each closed above its origin's memory number (which is at or above
        its durable one), so each sequence is already its origin's largest: no ``max`` is needed."""
        waiting: set[str] = set()
        durable: list[tuple[SyncTransaction, int]] = []
        for tx in self._txs.values():
            if tx.origin in waiting or tx.sequence is None or unflushed(tx):
                waiting.add(tx.origin)
            else:
                durable.append((tx, tx.sequence))
        return durable

    def _retire_complete(self) -> None:
        """Make the transactions that are closed and fully flushed, and all before them of their origin, durable."""
        for tx, sequence in self._durable_now(lambda tx: tx.locations):
            self._durable[tx.origin] = sequence
            del self._txs[tx.id]
