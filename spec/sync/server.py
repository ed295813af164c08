"""The sync server's endpoint, sans-IO: every peer-visible decision of a server, fed events and ``now``.

Like h11's ``Connection``, it does no I/O and reads no clock: the driver (``reference.sync.server``)
reads and decodes a put, asks the endpoint, and carries out what it answers.  The endpoint owns:

- admission order of a put: its schema (``put_schema``); a draining server answers probes only
  (``admit``); a probe is answered with the origin's numbers (``accepted``); then its format,
  table name and store location (``destination``), its schema, fit to its table and values
  (``change``); a put that would push pending data past the
  high-watermark, or that could not get the write lock in time, is answered ``accepted=false``
  (``busy``: retry later) and nothing of it is kept; a put whose call already ended is not
  recorded (``record``: ``InterruptedPut``); a recorded put is answered after the steps it made
  due, so a flush at the put is in its numbers (``accepted``);
- the flush schedule, one step at a time (``next_action``): first a silent open transaction is
  discarded at its timeout, then failed tables whose wait is over are retried, then the flush
  policy (lag, size with a squash first, count) runs over the tables not waiting to retry;
- a flush's outcome (``flushed``, ``flush_failed``: the retry's backoff, ``spec.sync.flush_failures``);
- when it next needs to be asked without a put (``next_deadline``), at most the flush task's
  interval from ``now``;
- an origin's durable number after a restart (``recorded_durable``): the largest any table records.

Time is a parameter of every event, and every deadline is compared here, in deadline form
(``now >= deadline``), so what ``next_deadline`` promises is what ``next_action`` does at it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from spec.clock import after
from spec.sync.admission import admit_put, admit_rows, admit_schema, fits_watermark
from spec.sync.confinement import check_store_location, table_name
from spec.sync.errors import InterruptedPut, ServerRestarted, SyncSchemaError, UnsupportedFormat
from spec.sync.flush_failures import FlushFailures, TableFailure
from spec.sync.messages import SyncCommand, SyncResponse, TableFormat
from spec.sync.responses import ResponseFactory
from spec.sync.schema import SyncSchema, TableShape
from spec.sync.squash import SquashedChange, squash_pending
from spec.sync.writer import FlushPlan, FlushReason, FlushTable, Received, SquashTable, SyncSettings, SyncWriter, is_probe


@dataclass(frozen=True)
class TransactionExpired:
    """Step: the open transaction of ``origin`` got no put for ``timeout_s`` and was discarded with its puts."""

    origin: str
    timeout_s: float


ServerAction = TransactionExpired | FlushTable
"""What the driver carries out next: log a discarded transaction, or flush a table and report how it went."""


def recorded_durable(tables: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Every origin's durable number after a restart, from the numbers each table records: the
    largest (a table flushed earlier records an older number; no table is read last by rule)."""
    durable: dict[str, int] = {}
    for numbers in tables:
        for origin, seq in numbers.items():
            durable[origin] = max(durable.get(origin, seq), seq)
    return durable


class SyncServerEndpoint:
    """One sync server's protocol state: transactions, pending data, failing tables and the ``first`` flag.

    Callers serialize (the driver holds its write lock around every call).
    """

    def __init__(
        self,
        settings: SyncSettings = SyncSettings(),
        durable: Mapping[str, int] | None = None,
        flush_failures: FlushFailures | None = None,
        life: int | None = None,
    ) -> None:
        """``life``: the number the server drew at its start, named in every response (the server-life
        extension, ``spec.sync.messages.SERVER_LIFE_FIELD``; None: without it)."""
        self._writer: SyncWriter[SquashedChange] = SyncWriter(settings, durable)
        self._failures = flush_failures or FlushFailures()
        self._responses = ResponseFactory(life)
        self.draining = False
        self.peak_pending_bytes = 0

    # -- settings and inspection ----------------------------------------------
    @property
    def settings(self) -> SyncSettings:
        return self._writer.settings

    def reconfigure(self, settings: SyncSettings) -> None:
        """Decide by ``settings`` from now on (pending data stays until the next step)."""
        self._writer.settings = settings

    @property
    def pending_bytes(self) -> int:
        """Pending bytes, what the size threshold and the high-watermark are compared with."""
        return self._writer.in_memory_bytes

    @property
    def pending_tables(self) -> list[str]:
        """Tables with pending data, oldest first."""
        return self._writer.pending_tables

    @property
    def open_transactions(self) -> int:
        return self._writer.open_transactions

    def failing_tables(self) -> dict[str, TableFailure]:
        """Tables whose last flush failed, and when each is tried again."""
        return self._failures.report()

    def sequences(self, origin: str) -> tuple[int | None, int | None]:
        """(memory, durable) numbers of ``origin``."""
        return self._writer.sequences(origin)

    # -- puts -----------------------------------------------------------------
    @staticmethod
    def put_schema(cmd: SyncCommand, batches: Sequence[pa.RecordBatch], stream_schema: pa.Schema | None) -> SyncSchema | None:
        """A whole put's sync schema: its batches' Arrow schema (a truncating put without rows: its
        stream's) under its descriptors; None for a put without rows; raise the schema's refusal."""
        arrow = batches[0].schema if batches else stream_schema if cmd.truncate else None
        if cmd.truncate and arrow is None:
            raise SyncSchemaError("a truncating put carries its table's Arrow schema")
        return SyncSchema.validate(cmd.column_descriptors, arrow) if arrow is not None else None

    def admit(self, cmd: SyncCommand, rows: int) -> bool:
        """A put arrived whole: True if it is a probe; raise ServerDraining for a put to a draining server,
        ServerRestarted for a put sent to another life of this server (a probe is always answered)."""
        probe = is_probe(rows, cmd.sequence_number) and not cmd.truncate
        admit_put(self.draining, probe)
        life = self._responses.life
        if not probe and cmd.server_life is not None and life is not None and cmd.server_life != life:
            raise ServerRestarted(cmd.origin, cmd.server_life, life)
        return probe

    def accepted(self, origin: str) -> SyncResponse:
        """The answer to a probe, or to a recorded put once the steps it made due are carried out (so a
        flush at the put is in the numbers): the origin's numbers."""
        return self._responses.accepted(*self._writer.sequences(origin))

    def busy(self) -> SyncResponse:
        """The answer to a put refused for now (write lock not had in time, or over the high-watermark): retry later."""
        return self._responses.overloaded()

    @staticmethod
    def destination(cmd: SyncCommand, allowed_locations: Sequence[str]) -> tuple[str, str | None]:
        """Where an admitted put goes, checked in this order: its format (Delta only), its table's
        name, the store location it names (one of ``allowed_locations``); raise the refusal."""
        if cmd.format != TableFormat.DELTA:
            raise UnsupportedFormat()
        return table_name(cmd.path), check_store_location(cmd.store, allowed_locations)

    @staticmethod
    def change(
        table: str, cmd: SyncCommand, schema: SyncSchema | None, batches: Sequence[pa.RecordBatch],
        fit: Callable[[SyncSchema], TableShape],
    ) -> tuple[SquashedChange | None, TableShape | None]:
        """The change a put makes to ``table`` and the table's shape with it (None, None: it changes
        nothing), checked in this order: the columns one table can hold, their fit to the table as
        stored (``fit``, the driver's lookup: raise TableSchemaMismatch), the values; raise the refusal."""
        rows = sum(b.num_rows for b in batches)
        if not (rows > 0 or cmd.truncate) or schema is None:
            return None, None
        admit_schema(table, schema)
        shape = fit(schema)
        tables = admit_rows(table, schema, [pa.Table.from_batches([b]) for b in batches if b.num_rows])
        return SquashedChange.of_put(schema, tables, cmd.truncate), shape

    def record(
        self, cmd: SyncCommand, *, table: str, rows: int, change: SquashedChange | None, now: float,
        claim: Callable[[], bool],
    ) -> Received | None:
        """Queue an admitted put for ``table``; raise the writer's refusals, or InterruptedPut.

        None: over the high-watermark, nothing is kept and the answer is ``busy``.  Otherwise
        ``claim()`` is asked right before recording (False: its call already ended, nothing is
        kept); the steps due (``next_action``) are carried out before the answer (``accepted``).
        """
        size = change.batch.nbytes if change is not None else 0
        if not fits_watermark(self._writer.in_memory_bytes, size, self.settings.high_watermark):
            return None
        if not claim():
            raise InterruptedPut()
        received = self._writer.put(table=table, origin=cmd.origin, sequence=cmd.sequence_number, rows=rows,
                                    size=size, payload=change, now=now, truncate=cmd.truncate)
        self.peak_pending_bytes = max(self.peak_pending_bytes, self._writer.in_memory_bytes)
        return received

    # -- the flush schedule -----------------------------------------------------
    def next_action(self, now: float) -> ServerAction | None:
        """The next step due at ``now``, in this order: discard a silent transaction, retry a failed
        table whose wait is over, flush by the policy; None when nothing is due.  A ``FlushTable`` is
        reported back (``flushed`` or ``flush_failed``) before the next call."""
        discarded = self._writer.expire(now)
        if discarded is not None:
            return TransactionExpired(discarded, self.settings.transaction_timeout_s)
        pending = set(self._writer.pending_tables)
        for table in self._failures.due(now):
            if table in pending:
                return FlushTable(table, FlushReason.RETRY)
            self._failures.nothing_left(table)  # else its past retry would be the next deadline for ever
        waiting = self._failures.waiting(now)
        while (action := self._writer.next_action(now, waiting)) is not None:
            if isinstance(action, SquashTable):
                self._writer.squashed(action.table, squash_pending(self._writer.squashable_items(action.table)))
            else:
                return action
        return None

    def start_draining(self) -> list[str]:
        """The server is shutting down: refuse puts but probes from now on; the tables to flush once each."""
        self.draining = True
        return self._writer.pending_tables

    def next_deadline(self, now: float) -> float:
        """When to be asked again without a put: the oldest pending data reaching the replication lag,
        the open transaction reaching its timeout, a failed table's retry, at most the flush task's
        interval from ``now``."""
        due = [self._writer.next_deadline(self._failures.report()), self._failures.next_retry()]
        return min([after(now, self.settings.flush_task_interval_s), *(d for d in due if d is not None)])

    # -- flushes ---------------------------------------------------------------
    def plan_flush(self, table: str, table_marks: Mapping[str, int], reason: FlushReason) -> FlushPlan[SquashedChange]:
        """What flushing ``table`` writes, given the per-origin marks the table holds."""
        return self._writer.plan_flush(table, table_marks, reason)

    def flushed(self, plan: FlushPlan[SquashedChange]) -> None:
        """``plan`` was committed: its numbers become durable, its table is healthy."""
        self._writer.complete_flush(plan)
        self._failures.succeeded(plan.table)

    def flush_failed(self, table: str, error: str, now: float) -> TableFailure:
        """A flush of ``table`` failed: its data stays pending; it is tried again after a backoff."""
        return self._failures.failed(table, error, now)

    @property
    def flush_failures(self) -> FlushFailures:
        """The failing tables and their backoff (a harness changes its waits as it runs, as it does the settings)."""
        return self._failures
