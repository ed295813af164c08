"""``seafowl-sync``: the data sync as a PySpark Python Data Source (``df.write`` and ``df.writeStream``).

    register(spark)  # spark.dataSource.register(SyncDataSource), workers set up for a local master
    (df.writeStream.format("seafowl-sync").option("location", "grpc://host:47470")
       .option("table", "events").option("keys", "id")
       .option("checkpointLocation", "/chk/events").start())

Every row is an upsert of its key columns (``keys``, default ``id``): the key is both the old and
the new primary key, every other column a value (a row whose ``deleteColumn`` is true deletes
its key instead). Each Spark partition is its own sync origin, ``<origin>/<partition>``; the
default origin of a streaming query is its id, which a restart from the checkpoint keeps.

Exactly once: a micro-batch's ``batchId`` is the sequence number of its transactions. A query
restarted from its checkpoint replays the batches it had not committed; a partition whose
batch is already durable on the server is acknowledged and skipped (the sync rule for a number
at or below durable), one still only in the server's memory is waited for until durable and
then skipped. With ``waitDurable`` (default true) a batch commits only once durable, so a
checkpoint never runs ahead of the table.
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

from reference.spark.workers import local_workers_use_driver_python
from reference.sync.auth import ClientSecurity
from reference.sync.client import SyncClient, SyncPut
from spec.sync.messages import ColumnDescriptor, ColumnRole

NAME = "seafowl-sync"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property a micro-batch's tasks carry their batch id in (Spark's MicroBatchExecution)."""
QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property holding the query's id, kept in the checkpoint across restarts."""
POLL_S = 0.05


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
            security=ClientSecurity(token=options.get("token") or None, ca_file=options.get("caFile") or None))

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


@dataclass(frozen=True)
class PartitionCommit(WriterCommitMessage):
    """What one write task did: rows sent, or the batch skipped as already durable."""

    origin: str
    rows: int
    skipped: bool


def write_partition(options: SinkOptions, origin: str, sequence: int, batches: Iterator[pa.RecordBatch]) -> PartitionCommit:
    """Send one partition's rows as the transaction ``sequence`` of ``origin`` (once)."""
    rows = pa.Table.from_batches(list(batches))
    if rows.num_rows == 0:
        return PartitionCommit(origin, 0, skipped=False)
    client = SyncClient(options.location, origin, deadline_s=options.deadline_s, security=options.security)
    try:
        deadline = time.monotonic() + options.deadline_s
        state = client.probe()
        while state.memory_sequence_number is not None and sequence <= state.memory_sequence_number:
            if state.durable_sequence_number is not None and sequence <= state.durable_sequence_number:
                return PartitionCommit(origin, rows.num_rows, skipped=True)  # a replay of a durable batch
            _wait(deadline, origin, sequence)  # sent before a crash, not yet durable: wait, then skip
            state = client.probe()
        client.send_transaction(sequence, [SyncPut(options.table, options.changes(rows), options.descriptors)])
        while options.wait_durable and (state.durable_sequence_number is None
                                        or state.durable_sequence_number < sequence):
            _wait(deadline, origin, sequence)
            state = client.probe()
        return PartitionCommit(origin, rows.num_rows, skipped=False)
    finally:
        client.close()


def _wait(deadline: float, origin: str, sequence: int) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"{NAME}: transaction {sequence} of origin {origin} not durable within the deadline "
                           "(option deadlineSeconds; the server flushes after its --max-replication-lag-s)")
    time.sleep(POLL_S)


def _task_origin(options: SinkOptions, default: str) -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    return f"{options.origin or default}/{partition}"


class SyncBatchWriter(DataSourceArrowWriter):
    """``df.write``: one transaction per partition, all with the same sequence number."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.sequence = options.sequence if options.sequence is not None else time.time_ns() // 1000

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionCommit:
        return write_partition(self.options, _task_origin(self.options, "spark"), self.sequence, iterator)


class SyncStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``: the micro-batch's id is the sequence number (exactly once, see the module)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartitionCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
        if batch_id is None or query_id is None:
            raise RuntimeError(f"{NAME}: no micro-batch id in the task (not a micro-batch query?)")
        return write_partition(self.options, _task_origin(self.options, query_id), int(batch_id), iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Every partition is already durable (or acknowledged as such): nothing is left to do."""

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Sent transactions stay: a replay of this batch is skipped where they became durable."""


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
    at the driver's interpreter (the registration keeps the interpreter it sees)."""
    local_workers_use_driver_python(spark.sparkContext)
    spark.dataSource.register(SyncDataSource)
