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

Recovery.  A new attempt first waits until its previous attempt is no longer alive in the
cluster, then asks the server for each origin's durable number and skips what is durable:
replay starts from the durable sequence.  Anything after it is sent again; every change is a
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
from typing import Any

import pyarrow as pa

from reference.pipeline.changes import Change, Op
from reference.pipeline.coordination import Member, RunKeys
from reference.sync.client import SyncClient, SyncPut
from spec.cluster.interface import ClusterBackend
from spec.sync.messages import ColumnDescriptor, ColumnRole

Record = tuple[int, int, int, int, int, int, int | None, int | None, int | None, str | None, bool]
"""What the shuffle carries per change: (origin, seq, part size, commit time ns, op, entity,
old id, new id, value, note, note changed) — a flat tuple, cheap to pickle."""

ARROW_SCHEMA = pa.schema([
    ("old_id", pa.int64()), ("new_id", pa.int64()), ("entity", pa.int64()), ("value", pa.int64()),
    ("note", pa.string()), ("note_changed", pa.bool_()), ("origin", pa.string()), ("seq", pa.int64()),
])
DESCRIPTORS = tuple(ColumnDescriptor(int(role), name) for role, name in (
    (ColumnRole.OLD_PK, "id"), (ColumnRole.NEW_PK, "id"), (ColumnRole.VALUE, "entity"),
    (ColumnRole.VALUE, "value"), (ColumnRole.VALUE, "note"), (ColumnRole.CHANGED, "note"),
    (ColumnRole.VALUE, "origin"), (ColumnRole.VALUE, "seq"),
))


class SinkFailed(Exception):
    """The sink's sync thread failed; the task fails with this root cause."""

    condition = "PIPELINE_SINK_FAILED"


def to_record(origin: int, seq: int, part_size: int, committed_ns: int, c: Change) -> Record:
    return (origin, seq, part_size, committed_ns, int(c.op), c.entity, c.old_id, c.new_id, c.value, c.note,
            c.note_changed)


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
    kill_reader: int | None = None
    kill_after: int = 0


@dataclass
class _Part:
    origin: int
    seq: int
    committed_ns: int
    rows: list[Record]


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
    # per part: (commit ns, accepted ns, durable ns, changes)
    timings: list[tuple[int, int, int, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _SyncThread:
    """Sends queued parts as sync transactions and tracks when they become durable."""

    _END = object()

    def __init__(self, config: SinkConfig, reader: int, member: Member, result: SinkResult) -> None:
        self.config, self.reader, self.member, self.result = config, reader, member, result
        self.keys = RunKeys(config.run_id)
        self.queue: queue.Queue[object] = queue.Queue(maxsize=256)
        self.error: BaseException | None = None
        self._clients: dict[int, SyncClient] = {}
        self._start_durable: dict[int, int] = {}
        self._waiting: dict[int, list[tuple[int, int, int, int]]] = {}
        self._last_progress = 0.0
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

    def _location(self) -> str:
        return str(self.member.wait_value(self.keys.sync_server, self.config.sync_deadline_s)["location"])

    def _client(self, origin: int) -> SyncClient:
        client = self._clients.get(origin)
        if client is None:
            client = SyncClient(self._location, sync_origin(self.config.table, origin, self.reader),
                                deadline_s=self.config.sync_deadline_s)
            durable = client.probe().durable_sequence_number
            self._start_durable[origin] = durable if durable is not None else 0
            self._clients[origin] = client
        return client

    def _run(self) -> None:
        try:
            done = False
            while not done:
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
            fresh = [p for p in group if p.seq > self._start_durable[origin]]
            self.result.skipped += sum(len(p.rows) for p in group) - sum(len(p.rows) for p in fresh)
            for start in range(0, len(fresh), self.config.max_parts_per_put):
                self._send_one(origin, client, fresh[start:start + self.config.max_parts_per_put])
            self._settle(origin, client)

    def _send_one(self, origin: int, client: SyncClient, parts: list[_Part]) -> None:
        if not parts:
            return
        rows = [r for p in parts for r in p.rows]
        columns = list(zip(*rows))
        name = f"src{origin}"
        batch = pa.table({
            "old_id": pa.array(columns[6], pa.int64()), "new_id": pa.array(columns[7], pa.int64()),
            "entity": pa.array([e if n is not None else None for e, n in zip(columns[5], columns[7])], pa.int64()),
            "value": pa.array(columns[8], pa.int64()), "note": pa.array(columns[9], pa.string()),
            "note_changed": pa.array(columns[10], pa.bool_()),
            "origin": pa.array([name] * len(rows), pa.string()), "seq": pa.array(columns[1], pa.int64()),
        }, schema=ARROW_SCHEMA)
        client.send_transaction(parts[-1].seq, [SyncPut(self.config.table, batch, DESCRIPTORS)])
        accepted = time.time_ns()
        self.result.puts += 1
        self.result.synced += len(rows)
        self._waiting.setdefault(origin, []).extend((p.seq, p.committed_ns, accepted, len(p.rows)) for p in parts)

    def _settle(self, origin: int, client: SyncClient) -> None:
        """Record the parts of ``origin`` that the server now reports durable."""
        durable = client.durable
        waiting = self._waiting.get(origin, [])
        if durable is None or not waiting:
            return
        now = time.time_ns()
        done = [w for w in waiting if w[0] <= durable]
        self._waiting[origin] = [w for w in waiting if w[0] > durable]
        self.result.timings += [(committed, accepted, now, n) for _, committed, accepted, n in done]

    def _await_durable(self) -> None:
        deadline = time.monotonic() + self.config.sync_deadline_s
        while any(self._waiting.values()):
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
             records: Iterable[tuple[int, Record]]) -> SinkResult:
    """Consume this sink's records (key, record) and land them; returns when all are durable."""
    node_prefix = f"pl-{config.run_id}-sink{reader}-"
    member = Member(backend, node_prefix + attempt, f"{socket.gethostname()}:{os.getpid()}")
    result = SinkResult(reader, attempt)
    try:
        member.wait_alone(node_prefix, config.sync_deadline_s)
        sync = _SyncThread(config, reader, member, result)
        open_parts: dict[int, _Part] = {}
        last_seq: dict[int, int] = {}
        kill = config.kill_reader == reader
        for _, record in records:
            result.received += 1
            if kill and result.received >= config.kill_after:
                kill = False
                if member.claim(RunKeys(config.run_id).chaos_kill, {"reader": reader, "attempt": attempt}):
                    os._exit(137)  # --chaos: this task dies as a crashed executor would, once per run
            origin, seq, size = record[0], record[1], record[2]
            part = open_parts.get(origin)
            if part is None:
                if seq <= last_seq.get(origin, 0):
                    raise SinkFailed(f"sink {reader}: src{origin} transaction {seq} after {last_seq[origin]}")
                part = open_parts[origin] = _Part(origin, seq, record[3], [])
                last_seq[origin] = seq
            elif part.seq != seq:
                raise SinkFailed(f"sink {reader}: src{origin} transaction {seq} arrived inside {part.seq} "
                                 f"({len(part.rows)} of {part.rows[0][2]} changes)")
            part.rows.append(record)
            if len(part.rows) == size:
                del open_parts[origin]
                sync.put(part)
        if open_parts:
            raise SinkFailed(f"sink {reader}: input ended inside transactions {sorted(open_parts.items())[:3]}")
        sync.finish()
        return result
    finally:
        member.leave()


def sink_partition(config: SinkConfig, reader: int, records: Iterator[tuple[int, Record]]) -> Iterator[dict[str, Any]]:
    """The Spark task body: open this executor's cluster handle, run the sink, yield its result."""
    from pyspark import TaskContext

    from reference.cluster.config import open_backend

    ctx = TaskContext.get()
    attempt = f"t{ctx.taskAttemptId()}" if ctx is not None else "t0"
    backend = open_backend(config.cluster_url)
    try:
        yield run_sink(config, reader, attempt, backend, records).as_dict()
    finally:
        backend.close()
