"""The wire records of the PySpark API: pickled lists of pairs (RDDs) and Arrow IPC streams
(DataFrames), each made per batch of what has arrived, for the readers a run serves only."""

from __future__ import annotations

import pickle
from typing import Any, Callable, Final, Hashable, Iterable, Iterator

from reference.spark.arrived import arrived_batches

PICKLE_PROTOCOL: Final = 5

PARTITION_COLUMN: Final = "__streaming_shuffle_partition"
"""The column a DataFrame's rows carry their target partition in, until they are written."""


def pair_records(partition_func: Callable[[Any], int], num_partitions: int, max_record_size: int,
                 pairs: Iterable[tuple[Hashable, Any]], served: frozenset[int]) -> Iterator[tuple[int, bytes]]:
    """Each wire record is a pickled list of pairs for one reader: the pairs that had arrived
    together, so pickling and the writer's per-record cost are paid per batch, never waiting for
    more. Pairs for readers the run does not serve are dropped.

    PySpark's default ``portable_hash`` is called once per distinct key of a batch: it is a function
    of the key's value (equal keys hash equally), and each call looks up ``PYTHONHASHSEED`` in the
    environment (0.4 of its 0.45 µs); a caller's own function is called for every pair, as
    ``partitionBy`` does."""
    from pyspark.rdd import portable_hash

    by_key = partition_func is portable_hash
    for batch in arrived_batches(pairs):
        by_reader: list[list[tuple[Hashable, Any]]] = [[] for _ in range(num_partitions)]
        known: dict[Hashable, int] = {}
        for k, v in batch:
            if by_key:
                reader_id = known.get(k, -1)
                if reader_id < 0:
                    reader_id = known[k] = partition_func(k) % num_partitions
            else:
                reader_id = partition_func(k) % num_partitions
            by_reader[reader_id].append((k, v))
        for reader_id, reader_pairs in enumerate(by_reader):
            if reader_pairs and reader_id in served:
                for record in pickled_within(reader_pairs, max_record_size):
                    yield reader_id, record


def pickled_within(pairs: list[tuple[Hashable, Any]], max_record_size: int) -> Iterator[bytes]:
    """``pairs`` pickled as one list, or split in halves until each part fits the readers' record limit
    (a single pair above it is still one record, which the reader refuses)."""
    record = pickle.dumps(pairs, PICKLE_PROTOCOL)
    if len(record) <= max_record_size or len(pairs) == 1:
        yield record
        return
    half = len(pairs) // 2
    yield from pickled_within(pairs[:half], max_record_size)
    yield from pickled_within(pairs[half:], max_record_size)


def unpickled(record: bytes) -> list[Any]:
    """The pairs of one record."""
    pairs: list[Any] = pickle.loads(record)
    return pairs


def ipc_stream(batch: Any) -> bytes:
    """One Arrow record batch as an IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as out:
        out.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def ipc_batches(stream: bytes) -> Iterator[Any]:
    """The record batches of an IPC stream."""
    import pyarrow as pa

    yield from pa.ipc.open_stream(stream)


def to_ipc_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body: each input batch as one row holding its IPC stream (column ``ipc``)."""
    import pyarrow as pa

    for batch in batches:
        if batch.num_rows:
            yield pa.RecordBatch.from_pydict({"ipc": [ipc_stream(batch)]}, schema=pa.schema([("ipc", pa.binary())]))


def from_ipc_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body: the record batches held in rows of IPC streams (column ``ipc``)."""
    for batch in batches:
        for stream in batch.column(0).to_pylist():
            yield from ipc_batches(stream)


def batch_records(streams: Iterable[Any], served: frozenset[int]) -> Iterator[tuple[int, bytes]]:
    """One IPC stream per input batch and reader the run serves, without the partition column."""
    import pyarrow.compute as pc

    readers = sorted(served)
    for row in streams:
        for batch in ipc_batches(bytes(row[0])):
            parts = batch.column(PARTITION_COLUMN)
            data = batch.drop_columns([PARTITION_COLUMN])
            for reader_id in readers:
                chunk = data.filter(pc.equal(parts, reader_id))
                if chunk.num_rows:
                    yield reader_id, ipc_stream(chunk)


def as_ipc_row(record: bytes) -> Iterator[tuple[bytes]]:
    """A received DataFrame record as the one-column row the result's DataFrame is made of."""
    yield (record,)
