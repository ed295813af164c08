"""Arrow Flight sync server: DoPut carries a ``DataSyncCommand`` and change batches.

Threads: Flight's request threads, one background flusher and one maintainer (the store's
compaction, vacuum and checkpoints, one table at a time under the write lock).  Every protocol
decision (transaction rules, numbers, which table to flush, what to skip) is the
spec's ``SyncWriter``; this module adds the write lock with its timeout, the
Delta I/O and the mapping of typed errors to Flight statuses.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from spec.sync.errors import SyncError, UnsupportedFormat
from spec.sync.messages import SyncCommand, SyncResponse, TableFormat, decode_descriptor_cmd
from spec.sync.responses import ResponseFactory
from spec.sync.schema import SyncSchema
from spec.sync.squash import Change, squash_pending
from spec.sync.writer import FlushReason, FlushTable, SquashTable, SyncSettings, SyncWriter, is_probe
from reference.sync.store import DeltaStore, MaintenanceReport

log = logging.getLogger(__name__)


def _flight_error(exc: SyncError) -> Exception:
    """INVALID_ARGUMENT for bad input (as Seafowl), INTERNAL otherwise; the text is the exact message."""
    error: Exception
    if exc.status == "INVALID_ARGUMENT":
        error = pa.ArrowInvalid(exc.message)
    else:
        error = flight.FlightInternalError(exc.message)
    return error


def _read_batches(reader: flight.MetadataRecordBatchReader) -> list[pa.RecordBatch]:
    batches: list[pa.RecordBatch] = []
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            return batches
        if chunk.data is not None:
            batches.append(chunk.data)


class SyncServer(flight.FlightServerBase):  # type: ignore[misc]
    """A data-sync Flight server writing Delta tables under ``store``."""

    def __init__(
        self,
        store: DeltaStore,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        settings: SyncSettings = SyncSettings(),
        clock: Callable[[], float] = time.monotonic,
        maintenance_interval_s: float = 600.0,
    ) -> None:
        super().__init__(f"grpc://{host}:{port}")
        self.store = store
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._writer: SyncWriter[Change] = SyncWriter(settings, store.restore_durable())
        self._responses = ResponseFactory()
        self._responses_lock = threading.Lock()
        self._flush_seconds: list[float] = []
        self._peak_bytes = 0
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_task, name="sync-flusher", daemon=True)
        self._flusher.start()
        self._tables = set(store.tables())
        self._maintainer: threading.Thread | None = None
        if maintenance_interval_s > 0:
            self._maintainer = threading.Thread(
                target=self._maintenance_task, args=(maintenance_interval_s,), name="sync-maintenance", daemon=True
            )
            self._maintainer.start()

    # -- Flight -----------------------------------------------------------
    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        try:
            cmd = decode_descriptor_cmd(descriptor.command or b"")
            batches = _read_batches(reader)
            schema = SyncSchema.validate(cmd.column_descriptors, batches[0].schema) if batches else None
            response = self.handle(cmd, schema, batches)
        except SyncError as exc:
            raise _flight_error(exc) from exc
        except Exception as exc:
            log.exception("put failed")
            raise flight.FlightInternalError(f"Failed processing DoPut: {exc}") from exc
        writer.write(pa.py_buffer(response.encode()))

    # -- protocol -----------------------------------------------------------
    def _respond(self, make: Callable[[ResponseFactory], SyncResponse]) -> SyncResponse:
        with self._responses_lock:
            return make(self._responses)

    def handle(self, cmd: SyncCommand, schema: SyncSchema | None, batches: list[pa.RecordBatch]) -> SyncResponse:
        """Process one decoded put; raise SyncError for the client."""
        rows = sum(b.num_rows for b in batches)
        if not self._lock.acquire(timeout=self.settings.write_lock_timeout_s):
            log.info("write lock timeout for %s", cmd.path)
            return self._respond(lambda r: r.overloaded())
        try:
            if is_probe(rows, cmd.sequence_number):
                return self._respond(lambda r: r.accepted(*self._writer.sequences(cmd.origin)))
            if cmd.format != TableFormat.DELTA:
                raise UnsupportedFormat()
            uri = self.store.table_uri(cmd.path, cmd.store)
            change: Change | None = None
            if rows > 0 and schema is not None:
                change = Change.of_put(schema, [pa.Table.from_batches([b]) for b in batches if b.num_rows])
            self._writer.put(
                table=uri,
                origin=cmd.origin,
                sequence=cmd.sequence_number,
                rows=rows,
                size=change.batch.nbytes if change is not None else 0,
                payload=change,
                now=self._clock(),
            )
            self._peak_bytes = max(self._peak_bytes, self._writer.in_memory_bytes)
            self._run_policy()
            return self._respond(lambda r: r.accepted(*self._writer.sequences(cmd.origin)))
        finally:
            self._lock.release()

    def _run_policy(self) -> None:
        """Flush while the policy asks (lock held)."""
        while (action := self._writer.next_action(self._clock())) is not None:
            if isinstance(action, SquashTable):
                self._writer.squashed(action.table, squash_pending(self._writer.pending_items(action.table)))
            elif isinstance(action, FlushTable):
                self._flush(action.table, action.reason)

    def _flush(self, table: str, reason: FlushReason) -> None:
        plan = self._writer.plan_flush(table, self.store.read_state(table).marks, reason)
        started = self._clock()
        files = self.store.write(table, [i.payload for i in plan.apply], plan.table_marks, plan.durable_after)
        self._writer.complete_flush(plan)
        self._tables.add(table)
        self._flush_seconds.append(self._clock() - started)
        log.info("flushed %s (%s, %d items, %d skipped) in %.3fs, rewrote %d rows in %d files as %d files",
                 table, reason.value, len(plan.apply), plan.skipped, self._clock() - started,
                 files.rows_removed, files.files_removed, files.files_added)

    def flush_oldest(self) -> bool:
        """Flush the table whose pending data is oldest; False when nothing is pending."""
        with self._lock:
            table = self._writer.oldest_table()
            if table is None:
                return False
            self._flush(table, FlushReason.REQUESTED)
            return True

    def stats(self) -> dict[str, Any]:
        """In-memory bytes (now and peak), pending tables, open transactions, flush durations."""
        with self._lock:
            return {
                "in_memory_bytes": self._writer.in_memory_bytes,
                "peak_in_memory_bytes": self._peak_bytes,
                "flush_seconds": list(self._flush_seconds),
                "pending_tables": len(self._writer.pending_tables),
                "open_transactions": self._writer.open_transactions,
            }

    def _flush_task(self) -> None:
        while not self._stop.wait(self.settings.flush_task_interval_s):
            if not self._lock.acquire(timeout=self.settings.write_lock_timeout_s):
                log.warning("flush task could not get the write lock")
                continue
            try:
                self._run_policy()
            except Exception:  # the task must survive a failed flush; the data stays pending
                log.exception("background flush failed")
            finally:
                self._lock.release()

    def maintain(self) -> dict[str, MaintenanceReport]:
        """Maintain every table this server knows, each under the write lock (a busy table waits a round)."""
        with self._lock:
            tables = sorted(self._tables)
        reports: dict[str, MaintenanceReport] = {}
        for table in tables:
            if self._stop.is_set() or not self._lock.acquire(timeout=self.settings.write_lock_timeout_s):
                continue
            try:
                reports[table] = report = self.store.maintain(table)
                log.info("maintained %s: %s", table, report)
            except Exception:  # maintenance is retried next round; the table stays as it was
                log.exception("maintenance of %s failed", table)
            finally:
                self._lock.release()
        return reports

    def _maintenance_task(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.maintain()

    def shutdown(self) -> None:
        """Stop the flusher and the Flight server (pending data is not flushed, as in Seafowl)."""
        self._stop.set()
        super().shutdown()
        self._flusher.join(timeout=10)
        if self._maintainer is not None:
            self._maintainer.join(timeout=10)
