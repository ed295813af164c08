"""The wire records of the PySpark API: pickled lists of pairs (RDDs) and Arrow IPC streams
(DataFrames), each made per batch of what has arrived (of Spark's own Arrow batches for DataFrames),
for the readers a run serves only."""

from __future__ import annotations

import functools
import pickle
from typing import Any, Callable, Final, Hashable, Iterable, Iterator

from reference.spark.arrived import arrived_batches

PICKLE_PROTOCOL: Final = 5

PARTITION_COLUMN: Final = "__streaming_shuffle_partition"
"""The column a DataFrame's rows carry their target partition in, until they are written."""


KEYS_REMEMBERED: Final = 1 << 16
"""Distinct keys whose partition a writer remembers before it starts afresh (a bound on its memory)."""


class _PartitionOfKey(dict[Hashable, int]):
    """The reader of each key, computed on the first lookup of a key and remembered (up to
    :data:`KEYS_REMEMBERED` keys, then forgotten together): the lookup of a known key stays in C."""

    def __init__(self, partition_func: Callable[[Any], int], num_partitions: int) -> None:
        super().__init__()
        self.partition_func = partition_func
        self.num_partitions = num_partitions

    def __missing__(self, key: Hashable) -> int:
        if len(self) >= KEYS_REMEMBERED:
            self.clear()
        reader_id = self[key] = self.partition_func(key) % self.num_partitions
        return reader_id


def pair_records(partition_func: Callable[[Any], int], num_partitions: int, max_record_size: int,
                 pairs: Iterable[tuple[Hashable, Any]], served: frozenset[int]) -> Iterator[tuple[int, bytes]]:
    """Each wire record is a pickled list of pairs for one reader: the pairs that had arrived
    together, so pickling and the writer's per-record cost are paid per batch, never waiting for
    more. Pairs for readers the run does not serve are dropped.

    PySpark's default ``portable_hash`` is called once per distinct key (remembered across batches,
    up to :data:`KEYS_REMEMBERED` keys): it is a function of the key's value (equal keys hash
    equally), and each call looks up ``PYTHONHASHSEED`` in the environment (0.4 of its 0.45 µs); a
    caller's own function is called for every pair, as ``partitionBy`` does."""
    from pyspark.rdd import portable_hash

    reader_of: Callable[[Hashable], int] = (
        _PartitionOfKey(partition_func, num_partitions).__getitem__ if partition_func is portable_hash
        else functools.partial(_reader_of, partition_func, num_partitions))
    for batch in arrived_batches(pairs):
        by_reader: list[list[tuple[Hashable, Any]]] = [[] for _ in range(num_partitions)]
        append_to = [reader_pairs.append for reader_pairs in by_reader]
        for k, v in batch:
            append_to[reader_of(k)]((k, v))
        for reader_id, reader_pairs in enumerate(by_reader):
            if reader_pairs and reader_id in served:
                for record in pickled_within(reader_pairs, max_record_size):
                    yield reader_id, record


def _reader_of(partition_func: Callable[[Any], int], num_partitions: int, key: Hashable) -> int:
    """The reader of ``key`` by a caller's own partition function (asked for every pair)."""
    return partition_func(key) % num_partitions


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


def from_ipc_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body: the record batches held in rows of IPC streams (column ``ipc``)."""
    for batch in batches:
        for stream in batch.column(0).to_pylist():
            yield from ipc_batches(stream)


def batch_records(schema: bytes, batches: Iterable[bytes], served: frozenset[int]) -> Iterator[tuple[int, bytes]]:
    """One IPC stream per input batch and reader the run serves, without the partition column.

    ``batches`` are Spark's own Arrow record batch messages (``Dataset.toArrowBatchRdd``: the JVM
    writes them, no Python worker of their own and no row objects); ``schema`` is theirs, an
    encapsulated schema message (:func:`arrow_batches_of`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    readers = sorted(served)
    arrow_schema = pa.ipc.read_schema(pa.py_buffer(schema))
    for message in batches:
        batch = pa.ipc.read_record_batch(pa.py_buffer(message), arrow_schema)
        parts = batch.column(PARTITION_COLUMN)
        data = batch.drop_columns([PARTITION_COLUMN])
        for reader_id in readers:
            chunk = data.filter(pc.equal(parts, reader_id))
            if chunk.num_rows:
                yield reader_id, ipc_stream(chunk)


def arrow_batches_of(df: Any) -> tuple[Any, bytes]:
    """``df`` as an RDD of Arrow record batch messages made by the JVM, and their schema.

    ``df.mapInArrow(...).rdd`` took three conversions more (rows to Arrow for a Python worker of its
    own, its batches back into binary rows, those rows pickled for the next worker): about 1 s of
    JVM CPU per million rows (docs/shuffle-runtime.md). The schema comes from the JVM function the
    batch iterator itself calls, with the same arguments, so the two always agree."""
    from pyspark.core.rdd import RDD
    from pyspark.serializers import NoOpSerializer

    spark = df.sparkSession
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().conf()
    time_zone = conf.sessionLocalTimeZone()
    large_var_types = conf.arrowUseLargeVarTypes()
    arrow_utils = jvm.org.apache.spark.sql.util.ArrowUtils
    schema = arrow_utils.toArrowSchema(df._jdf.schema(), time_zone, True, large_var_types,
                                       getattr(arrow_utils, "toArrowSchema$default$5")())
    jrdd = df._jdf.toArrowBatchRdd(conf.arrowMaxRecordsPerBatch(), time_zone, True, large_var_types)
    return RDD(jrdd.toJavaRDD(), spark.sparkContext, NoOpSerializer()), bytes(schema.serializeAsMessage())


def as_ipc_stream(record: bytes) -> tuple[bytes]:
    """A received DataFrame record as itself, for the JVM helper that makes it rows (jvm_rows.py)."""
    return (record,)


def as_ipc_row(record: bytes) -> Iterator[tuple[bytes]]:
    """A received DataFrame record as the one-column row of the Python pass's DataFrame (where the
    JVM helper did not load)."""
    yield (record,)
