"""The sink task: assembles its part of each source transaction and syncs it to the sync server.

Sync origins.  A source transaction is cut into one part per sink (routing.py), so no single
sink can speak for a source origin.  Each sink therefore syncs as its own origin per source,
``<table>/src<o>/sink<r>``, and numbers a part with its source transaction's sequence number:
the numbers of one sync origin increase (with gaps where a transaction had nothing for this
sink), the stream of one sync origin comes from one source and one writer, so it is the same
on every attempt, and the server's durable number means "every change of source ``o`` up to
transaction N that sink ``r`` owns is in the table".  The source's own durable point is the
minimum over the sinks its transactions touched, which the driver derives (progress.py).

Two threads.  The task thread reads the shuffle and hands complete parts to a bounded queue
(its backpressure reaches the shuffle writers); the sync thread sends whatever is queued for one
origin as one sync transaction (adaptive batching: one part per put when idle, many when busy),
each a single put, so puts of different origins never interleave inside a transaction.

Recovery.  A failed attempt stops its sync thread before it leaves the cluster, and a new
attempt first waits until its previous attempt is no longer alive in the cluster, then asks the server
for each origin's numbers and skips what the table holds (spec/sync/client.py decides): replay
starts after the durable sequence.  Anything after it is sent again; every change is a
full row image (or an update of the same key), so re-applying a suffix in order is exact.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import pyarrow as pa

from reference.pipeline.coordination import Member, RunKeys
from reference.pipeline.faults import NO_FAULTS, FaultPlan
from reference.pipeline.records import ChangeRecord, PartTiming, WireRecord
from reference.sync.client import SyncClient, SyncPut
from spec.cluster.interface import ClusterBackend
from spec.errors import RuntimeFailure
from spec.sync.client import Holding
from spec.sync.messages import ColumnDescriptor, ColumnRole

ARROW_SCHEMA = pa.schema([
    ("old_id", pa.int64()), ("new_id", pa.int64()), ("entity", pa.int64()), ("value", pa.int64()),
    ("note", pa.string()), ("note_changed", pa.bool_()), ("origin", pa.string()), ("seq", pa.int64()),
])
DESCRIPTORS = tuple(ColumnDescriptor(role=int(role), name=name) for role, name in (
    (ColumnRole.OLD_PK, "id"), (ColumnRole.NEW_PK, "id"), (ColumnRole.VALUE, "entity"),
    (ColumnRole.VALUE, "value"), (ColumnRole.VALUE, "note"), (ColumnRole.CHANGED, "note"),
    (ColumnRole.VALUE, "origin"), (ColumnRole.VALUE, "seq"),
))


class SinkFailed(RuntimeFailure):
    """The sink's sync thread failed; the task fails with this root cause."""

    condition = "PIPELINE_SINK_FAILED"


def sync_origin(table: str, origin: int, reader: int) -> str:
    """The sync protocol's origin for sink ``reader``'s share of source ``origin``."""
    return f"{table}/src{origin}/sink{reader}"


@dataclass(frozen=True)
class SinkConfig:
    """What every sink task needs (pickled into the tasks)."""

    run_id: str
    cluster_url: str
    table: str
    readers: int
    sync_deadline_s: float = 120.0
    progress_interval_s: float = 0.5
    max_parts_per_put: int = 4096


@dataclass
class _Part:
    """One source transaction's changes for this sink, sent once complete."""

    origin: int
    seq: int
    committed_ns: int
    size: int
    rows: list[ChangeRecord]


class _Pending(NamedTuple):
    """A part accepted by the server, waiting for its origin's durable number to reach ``seq``."""

    seq: int
    committed_ns: int
    accepted_ns: int
    changes: int


@dataclass
class SinkResult:
    """What one sink attempt did, returned to the driver."""

    reader: int
    attempt: str
    received: int = 0
    synced: int = 0
    skipped: int = 0
    puts: int = 0
    restarts_seen: int = 0
    replayed_transactions: int = 0
    durable: dict[str, int | None] = field(default_factory=dict)
    timings: list[PartTiming] = field(default_factory=list)


class _SyncThread:
    """Sends queued parts as sync transactions and tracks when they become durable."""

    _END = object()

    def __init__(self, config: SinkConfig, reader: int, member: Member, result: SinkResult) -> None:
        self.config, self.reader, self.member, self.result = config, reader, member, result
        self.keys = RunKeys(config.run_id)
        self.queue: queue.Queue[object] = queue.Queue(maxsize=256)
        self.error: BaseException | None = None
        self._clients: dict[int, SyncClient] = {}
        self._waiting: dict[int, list[_Pending]] = {}
        self._last_progress = 0.0
        self._abandoned = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pipeline-sink{reader}-sync", daemon=True)
        self._thread.start()

    def put(self, item: object) -> None:
        while True:
            if self.error is not None:
                raise SinkFailed(f"sink {self.reader}: {self.error!r}") from self.error
            try:
                self.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def finish(self) -> None:
        self.put(self._END)
        self._thread.join(self.config.sync_deadline_s + 30)
        if self.error is not None:
            raise SinkFailed(f"sink {self.reader}: {self.error!r}") from self.error
        if self._thread.is_alive():
            raise SinkFailed(f"sink {self.reader}: sync thread did not finish")

    def abandon(self) -> None:
        """The task failed: send nothing more and wait for the thread, so this attempt has stopped
        writing before it leaves the cluster (the next attempt waits for that, then replays)."""
        self._abandoned.set()
        self._thread.join(self.config.sync_deadline_s + 30)

    def _location(self) -> str:
        return str(self.member.wait_value(self.keys.sync_server, self.config.sync_deadline_s)["location"])

    def _client(self, origin: int) -> SyncClient:
        client = self._clients.get(origin)
        if client is None:
            client = SyncClient(self._location, sync_origin(self.config.table, origin, self.reader),
                                deadline_s=self.config.sync_deadline_s)
            client.probe()
            self._clients[origin] = client
        return client

    def _run(self) -> None:
        try:
            done = False
            while not done:
                if self._abandoned.is_set():
                    return
                try:
                    items = [self.queue.get(timeout=self.config.progress_interval_s)]
                except queue.Empty:
                    items = []
                while len(items) < self.config.max_parts_per_put:
                    try:
                        items.append(self.queue.get_nowait())
                    except queue.Empty:
                        break
                done = any(item is self._END for item in items)
                self._send([i for i in items if isinstance(i, _Part)])
                self._progress(force=done)
            self._await_durable()
            self._progress(force=True)
        except BaseException as exc:  # surfaced on the task thread
            self.error = exc
        finally:
            for client in self._clients.values():
                client.close()

    def _send(self, parts: list[_Part]) -> None:
        by_origin: dict[int, list[_Part]] = {}
        for part in parts:
            by_origin.setdefault(part.origin, []).append(part)
        for origin, group in by_origin.items():
            client = self._client(origin)
            fresh = [p for p in group if client.holding(p.seq) is not Holding.DURABLE]
            self.result.skipped += sum(len(p.rows) for p in group) - sum(len(p.rows) for p in fresh)
            for start in range(0, len(fresh), self.config.max_parts_per_put):
                self._send_one(origin, client, fresh[start:start + self.config.max_parts_per_put])
            self._settle(origin, client)

    def _send_one(self, origin: int, client: SyncClient, parts: list[_Part]) -> None:
        if not parts or self._abandoned.is_set():
            return
        rows = [r.change for p in parts for r in p.rows]
        batch = pa.table({
            "old_id": pa.array([c.old_id for c in rows], pa.int64()),
            "new_id": pa.array([c.new_id for c in rows], pa.int64()),
            "entity": pa.array([c.entity if c.new_id is not None else None for c in rows], pa.int64()),
            "value": pa.array([c.value for c in rows], pa.int64()),
            "note": pa.array([c.note for c in rows], pa.string()),
            "note_changed": pa.array([c.note_changed for c in rows], pa.bool_()),
            "origin": pa.array([f"src{origin}"] * len(rows), pa.string()),
            "seq": pa.array([p.seq for p in parts for _ in p.rows], pa.int64()),
        }, schema=ARROW_SCHEMA)
        client.send_transaction(parts[-1].seq, [SyncPut(self.config.table, batch, DESCRIPTORS)])
        accepted = time.time_ns()
        self.result.puts += 1
        self.result.synced += len(rows)
        self._waiting.setdefault(origin, []).extend(_Pending(p.seq, p.committed_ns, accepted, len(p.rows)) for p in parts)

    def _settle(self, origin: int, client: SyncClient) -> None:
        """Record the parts of ``origin`` that the server now reports durable."""
        durable = client.durable
        waiting = self._waiting.get(origin, [])
        if durable is None or not waiting:
            return
        now = time.time_ns()
        self._waiting[origin] = [w for w in waiting if w.seq > durable]
        self.result.timings += [PartTiming(w.committed_ns, w.accepted_ns, now, w.changes)
                                for w in waiting if w.seq <= durable]

    def _await_durable(self) -> None:
        deadline = time.monotonic() + self.config.sync_deadline_s
        while any(self._waiting.values()) and not self._abandoned.is_set():
            for origin, client in self._clients.items():
                if self._waiting.get(origin):
                    client.probe()
                    self._settle(origin, client)
            if time.monotonic() > deadline:
                raise SinkFailed(f"sink {self.reader}: changes not durable within {self.config.sync_deadline_s}s")
            self._progress()
            time.sleep(0.05)

    def _progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_progress < self.config.progress_interval_s:
            return
        self._last_progress = now
        r = self.result
        r.durable = {c.origin: c.durable for c in self._clients.values()}
        r.restarts_seen = sum(c.restarts_seen for c in self._clients.values())
        r.replayed_transactions = sum(c.replayed_transactions for c in self._clients.values())
        self.member.publish(self.keys.sink_progress(self.reader), {
            "attempt": r.attempt, "received": r.received, "synced": r.synced, "skipped": r.skipped,
            "durable": r.durable, "restarts_seen": r.restarts_seen,
        })


def run_sink(config: SinkConfig, reader: int, attempt: str, backend: ClusterBackend,
             records: Iterable[tuple[int, WireRecord]], faults: FaultPlan = NO_FAULTS) -> SinkResult:
    """Consume this sink's records (key, record) and land them; returns when all are durable."""
    node_prefix = f"pl-{config.run_id}-sink{reader}-"
    member = Member(backend, node_prefix + attempt, f"{socket.gethostname()}:{os.getpid()}")
    result = SinkResult(reader, attempt)
    sync: _SyncThread | None = None
    try:
        member.wait_alone(node_prefix, config.sync_deadline_s)
        sync = _SyncThread(config, reader, member, result)
        open_parts: dict[int, _Part] = {}
        last_seq: dict[int, int] = {}
        for _, raw in faults.sink_records(records, reader, attempt, member):
            result.received += 1
            record = ChangeRecord.read(raw)
            origin, seq = record.origin, record.seq
            part = open_parts.get(origin)
            if part is None:
                if seq <= last_seq.get(origin, 0):
                    raise SinkFailed(f"sink {reader}: src{origin} transaction {seq} after {last_seq[origin]}")
                part = open_parts[origin] = _Part(origin, seq, record.committed_ns, record.part_size, [])
                last_seq[origin] = seq
            elif part.seq != seq:
                raise SinkFailed(f"sink {reader}: src{origin} transaction {seq} arrived inside {part.seq} "
                                 f"({len(part.rows)} of {part.size} changes)")
            part.rows.append(record)
            if len(part.rows) == part.size:
                del open_parts[origin]
                sync.put(part)
        if open_parts:
            raise SinkFailed(f"sink {reader}: input ended inside transactions {sorted(open_parts.items())[:3]}")
        sync.finish()
        return result
    except BaseException:
        if sync is not None:
            sync.abandon()
        raise
    finally:
        member.leave()


def sink_partition(config: SinkConfig, faults: FaultPlan, reader: int,
                   records: Iterator[tuple[int, WireRecord]]) -> Iterator[SinkResult]:
    """The Spark task body: open this executor's cluster handle, run the sink, yield its result."""
    from pyspark import TaskContext

    from reference.cluster.config import open_backend

    ctx = TaskContext.get()
    attempt = f"t{ctx.taskAttemptId()}" if ctx is not None else "t0"
    backend = open_backend(config.cluster_url)
    try:
        yield run_sink(config, reader, attempt, backend, records, faults)
    finally:
        backend.close()
