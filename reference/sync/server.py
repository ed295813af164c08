"""Arrow Flight sync server: DoPut carries a ``DataSyncCommand`` and change batches.

Threads: Flight's request threads, one background flusher and one maintainer (the store's
compaction, vacuum and checkpoints, one table at a time under the write lock).  Every protocol
decision (transaction and sequence rules, numbers, which table to flush, what to
skip, where a table may live, whether a put fits its table) is the spec's; this
module adds the write lock with its timeout, the memory budget of puts being read,
the Delta I/O with per-table retry, authentication, and the mapping of typed errors
to Flight statuses.

A put is applied only once its stream completed: batches are read (and counted
against the high-watermark) before anything is recorded, and a stream the client
cancelled is dropped whole.  Errors sent to clients are one line; details of
internal failures go to the log only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from spec.sync.confinement import check_store_location, table_name
from spec.sync.errors import (
    InterruptedPut,
    PutTooLarge,
    ServerDraining,
    SyncError,
    TableSchemaMismatch,
    UnsupportedFormat,
)
from spec.sync.flush_failures import FlushFailures
from spec.sync.messages import (
    MAX_MESSAGE_BYTES,
    StorageLocation,
    SyncCommand,
    SyncResponse,
    TableFormat,
    decode_descriptor_cmd,
)
from spec.sync.responses import ResponseFactory
from spec.sync.schema import SyncSchema, TableShape, check_table_fit
from spec.sync.squash import SquashedChange, squash_pending
from spec.sync.writer import FlushReason, FlushTable, Received, SquashTable, SyncSettings, SyncWriter, is_probe
from reference.sync.auth import BearerTokenMiddleware
from reference.sync.store import DeltaStore, MaintenanceReport, UnstorableColumn, storable_shape

log = logging.getLogger(__name__)

INTERNAL_ERROR_TEXT = "Internal error while processing the put; the server log has the details"

_FLIGHT_ERRORS: dict[str, Callable[[str], Exception]] = {
    "INTERNAL": flight.FlightInternalError,
    "PERMISSION_DENIED": flight.FlightUnauthorizedError,
    "UNAUTHENTICATED": flight.FlightUnauthenticatedError,
    "UNAVAILABLE": flight.FlightUnavailableError,
    "CANCELLED": flight.FlightCancelledError,
}


def _flight_error(exc: SyncError) -> Exception:
    """The Flight error for ``exc``'s status; its text is the exact message.

    pyarrow has no Flight class for INVALID_ARGUMENT, so those are ``ArrowInvalid``, to
    which pyarrow appends the Python traceback of the raise (see docs/sync.md).
    """
    error: Exception
    if exc.status == "INVALID_ARGUMENT":
        error = pa.ArrowInvalid(exc.message)
    else:
        error = _FLIGHT_ERRORS.get(exc.status, flight.FlightInternalError)(exc.message)
    return error


@dataclass(frozen=True)
class ServerSecurity:
    """Bearer token and TLS certificate/key (PEM bytes) of a server; all off by default."""

    token: str | None = None
    tls_cert: bytes | None = None
    tls_key: bytes | None = None


class _MemoryBudget:
    """Pending bytes plus bytes of puts still being read, held under the high-watermark."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._pending = 0
        self._reading = 0
        self.peak = 0

    def set_pending(self, pending: int) -> None:
        with self._lock:
            self._pending = pending
            self.peak = max(self.peak, self._pending + self._reading)

    def reserve(self, n: int) -> bool:
        with self._lock:
            if self._pending + self._reading + n > self.limit:
                return False
            self._reading += n
            self.peak = max(self.peak, self._pending + self._reading)
            return True

    def release(self, n: int) -> None:
        with self._lock:
            self._reading -= n


@dataclass
class _ReadPut:
    """A put's batches, or why it is refused for now (over the high-watermark)."""

    batches: list[pa.RecordBatch]
    reserved: int
    over_watermark: bool


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
        security: ServerSecurity = ServerSecurity(),
        allowed_locations: Sequence[str] = (),
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        flush_failures: FlushFailures | None = None,
        maintenance_interval_s: float = 600.0,
    ) -> None:
        tls = security.tls_cert is not None and security.tls_key is not None
        location = flight.Location.for_grpc_tls(host, port) if tls else flight.Location.for_grpc_tcp(host, port)
        super().__init__(
            location,
            tls_certificates=[flight.CertKeyPair(security.tls_cert, security.tls_key)] if tls else None,
            middleware={"auth": BearerTokenMiddleware(security.token)} if security.token else None,
        )
        self.scheme = "grpc+tls" if tls else "grpc"
        self.store = store
        self.settings = settings
        self.allowed_locations = tuple(allowed_locations)
        self.max_message_bytes = max_message_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._writer: SyncWriter[SquashedChange] = SyncWriter(settings, store.restore_durable())
        self._failures = flush_failures or FlushFailures()
        self._shapes: dict[str, TableShape] = {}
        self._budget = _MemoryBudget(settings.high_watermark)
        self._responses = ResponseFactory()
        self._responses_lock = threading.Lock()
        self._flush_seconds: list[float] = []
        self._peak_bytes = 0
        self._draining = threading.Event()
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

    @property
    def location(self) -> str:
        """The URL clients connect to."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    # -- Flight -----------------------------------------------------------
    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        try:
            response = self._put(context, descriptor, reader)
        except SyncError as exc:
            log.info("put refused (%s): %s", exc.condition, exc.message)
            raise _flight_error(exc) from None
        except Exception:
            log.exception("put failed")
            raise flight.FlightInternalError(INTERNAL_ERROR_TEXT) from None
        writer.write(pa.py_buffer(response.encode()))

    def _put(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor, reader: flight.MetadataRecordBatchReader
    ) -> SyncResponse:
        read = self._read(reader)  # first, so that even a refusal reaches a client still writing
        try:
            cmd = decode_descriptor_cmd(descriptor.command or b"")
            if context.is_cancelled():
                raise InterruptedPut()
            if read.over_watermark:
                log.warning("put for %r refused: memory high-watermark (%d bytes) reached", cmd.path, self._budget.limit)
                return self._respond(lambda r: r.overloaded())
            schema = SyncSchema.validate(cmd.column_descriptors, read.batches[0].schema) if read.batches else None
            return self.handle(cmd, schema, read.batches, cancelled=context.is_cancelled)
        finally:
            self._budget.release(read.reserved)

    def _read(self, reader: flight.MetadataRecordBatchReader) -> _ReadPut:
        """Read the whole stream, reserving its bytes; past a limit, drop what was read and hold nothing more.

        The stream is read to its end even when the put is refused, so the client, still
        writing, gets the refusal rather than a broken stream.
        """
        read = _ReadPut([], 0, False)
        refusal: SyncError | None = None
        total = 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            except BaseException:
                self._budget.release(read.reserved)
                raise
            if chunk.data is None:
                continue
            size = chunk.data.nbytes
            total += size
            if refusal is None and size > self.max_message_bytes:
                refusal = PutTooLarge("A message", size, self.max_message_bytes)
            elif refusal is None and total > self._budget.limit:
                refusal = PutTooLarge("A put", total, self._budget.limit)
            if refusal is not None or read.over_watermark:
                self._budget.release(read.reserved)
                read = _ReadPut([], 0, read.over_watermark)
            elif self._budget.reserve(size):
                read.reserved += size
                read.batches.append(chunk.data)
            else:
                self._budget.release(read.reserved)
                read = _ReadPut([], 0, True)
        if refusal is not None:
            raise refusal
        return read

    # -- protocol -----------------------------------------------------------
    def _respond(self, make: Callable[[ResponseFactory], SyncResponse]) -> SyncResponse:
        with self._responses_lock:
            return make(self._responses)

    def handle(
        self,
        cmd: SyncCommand,
        schema: SyncSchema | None,
        batches: list[pa.RecordBatch],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> SyncResponse:
        """Process one decoded, completely received put; raise SyncError for the client."""
        rows = sum(b.num_rows for b in batches)
        probe = is_probe(rows, cmd.sequence_number)
        if self._draining.is_set() and not probe:
            raise ServerDraining()
        if not self._lock.acquire(timeout=self.settings.write_lock_timeout_s):
            log.info("write lock timeout for %r", cmd.path)
            return self._respond(lambda r: r.overloaded())
        try:
            if probe:
                return self._respond(lambda r: r.accepted(*self._writer.sequences(cmd.origin)))
            if cmd.format != TableFormat.DELTA:
                raise UnsupportedFormat()
            name = table_name(cmd.path)
            root = check_store_location(cmd.store, self.allowed_locations)
            uri = self.store.table_uri(name, StorageLocation(location=root) if root else None)
            change: SquashedChange | None = None
            shape: TableShape | None = None
            if rows > 0 and schema is not None:
                tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
                for table in tables:
                    schema.check_keys(table)
                shape = self._fitting_shape(name, uri, schema)
                change = SquashedChange.of_put(schema, tables)
            size = change.batch.nbytes if change is not None else 0
            if self._writer.in_memory_bytes + size > self._budget.limit:
                log.warning("put for %s refused: memory high-watermark (%d bytes) reached", name, self._budget.limit)
                return self._respond(lambda r: r.overloaded())
            if cancelled():
                raise InterruptedPut()
            received = self._writer.put(
                table=uri,
                origin=cmd.origin,
                sequence=cmd.sequence_number,
                rows=rows,
                size=size,
                payload=change,
                now=self._clock(),
            )
            if received is Received.RECORDED and shape is not None:
                self._shapes[uri] = shape
            self._peak_bytes = max(self._peak_bytes, self._writer.in_memory_bytes)
            self._run_policy()
            return self._respond(lambda r: r.accepted(*self._writer.sequences(cmd.origin)))
        finally:
            self._budget.set_pending(self._writer.in_memory_bytes)
            self._lock.release()

    def _fitting_shape(self, name: str, uri: str, schema: SyncSchema) -> TableShape:
        """The table's shape once this put is in it; raise TableSchemaMismatch if it cannot be applied."""
        try:
            shape = storable_shape(schema)
        except UnstorableColumn as exc:
            raise TableSchemaMismatch(name, [str(exc)]) from None
        existing = self._shapes.get(uri) or self.store.table_shape(uri)
        if existing is None:
            return shape
        check_table_fit(name, shape, existing)
        return TableShape(existing.columns, existing.keys or shape.keys)

    def _run_policy(self) -> None:
        """Flush while the policy asks (lock held); tables waiting to retry a failed flush are skipped."""
        while (action := self._writer.next_action(self._clock(), self._failures.waiting(self._clock()))) is not None:
            if isinstance(action, SquashTable):
                self._writer.squashed(action.table, squash_pending(self._writer.pending_items(action.table)))
            elif isinstance(action, FlushTable):
                self._flush(action.table, action.reason)

    def _flush(self, table: str, reason: FlushReason) -> bool:
        """Write ``table``'s pending items (lock held); a failure is logged and retried later."""
        started = self._clock()
        try:
            plan = self._writer.plan_flush(table, self.store.read_state(table).marks, reason)
            files = self.store.write(table, [i.payload for i in plan.apply], plan.table_marks, plan.durable_after)
        except Exception as exc:
            failure = self._failures.failed(table, f"{type(exc).__name__}: {exc}", self._clock())
            log.error("flush of %s failed (%d in a row); retrying in %.1fs", table, failure.failures,
                      failure.retry_at - self._clock(), exc_info=True)
            return False
        self._writer.complete_flush(plan)
        self._failures.succeeded(table)
        self._tables.add(table)
        self._flush_seconds.append(self._clock() - started)
        log.info("flushed %s (%s, %d items, %d skipped) in %.3fs, rewrote %d rows in %d files as %d files",
                 table, reason.value, len(plan.apply), plan.skipped, self._clock() - started,
                 files.rows_removed, files.files_removed, files.files_added)
        return True

    def flush_oldest(self) -> bool:
        """Flush the table whose pending data is oldest (not waiting to retry); False if none was flushed."""
        with self._lock:
            try:
                table = self._writer.oldest_table(self._failures.waiting(self._clock()))
                return table is not None and self._flush(table, FlushReason.REQUESTED)
            finally:
                self._budget.set_pending(self._writer.in_memory_bytes)

    def drain(self) -> list[str]:
        """Refuse new puts, try to flush every pending table once; return the tables still pending."""
        self._draining.set()
        with self._lock:
            try:
                for table in self._writer.pending_tables:
                    self._flush(table, FlushReason.REQUESTED)
                return self._writer.pending_tables
            finally:
                self._budget.set_pending(self._writer.in_memory_bytes)

    def stats(self) -> dict[str, Any]:
        """Memory (pending now and peak, budget peak incl. puts being read), tables, flushes and failures."""
        with self._lock:
            return {
                "in_memory_bytes": self._writer.in_memory_bytes,
                "peak_in_memory_bytes": self._peak_bytes,
                "peak_held_bytes": self._budget.peak,
                "high_watermark_bytes": self._budget.limit,
                "flush_seconds": list(self._flush_seconds),
                "pending_tables": len(self._writer.pending_tables),
                "open_transactions": self._writer.open_transactions,
                "failing_tables": {t: f.failures for t, f in self._failures.report().items()},
            }

    def _flush_task(self) -> None:
        while not self._stop.wait(self.settings.flush_task_interval_s):
            if not self._lock.acquire(timeout=self.settings.write_lock_timeout_s):
                log.warning("flush task could not get the write lock")
                continue
            try:
                self._run_policy()
            except Exception:  # the task must survive anything; the data stays pending
                log.exception("background flush failed")
            finally:
                self._budget.set_pending(self._writer.in_memory_bytes)
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
        """Stop the flusher and the Flight server (pending data is not flushed: call ``drain`` first)."""
        self._stop.set()
        super().shutdown()
        self._flusher.join(timeout=10)
        if self._maintainer is not None:
            self._maintainer.join(timeout=10)
