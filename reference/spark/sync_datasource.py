"""``seafowl-sync``: the data sync as a PySpark Python Data Source (``df.write`` and ``df.writeStream``).

    register(spark)  # spark.dataSource.register(SyncDataSource), workers set up for a local master
    (df.writeStream.format("seafowl-sync").option("location", "grpc://host:47470")
       .option("table", "events").option("keys", "id")
       .option("checkpointLocation", "/chk/events").start())

Every row is an upsert of its key columns (``keys``, default ``id``): the key is both the old and
the new primary key, every other column a value (a row whose ``deleteColumn`` is true deletes
its key instead).

A batch lands atomically: the write tasks turn their rows into sync changes and hand them to
the driver's commit, which sends the whole batch as one transaction of one origin (the
``origin`` option; default: the streaming query's id, which a restart from the checkpoint keeps,
or ``spark`` for ``df.write``). A failed task or batch sends nothing; empty partitions and empty
batches are normal (an empty batch sends nothing).

Exactly once: a micro-batch's ``batchId`` is its transaction's sequence number. A query
restarted from its checkpoint replays the batches it had not committed; a batch the table
already holds is acknowledged and skipped (the sync rule for a number at or below durable), one
still only in the server's memory is waited for until durable (spec/sync/client.py decides).
With ``waitDurable`` (default true) a batch commits only once durable, so a checkpoint never
runs ahead of the table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from reference.spark.quiet import quiet_stops
from reference.spark.workers import local_workers_use_driver_python
from reference.sync.credentials import ClientSecurity
from reference.sync.client import SyncClient, SyncPut
from spec.sync.messages import ColumnDescriptor, ColumnRole

NAME = "seafowl-sync"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property a micro-batch's tasks carry their batch id in (Spark's MicroBatchExecution)."""
QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property holding the query's id, kept in the checkpoint across restarts."""


class SinkOptionError(ValueError):
    """An option of the ``seafowl-sync`` sink is missing or malformed."""


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, checked on the driver and shipped to every write task."""

    location: str
    table: str
    keys: tuple[str, ...]
    values: tuple[str, ...]
    delete_column: str | None
    origin: str | None
    sequence: int | None
    wait_durable: bool
    deadline_s: float
    security: ClientSecurity

    @classmethod
    def parse(cls, options: Mapping[str, str], columns: list[str]) -> SinkOptions:
        def required(name: str) -> str:
            value = options.get(name)
            if not value:
                raise SinkOptionError(f"the {NAME} sink needs option '{name}'")
            return value

        keys = tuple(k.strip() for k in options.get("keys", "id").split(",") if k.strip())
        delete_column = options.get("deleteColumn") or None
        missing = [c for c in keys + ((delete_column,) if delete_column else ()) if c not in columns]
        if not keys or missing:
            raise SinkOptionError(f"option keys/deleteColumn name columns the data lacks: {missing or 'no keys'} "
                                  f"(columns: {columns})")
        sequence = options.get("sequence")
        return cls(
            location=required("location"), table=required("table"), keys=keys,
            values=tuple(c for c in columns if c not in keys and c != delete_column),
            delete_column=delete_column, origin=options.get("origin") or None,
            sequence=_number("sequence", sequence) if sequence is not None else None,
            wait_durable=options.get("waitDurable", "true").strip().lower() != "false",
            deadline_s=float(_number("deadlineSeconds", options.get("deadlineSeconds", "120"))),
            security=ClientSecurity(token=options.get("token"), ca_file=options.get("caFile") or None))

    @property
    def descriptors(self) -> tuple[ColumnDescriptor, ...]:
        return (tuple(ColumnDescriptor(role=int(ColumnRole.OLD_PK), name=k) for k in self.keys)
                + tuple(ColumnDescriptor(role=int(ColumnRole.NEW_PK), name=k) for k in self.keys)
                + tuple(ColumnDescriptor(role=int(ColumnRole.VALUE), name=v) for v in self.values))

    def changes(self, rows: pa.Table) -> pa.Table:
        """The rows as a sync batch: old keys, new keys (null where deleted), values."""
        deleted = None
        if self.delete_column is not None:
            deleted = pc.fill_null(rows.column(self.delete_column), False)
        columns, names = [], []
        for role, key_columns in (("old", self.keys), ("new", self.keys)):
            for k in key_columns:
                column = rows.column(k)
                if role == "new" and deleted is not None:
                    column = pc.if_else(deleted, pa.scalar(None, column.type), column)
                columns.append(column)
                names.append(f"{role}_{k}")
        columns += [_storable(rows.column(v)) for v in self.values]
        names += [f"value_{v}" for v in self.values]
        return pa.Table.from_arrays(columns, names=names)


def _storable(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Spark hands timestamps in its session time zone (``Etc/UTC``, ``Europe/Paris``); Delta stores
    instants as microseconds in ``UTC``: the same instants, relabelled."""
    if pa.types.is_timestamp(column.type) and column.type.tz is not None and column.type != pa.timestamp("us", "UTC"):
        return column.cast(pa.timestamp("us", "UTC"))
    return column


def _number(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise SinkOptionError(f"option {name} must be an integer, got {raw!r}") from None


MAX_PUT_BYTES = 64 * 1024 * 1024
"""A batch larger than this (in Arrow memory) goes as several puts of one transaction."""


@dataclass(frozen=True)
class PartitionChanges(WriterCommitMessage):
    """One write task's rows as sync changes (an Arrow IPC stream; empty for an empty partition),
    handed to the driver, which sends the whole batch as one transaction."""

    origin: str
    rows: int
    changes: bytes


def partition_changes(options: SinkOptions, origin: str, batches: Iterator[pa.RecordBatch]) -> PartitionChanges:
    """A partition's rows as sync changes; an empty partition (no batch at all) is normal."""
    tables = [options.changes(pa.Table.from_batches([b])) for b in batches if b.num_rows]
    if not tables:
        return PartitionChanges(origin, 0, b"")
    changes = pa.concat_tables(tables)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, changes.schema) as out:
        out.write_table(changes)
    return PartitionChanges(origin, changes.num_rows, sink.getvalue().to_pybytes())


def commit_batch(options: SinkOptions, sequence: int, messages: list[Any]) -> int:
    """Send a batch's partitions as transaction ``sequence`` of their origin: all of them or none.

    The server decides a replay (spec/sync/client.py): a batch the table already holds is skipped,
    one only in the server's memory is waited for; an empty batch sends nothing. With
    ``waitDurable`` this returns once the batch is durable. Returns the rows sent."""
    parts = [m for m in messages if isinstance(m, PartitionChanges) and m.rows]
    if not parts:
        return 0
    changes = pa.concat_tables([pa.ipc.open_stream(m.changes).read_all() for m in parts])
    client = SyncClient(options.location, parts[0].origin, deadline_s=options.deadline_s, security=options.security)
    try:
        client.send_transaction(sequence, [SyncPut(options.table, piece, options.descriptors)
                                           for piece in _pieces(changes)])
        if options.wait_durable:
            client.wait_durable(sequence)
        return int(changes.num_rows)
    finally:
        client.close()


def _pieces(changes: pa.Table) -> list[pa.Table]:
    """``changes`` cut into puts of at most about MAX_PUT_BYTES each (one put when it fits)."""
    count = max(1, -(-changes.nbytes // MAX_PUT_BYTES))
    step = -(-changes.num_rows // count)
    return [changes.slice(start, step) for start in range(0, changes.num_rows, step)]


def _task_property(name: str) -> str | None:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.getLocalProperty(name) if ctx is not None else None


class SyncBatchWriter(DataSourceArrowWriter):
    """``df.write``: the partitions land as one transaction of ``origin`` (default ``spark``)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.sequence = options.sequence if options.sequence is not None else time.time_ns() // 1000

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionChanges:
        return partition_changes(self.options, self.options.origin or "spark", iterator)

    def commit(self, messages: list[Any]) -> None:
        commit_batch(self.options, self.sequence, messages)

    def abort(self, messages: list[Any]) -> None:
        """Nothing was sent: the tasks only hand their rows to the commit."""


class SyncStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``: a micro-batch is one transaction, its ``batchId`` the sequence number
    (exactly once, see the module)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionChanges:
        query_id = _task_property(QUERY_ID_PROPERTY)
        if query_id is None or _task_property(BATCH_ID_PROPERTY) is None:
            raise RuntimeError(f"{NAME}: no micro-batch id in the task (not a micro-batch query?)")
        return partition_changes(self.options, self.options.origin or query_id, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        commit_batch(self.options, batchId, messages)

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Nothing was sent: the tasks only hand their rows to the commit."""


class SyncDataSource(DataSource):
    """Register with ``spark.dataSource.register(SyncDataSource)``; options in the module's doc."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: Any, overwrite: bool) -> SyncBatchWriter:
        return SyncBatchWriter(SinkOptions.parse(self.options, schema.fieldNames()))

    def streamWriter(self, schema: Any, overwrite: bool) -> SyncStreamWriter:
        return SyncStreamWriter(SinkOptions.parse(self.options, schema.fieldNames()))


def register(spark: Any) -> None:
    """``spark.dataSource.register(SyncDataSource)``, after pointing a local master's Python workers
    at the driver's interpreter (the registration keeps the interpreter it sees); ``query.stop()``
    and ``spark.stop()`` print no echo of the stop, and log levels stay as they are (quiet.py)."""
    local_workers_use_driver_python(spark.sparkContext)
    quiet_stops(spark.sparkContext)
    spark.dataSource.register(SyncDataSource)
