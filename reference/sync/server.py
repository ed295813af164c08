"""The data-sync server: Flight ``DoPut`` carries a ``DataSyncCommand`` and change batches.

Threads: the transport's pool of at most ``max_concurrent_puts`` put threads and its watchdog
(``reference.sync.transport``), one background flusher and one maintainer (the store's
compaction, vacuum and checkpoints, one table at a time under the write lock).  Every
protocol decision is the endpoint's (``spec.sync.server.SyncServerEndpoint``: admission order,
busy answers, the flush schedule and its retries, durable numbers after a restart) or the spec
rules it and this driver call (``spec.sync.admission``, ``spec.sync.confinement``,
``spec.sync.schema``).  This module is its driver: it holds the write lock (waiting at most the
endpoint's ``write_lock_timeout_s``), decodes the Arrow IPC payloads, does the Delta I/O, carries
out the endpoint's steps and sleeps the flusher until the endpoint's next deadline, reading time
only from its injected clock (``reference.sync.clock``).

A put is applied only once its stream completed: batches are read (and counted against the
high-watermark) before anything is recorded, and a stream that broke or ran past the put
timeout is dropped whole.  Errors sent to clients are one line; details of internal failures
go to the log only.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from spec.sync.admission import MemoryBudget, PutLimits, PutReading, flush_working_set
from spec.sync.errors import FlightDataError, TableSchemaMismatch
from spec.sync.flight import FlightData, descriptor_command, ipc_message
from spec.sync.messages import (
    MAX_MESSAGE_BYTES,
    StorageLocation,
    SyncCommand,
    SyncResponse,
    decode_descriptor_cmd,
)
from spec.sync.schema import SyncSchema, TableShape, check_table_fit
from spec.sync.squash import SquashedChange
from spec.sync.server import SyncServerEndpoint, TransactionExpired, recorded_durable
from spec.sync.writer import FlushReason, Received, RowGroupLimits, SyncSettings
from reference.sync.credentials import ServerSecurity
from reference.sync.clock import Clock, MonotonicClock
from reference.sync.store import DeltaStore, MaintenanceReport, UnstorableColumn, storable_shape
from reference.sync.transport import FlightPutTransport

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT_PUTS = 64
DEFAULT_PUT_TIMEOUT_S = 300.0
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_FIRST_MESSAGE_TIMEOUT_S = 10.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 2.0
DEFAULT_IDLE_TIMEOUT_S = 2.0
DEFAULT_MAX_STREAMS_PER_CONNECTION = 16


@dataclass
class _ReadPut:
    """A put's command and batches, or why it is refused for now (over the high-watermark)."""

    command: bytes
    batches: list[pa.RecordBatch]
    reading: PutReading
    schema: pa.Schema | None = None
    """The stream's Arrow schema (what a truncating put without rows is described by)."""


class SyncServer:
    """A data-sync Flight server writing Delta tables under ``store``; it serves once constructed."""

    def __init__(
        self,
        store: DeltaStore,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        settings: SyncSettings = SyncSettings(),
        clock: Clock = MonotonicClock(),
        security: ServerSecurity = ServerSecurity(),
        allowed_locations: Sequence[str] = (),
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_concurrent_puts: int = DEFAULT_MAX_CONCURRENT_PUTS,
        put_timeout_s: float = DEFAULT_PUT_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        first_message_timeout_s: float = DEFAULT_FIRST_MESSAGE_TIMEOUT_S,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        max_streams_per_connection: int = DEFAULT_MAX_STREAMS_PER_CONNECTION,
        maintenance_interval_s: float = 600.0,
        endpoint: SyncServerEndpoint | None = None,
    ) -> None:
        """``endpoint``: the machine deciding for this server (None: one with ``settings`` and the durable
        numbers the store records); a harness passes its own, to change its settings as it runs."""
        self.scheme = "grpc+tls" if security.tls_cert is not None and security.tls_key is not None else "grpc"
        self.store = store
        self.allowed_locations = tuple(allowed_locations)
        self._endpoint = endpoint or SyncServerEndpoint(  # a life of its own, named in every response
            settings, recorded_durable(store.recorded_durable()), life=secrets.randbits(63))
        self.limits = PutLimits(max_message_bytes, self._endpoint.settings.high_watermark, max_concurrent_puts,
                                put_timeout_s, first_message_timeout_s, max_connections, handshake_timeout_s,
                                idle_timeout_s, max_streams_per_connection)
        self._clock = clock
        self._lock = threading.Lock()
        self._shapes: dict[str, TableShape] = {}
        self._budget = MemoryBudget(self._endpoint.settings.high_watermark)
        self._budget_lock = threading.Lock()
        self._flush_seconds: list[float] = []
        self._stop = threading.Event()
        self._alarm = clock.alarm()
        self._tables = set(store.tables())
        self._transport = FlightPutTransport(
            self.on_put, host=host, port=port, security=security, limits=self.limits, clock=clock)
        self.port = self._transport.port
        self._flusher = threading.Thread(target=self._flush_task, name="sync-flusher", daemon=True)
        self._flusher.start()
        self._maintainer: threading.Thread | None = None
        if maintenance_interval_s > 0:
            self._maintainer = threading.Thread(
                target=self._maintenance_task, args=(maintenance_interval_s,), name="sync-maintenance", daemon=True
            )
            self._maintainer.start()

    @property
    def settings(self) -> SyncSettings:
        """The settings the endpoint decides by."""
        return self._endpoint.settings

    @property
    def clock(self) -> Clock:
        """The one clock this server reads time from and sleeps by."""
        return self._clock

    def reconfigure(self, settings: SyncSettings, row_groups: RowGroupLimits | None = None) -> None:
        """Decide by ``settings`` from now on, as a server started with them would: the endpoint's schedule and the
        high-watermark a put and the memory budget are held to (a harness's knob, as ``endpoint`` is; gRPC's own
        bound on a message stays as started, at or above it when the high-watermark only comes down); with
        ``row_groups``, the store's flushes cut their row groups by them (between flushes: under the write lock)."""
        with self._lock:
            self._endpoint.reconfigure(settings)
            if row_groups is not None:
                self.store.use_row_groups(row_groups)
            self.limits = replace(self.limits, high_watermark=settings.high_watermark)
        with self._budget_lock:
            self._budget.limit = settings.high_watermark
        self._alarm.ring()  # the flusher's next deadline may have moved

    @property
    def location(self) -> str:
        """The URL clients connect to."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def stopping(self) -> bool:
        """Whether a shutdown (or a drain) began stopping the transport: running puts have until its grace ends."""
        return self._transport.stopping

    def serve(self) -> None:
        """Block until the server is shut down (it serves from construction on)."""
        self._transport.wait()

    # -- Flight -----------------------------------------------------------
    def on_put(self, messages: Iterator[FlightData], claim: Callable[[], bool]) -> bytes:
        """One put's messages as the transport hands them, and its ``claim``: the PutResult's ``app_metadata``; raise
        SyncError for the client (the walk selection calls it without the transport, ``conformance.sync.walks``)."""
        read = self._read(messages)
        try:
            cmd = decode_descriptor_cmd(read.command)
            with self._budget_lock:
                yields = self._budget.yields_to_flush(read.reading.held)
            if read.reading.over_watermark or yields:
                log.warning("put for %r refused: memory high-watermark (%d bytes) reached", cmd.path, self._budget.limit)
                return self._endpoint.busy().encode()
            schema = self._endpoint.put_schema(cmd, read.batches, read.schema)
            return self.handle(cmd, schema, read.batches, claim=claim).encode()
        finally:
            self._release(read)

    def _read(self, messages: Iterator[FlightData]) -> _ReadPut:
        """Read the whole stream, reserving its batches' bytes; past a limit, drop what was read and hold nothing more.

        The stream is read to its end even when the put is refused, so the client, still
        writing, gets the refusal rather than a broken stream.
        """
        read = _ReadPut(b"", [], PutReading(self.limits))
        schema: pa.Schema | None = None
        try:
            for data in messages:
                if data.descriptor is not None and not read.command:
                    read.command = descriptor_command(data.descriptor)
                if not data.header:
                    continue
                # Reserved before it is decoded: a message the put may not keep is never copied.
                size = len(data.body)
                with self._budget_lock:
                    reserved = read.reading.may_keep(size) and self._budget.reserve(size)
                if not read.reading.keep(size, reserved):
                    self._release(read)
                    continue
                message = ipc_message(data.header, data.body)
                if message.type == "schema":
                    schema = read.schema = pa.ipc.read_schema(message)
                    continue
                if message.type != "record batch":
                    raise FlightDataError(f"{message.type} messages are not supported (dictionary-encoded columns)")
                if schema is None:
                    raise FlightDataError("a record batch arrived before the schema")
                read.batches.append(pa.ipc.read_record_batch(message, schema))
            read.reading.finish()
        except BaseException:
            self._release(read)
            raise
        return read

    def _release(self, read: _ReadPut) -> None:
        """Drop what ``read`` holds and give its bytes back to the budget."""
        with self._budget_lock:
            self._budget.release(read.reading.drop())
        read.batches.clear()

    # -- protocol -----------------------------------------------------------
    def handle(
        self,
        cmd: SyncCommand,
        schema: SyncSchema | None,
        batches: list[pa.RecordBatch],
        claim: Callable[[], bool] = lambda: True,
    ) -> SyncResponse:
        """Process one decoded, completely received put; raise SyncError for the client.

        ``claim()`` is asked right before the put is recorded: False means its call already
        ended (cancelled, past its put timeout), so nothing of it is kept; True means the
        transport will not end it any more.
        """
        rows = sum(b.num_rows for b in batches)
        probe = self._endpoint.admit(cmd, rows)  # busy() and admit() need no write lock
        if not self._lock.acquire(timeout=self._endpoint.settings.write_lock_timeout_s):
            log.info("write lock timeout for %r", cmd.path)
            return self._endpoint.busy()
        try:
            if probe:
                return self._endpoint.accepted(cmd.origin)
            name, root = self._endpoint.destination(cmd, self.allowed_locations)
            uri = self.store.table_uri(name, StorageLocation(location=root) if root else None)
            change, shape = self._endpoint.change(name, cmd, schema, batches, lambda s: self._fitting_shape(name, uri, s))
            received = self._endpoint.record(cmd, table=uri, rows=rows, change=change, now=self._clock.now(), claim=claim)
            if received is None:
                log.warning("put for %s refused: memory high-watermark (%d bytes) reached", name, self._budget.limit)
                return self._endpoint.busy()
            if received is Received.RECORDED and shape is not None:
                self._shapes[uri] = shape
            self._carry_out()
            self._alarm.ring()  # the flusher's next deadline may have moved
            return self._endpoint.accepted(cmd.origin)
        finally:
            self._note_pending()
            self._lock.release()

    def _note_pending(self) -> None:
        with self._budget_lock:
            self._budget.set_pending(self._endpoint.pending_bytes)

    def _flushed_shape(self, uri: str, changes: list[SquashedChange]) -> TableShape | None:
        """The table's shape once a flush's ``changes`` are in it, as the spec's fit orders its columns: folded over
        the changes written, not the shape pending puts left (which keeps the columns of a discarded one)."""
        shape = self.store.table_shape(uri)
        for change in changes:
            put = storable_shape(change.schema)
            shape = put if shape is None else check_table_fit(uri, put, shape)
        return shape

    def _fitting_shape(self, name: str, uri: str, schema: SyncSchema) -> TableShape:
        """The table's shape once this put is in it; raise TableSchemaMismatch if it cannot be applied."""
        try:
            shape = storable_shape(schema)
        except UnstorableColumn as exc:
            raise TableSchemaMismatch(name, [str(exc)]) from None
        existing = self._shapes.get(uri) or self.store.table_shape(uri)
        if existing is None:
            return shape
        return check_table_fit(name, shape, existing)

    def _carry_out(self) -> None:
        """Carry out every step the endpoint says is due now, in its order (lock held)."""
        while (action := self._endpoint.next_action(self._clock.now())) is not None:
            if isinstance(action, TransactionExpired):
                log.warning("discarded the open transaction of origin %s after %ss without a put",
                            action.origin, action.timeout_s)
            else:
                self._flush(action.table, action.reason)

    def _flush(self, table: str, reason: FlushReason) -> bool:
        """Write ``table``'s pending items (lock held) and report the outcome to the endpoint."""
        started = self._clock.now()
        try:
            plan = self._endpoint.plan_flush(table, self.store.read_state(table).marks, reason)
            with self._budget_lock:
                self._budget.set_flushing(flush_working_set(sum(i.size for i in plan.apply)))
            try:
                shape = self._flushed_shape(table, [i.payload for i in plan.apply])
                files = self.store.write(table, [i.payload for i in plan.apply], plan.table_marks, plan.durable_after,
                                         None if shape is None else list(shape.columns))
            finally:
                with self._budget_lock:
                    self._budget.set_flushing(0)
        except Exception as exc:
            failure = self._endpoint.flush_failed(table, f"{type(exc).__name__}: {exc}", self._clock.now())
            log.error("flush of %s failed (%d in a row); retrying in %.1fs", table, failure.failures,
                      failure.retry_at - self._clock.now(), exc_info=True)
            return False
        self._endpoint.flushed(plan)
        self._tables.add(table)
        self._flush_seconds.append(self._clock.now() - started)
        pa.default_memory_pool().release_unused()  # a flush's working set goes back to the system
        log.info("flushed %s (%s, %d items, %d skipped) in %.3fs, rewrote %d rows in %d files as %d files",
                 table, reason.value, len(plan.apply), plan.skipped, self._clock.now() - started,
                 files.rows_removed, files.files_removed, files.files_added)
        return True

    def drain(self) -> list[str]:
        """Stop taking puts, let running ones finish (a stalled one ends at its put timeout), then
        try to flush every pending table once; return the tables still pending."""
        self._transport.stop(self.limits.put_timeout_s)
        with self._lock:
            try:
                for table in self._endpoint.start_draining():
                    self._flush(table, FlushReason.REQUESTED)
                return self._endpoint.pending_tables
            finally:
                self._note_pending()

    def stats(self) -> dict[str, Any]:
        """Memory (pending now and peak, budget peak incl. puts being read), tables, flushes and failures."""
        with self._lock:
            return {
                "in_memory_bytes": self._endpoint.pending_bytes,
                "peak_in_memory_bytes": self._endpoint.peak_pending_bytes,
                "peak_held_bytes": self._budget.peak,
                "high_watermark_bytes": self._budget.limit,
                "flush_seconds": list(self._flush_seconds),
                "pending_tables": len(self._endpoint.pending_tables),
                "open_transactions": self._endpoint.open_transactions,
                "running_puts": self._transport.running_puts,
                "silent_streams": self._transport.silent_streams,
                "connections": self._transport.connections,
                "failing_tables": {t: f.failures for t, f in self._endpoint.failing_tables().items()},
            }

    def _flush_task(self) -> None:
        """Sleep until the endpoint's next deadline (or a put moved it), then carry out what is due."""
        try:
            while not self._stop.is_set():
                with self._lock:
                    deadline = self._endpoint.next_deadline(self._clock.now())
                self._alarm.sleep_until(deadline)
                if self._stop.is_set():
                    break
                if not self._lock.acquire(timeout=self._endpoint.settings.write_lock_timeout_s):
                    log.warning("flush task could not get the write lock")
                    continue
                try:
                    self._carry_out()
                except Exception:  # the task must survive anything; the data stays pending
                    log.exception("background flush failed")
                finally:
                    self._note_pending()
                    self._lock.release()
        finally:
            self._alarm.close()

    def maintain(self) -> dict[str, MaintenanceReport]:
        """Maintain every table this server knows, each under the write lock (a busy table waits a round)."""
        with self._lock:
            tables = sorted(self._tables)
        reports: dict[str, MaintenanceReport] = {}
        for table in tables:
            if self._stop.is_set() or not self._lock.acquire(timeout=self._endpoint.settings.write_lock_timeout_s):
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

    def shutdown(self, grace_s: float | None = None) -> None:
        """Stop taking calls (running ones get ``grace_s`` seconds), the flusher and the maintainer.

        Pending data is not flushed: call ``drain`` first.
        """
        self._stop.set()
        self._alarm.ring()
        self._transport.stop(grace_s)
        self._flusher.join(timeout=10)
        if self._maintainer is not None:
            self._maintainer.join(timeout=10)
