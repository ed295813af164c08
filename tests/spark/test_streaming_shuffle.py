"""The PySpark API on a local master: same partitions as partitionBy / repartition, faults fail the job."""

from __future__ import annotations

import pickle
import random
import socket
import time
import uuid
from collections import Counter
from dataclasses import replace
from typing import Any, Iterable, Iterator, cast

import pytest

from reference.spark import InsufficientSlots, streaming_repartition, streaming_shuffle
from reference.shuffle.cluster_directory import DirectoryAddress
from reference.spark.plan import Plan, runtime_flush_when_idle, runtime_limits
from reference.spark.records import pair_records, pickled_within
from reference.spark.shape import choose_shape
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.framing import DEFAULT_MAX_RECORD_SIZE
from tests.shuffle.outgoing_faults import corrupt_next_data

pytestmark = pytest.mark.spark

HANG_GUARD_S = 120.0
"""Only ends a hung run; nothing here asserts on time."""


def random_pairs(n: int, keys: int, seed: int) -> list[tuple[Any, Any]]:
    rng = random.Random(seed)
    return [(rng.choice([rng.randrange(keys), f"k{rng.randrange(keys)}"]), i) for i in range(n)]


def assert_same_partitions(got: list[list[Any]], expected: list[list[Any]]) -> None:
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        assert Counter(mine) == Counter(theirs)


@pytest.mark.parametrize(("writers", "readers"), [(1, 1), (3, 1), (2, 2), (1, 3)])
def test_equals_partition_by_and_keeps_each_writers_order(spark: Any, writers: int, readers: int) -> None:
    sc = spark.sparkContext
    rdd = sc.parallelize(random_pairs(3000, 50, seed=writers * 7 + readers), writers)
    got = streaming_shuffle(rdd, readers).glom().collect()
    assert_same_partitions(got, rdd.partitionBy(readers).glom().collect())
    # parallelize gives writer w a contiguous run of indices: within a reader they must stay increasing.
    bounds = [min(i for _, i in part) for part in rdd.glom().collect() if part]
    for part in got:
        for writer_id, low in enumerate(bounds):
            high = bounds[writer_id + 1] if writer_id + 1 < len(bounds) else float("inf")
            mine = [i for _, i in part if low <= i < high]
            assert mine == sorted(mine)


def test_result_is_lazy_and_composable(spark: Any) -> None:
    sc = spark.sparkContext
    result = streaming_shuffle(sc.parallelize([(k % 5, k) for k in range(500)], 2), 2)
    summed = dict(result.reduceByKey(lambda a, b: a + b).collect())
    assert summed == {k: sum(v for v in range(500) if v % 5 == k) for k in range(5)}
    assert result.count() == 500  # a second run of the same result starts a new attempt


def test_empty_input_and_empty_partitions(spark: Any) -> None:
    sc = spark.sparkContext
    assert streaming_shuffle(sc.parallelize([], 2), 2).glom().collect() == [[], []]
    got = streaming_shuffle(sc.parallelize([(0, "only")], 2), 2, lambda k: 1).glom().collect()
    assert got == [[], [(0, "only")]]


def test_one_key_for_everything(spark: Any) -> None:
    rdd = spark.sparkContext.parallelize([("same", i) for i in range(4000)], 2)
    got = streaming_shuffle(rdd, 2).glom().collect()
    assert_same_partitions(got, rdd.partitionBy(2).glom().collect())
    assert sorted(len(p) for p in got) == [0, 4000]


def test_records_larger_than_the_network_buffer(spark: Any) -> None:
    conf = {"spark.shuffle.streaming.networkBufferSize": "1024"}
    rdd = spark.sparkContext.parallelize([(i, "x" * 5000 * (i % 3)) for i in range(60)], 2)
    got = streaming_shuffle(rdd, 2, conf=conf).glom().collect()
    assert_same_partitions(got, rdd.partitionBy(2).glom().collect())


def test_a_record_above_the_readers_limit_fails_the_job_with_a_typed_error(spark: Any) -> None:
    """spark.streamwire.shuffle.maxRecordSize reaches the readers: a larger record is refused from its
    frame header (FRAME_LENGTH_OUT_OF_RANGE) instead of being buffered."""
    conf = {"spark.shuffle.streaming.networkBufferSize": "1024", "spark.streamwire.shuffle.maxRecordSize": "2000"}
    rdd = spark.sparkContext.parallelize([(0, "small"), (1, "x" * 50_000)], 2)
    with pytest.raises(Exception, match="FRAME_LENGTH_OUT_OF_RANGE"):
        streaming_shuffle(rdd, 2, conf=conf).collect()


def test_a_batch_of_pairs_is_split_until_each_record_fits_the_readers_limit() -> None:
    pairs = [(i, f"{i:03d}" * 40) for i in range(50)]
    records = list(pickled_within(pairs, 1000))
    assert len(records) > 1 and all(len(r) <= 1000 for r in records)
    assert [pair for r in records for pair in pickle.loads(r)] == pairs
    (alone,) = pickled_within([(0, "x" * 5000)], 1000)  # one pair above the limit stays one record
    assert pickle.loads(alone) == [(0, "x" * 5000)]


def test_each_pair_goes_to_its_keys_partition_and_unserved_readers_get_nothing(monkeypatch: Any) -> None:
    """The default partitioner is asked once per distinct key of a batch: equal keys of other types
    (1, 1.0, True; tuples of them) still land where a call per pair puts them."""
    from pyspark.rdd import portable_hash

    monkeypatch.setenv("PYTHONHASHSEED", "0")
    keys: list[Any] = [1, 1.0, True, None, (1, None), (1.0, None), "a", b"a", 0, -1, 2**70, ("a", (2, 3))]
    pairs = [(k, i) for i, k in enumerate(keys * 3)]
    for func in (portable_hash, lambda k: len(repr(k))):
        got: dict[int, list[Any]] = {}
        for reader_id, record in pair_records(func, 3, DEFAULT_MAX_RECORD_SIZE, iter(pairs), frozenset({0, 2})):
            got.setdefault(reader_id, []).extend(pickle.loads(record))
        expected: dict[int, list[Any]] = {}
        for k, v in pairs:
            expected.setdefault(func(k) % 3, []).append((k, v))
        expected.pop(1, None)
        assert got == expected


def test_runtime_limits_come_from_the_conf_and_refuse_bad_values() -> None:
    limits, max_record = runtime_limits({"spark.streamwire.shuffle.maxPendingConnections": "8",
                                         "spark.streamwire.shuffle.bindTimeoutMs": "1500"})
    assert (limits.max_pending, limits.bind_timeout_s, max_record) == (8, 1.5, DEFAULT_MAX_RECORD_SIZE)
    with pytest.raises(ValueError, match="maxRecordSize must be a positive integer, got '1k'"):
        runtime_limits({"spark.streamwire.shuffle.maxRecordSize": "1k"})
    with pytest.raises(ValueError, match="maxPendingConnections"):
        runtime_limits({"spark.streamwire.shuffle.maxPendingConnections": "0"})


def test_the_bind_timeout_defaults_to_spark_network_timeout() -> None:
    assert runtime_limits({})[0].bind_timeout_s == 120.0
    assert runtime_limits({"spark.network.timeout": "45"})[0].bind_timeout_s == 45.0  # seconds, as Spark reads it
    assert runtime_limits({"spark.network.timeout": "2min"})[0].bind_timeout_s == 120.0
    assert runtime_limits({"spark.network.timeout": "45s",
                           "spark.streamwire.shuffle.bindTimeoutMs": "1500"})[0].bind_timeout_s == 1.5
    with pytest.raises(ValueError, match="spark.network.timeout"):
        runtime_limits({"spark.network.timeout": "soon"})


def test_the_idle_flush_is_opt_in_by_a_boolean_key_that_reaches_the_writers_options() -> None:
    assert not runtime_flush_when_idle({})  # Spark's flush by default (issue 41's 5% rule)
    assert not runtime_flush_when_idle({"spark.streamwire.shuffle.flushWhenIdle": " False "})
    assert runtime_flush_when_idle({"spark.streamwire.shuffle.flushWhenIdle": "TRUE"})  # the idle flush
    with pytest.raises(ValueError, match="flushWhenIdle should be boolean, but was 'yes'"):
        runtime_flush_when_idle({"spark.streamwire.shuffle.flushWhenIdle": "yes"})
    plan = Plan(0, 1, ShuffleSettings(), cast(DirectoryAddress, None), "127.0.0.1", None)
    assert not plan.options("writer", 0).flush_when_idle
    assert replace(plan, flush_when_idle=True).options("writer", 0).flush_when_idle


def test_more_partitions_than_slots_fall_back_to_sparks_shuffle_or_fail_with_the_numbers(
        spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """local[4]: 5 partitions need 5 exchange tasks at once. By default Spark's own shuffle runs
    instead, with one warning line naming the numbers; fallback="error" fails at once."""
    rdd = spark.sparkContext.parallelize([(i % 11, i) for i in range(300)], 3)
    with pytest.raises(InsufficientSlots, match=r"streaming shuffle into 5 partitions needs 5 concurrent task slots "
                                                r"\(each partition's task writes and reads at once\), but the cluster "
                                                "offers 4"):
        streaming_shuffle(rdd, 5, fallback="error")
    with caplog.at_level("WARNING", logger="reference.spark.shuffle"):
        got = streaming_shuffle(rdd, 5).glom().collect()
    assert_same_partitions(got, rdd.partitionBy(5).glom().collect())
    assert [r.getMessage() for r in caplog.records if r.name == "reference.spark.shuffle"] == [
        "streaming shuffle into 5 partitions needs 5 task slots at once, the cluster offers 4: running Spark's "
        'own shuffle instead (fallback="spark")']


def test_more_input_partitions_than_partitions_are_coalesced_into_the_exchange_tasks(
        spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """6 input partitions are written by the 2 exchange tasks of 2 partitions; where the input ends in
    a Python function, which then runs behind PySpark's pipe, one warning line says so."""
    rdd = spark.sparkContext.parallelize(random_pairs(2000, 40, seed=3), 6)
    mapped = rdd.map(lambda pair: pair)
    with caplog.at_level("WARNING", logger="reference.spark.shuffle"):
        assert_same_partitions(streaming_shuffle(rdd, 2).glom().collect(), rdd.partitionBy(2).glom().collect())
        assert [r.getMessage() for r in caplog.records if r.name == "reference.spark.shuffle"] == []
        assert_same_partitions(streaming_shuffle(mapped, 2).glom().collect(), rdd.partitionBy(2).glom().collect())
    assert [r.getMessage() for r in caplog.records if r.name == "reference.spark.shuffle"] == [
        choose_shape(6, 2, 4, python_input=True).pipe_warning()]


ARRIVAL_BOUND_S = 20.0
"""How long a source waits for its first record to reach its reader: only ends a stuck run."""


def test_a_source_waiting_for_its_own_output_gets_it_through_with_fewer_input_partitions(spark: Any) -> None:
    """One input partition into 2 exchange tasks: the source sends a record, then waits for its reader
    to have it (as a CDC source waits for its output to become durable). Spread through a union, the
    source ran in a Python worker of its own whose output sat in PySpark's buffered pipe until the
    source ended, so it never came: the exchange task must run the source itself."""
    address = f"\0streamwire-arrivals-{uuid.uuid4().hex}"  # Linux abstract socket: no file to clean up

    def source(_: int, __: Iterable[int]) -> Iterator[tuple[int, str]]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as arrivals:
            arrivals.bind(address)
            arrivals.settimeout(ARRIVAL_BOUND_S)
            yield 1, "first"
            try:
                arrivals.recv(1)
            except TimeoutError:
                raise RuntimeError("the source's first record never reached its reader") from None
            yield 1, "after its arrival"

    def tell_the_source(pairs: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        for pair in pairs:
            if pair[1] == "first":
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as told:
                    told.sendto(b"!", address)
            yield pair

    sources = spark.sparkContext.parallelize([0], 1).mapPartitionsWithIndex(source)
    got = streaming_shuffle(sources, 2, partition_func=lambda key: key).mapPartitions(tell_the_source).glom().collect()
    assert got == [[], [(1, "first"), (1, "after its arrival")]]


def test_writer_failure_fails_the_job_with_its_error(spark: Any) -> None:
    def explode(kv: tuple[int, int]) -> tuple[int, int]:
        if kv[1] == 1500:
            raise ValueError("writer input broke at 1500")
        return kv

    rdd = spark.sparkContext.parallelize([(i % 7, i) for i in range(2000)], 2).map(explode)
    with pytest.raises(Exception, match="writer input broke at 1500"):
        streaming_shuffle(rdd, 2).collect()


def test_failing_reader_ends_the_writers(spark: Any) -> None:
    """The run ends and leaves no writer registered, however early its tasks fail: a writer failing
    right after it registered used to stay registered. The user's job fails with the reader's error;
    the writers take the reader's early close for a leave (or see the failed stage retire the run),
    so they end quietly instead of adding their own failures."""
    from reference.spark import shuffle as api
    from spec.shuffle.coordination import ShuffleKey

    def explode(kv: tuple[int, int]) -> tuple[int, int]:
        raise RuntimeError("reader consumer failed")

    sc = spark.sparkContext
    result = streaming_shuffle(sc.parallelize([(i % 7, i) for i in range(200000)], 2), 2)
    with pytest.raises(Exception, match="reader consumer failed"):
        result.map(explode).collect()
    coordinator = api.StreamingShuffle.default(sc).directory
    shuffle_id = max(coordinator.open_shuffles())
    key = ShuffleKey(shuffle_id, 0)
    driver = coordinator.directory(shuffle_id)  # the driver's node in the shuffle's shard
    deadline = time.monotonic() + HANG_GUARD_S
    while driver.view.writers(key) and time.monotonic() < deadline:  # the failed stage retires the run
        time.sleep(0.05)
    assert driver.view.writers(key) == [], "writers still registered after their run ended"
    assert driver.view.entry(f"shuffle/{shuffle_id}/0/failure") is None


def test_corrupted_payload_fails_with_checksum_verification_failed(spark: Any) -> None:
    def corrupting(pairs: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        corrupt_next_data()  # in the worker that runs the writer over these pairs
        yield from pairs

    rdd = spark.sparkContext.parallelize([(i, i) for i in range(100)], 1).mapPartitions(corrupting)
    with pytest.raises(Exception, match="STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"):
        streaming_shuffle(rdd, 1).collect()


def python_passes(frame: Any) -> int:
    """The Python UDF passes (``mapInArrow``) in ``frame``'s plan."""
    return str(frame._jdf.queryExecution().analyzed().toString()).count("MapInArrow")


def sorted_partitions(frame: Any) -> list[list[tuple[Any, ...]]]:
    return cast(list[list[tuple[Any, ...]]], frame.rdd.glom().map(lambda rows: sorted(tuple(r) for r in rows)).collect())


def test_streaming_repartition_equals_repartition_by_columns(spark: Any) -> None:
    """Through the JVM helper (built by ``make spark-helper``): no Python pass after the exchange."""
    df = spark.range(0, 5000, 1, 2).selectExpr("id", "id % 13 AS k", "CAST(id AS STRING) AS s")
    got = streaming_repartition(df, 2, "k")
    assert python_passes(got) == 0, "the JVM helper did not load: run `make spark-helper`"
    assert got.rdd.getNumPartitions() == 2
    assert got.schema == df.schema
    assert sorted_partitions(got) == sorted_partitions(df.repartition(2, "k"))


def test_streaming_repartition_without_the_jvm_helper_warns_once_and_takes_a_python_pass(
        spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    import weakref

    from reference.spark import jvm_rows

    monkeypatch.setattr(jvm_rows, "JAR", tmp_path / "streamwire-spark.jar")
    monkeypatch.setattr(jvm_rows, "_helpers", weakref.WeakKeyDictionary())
    df = spark.range(0, 500, 1, 2).selectExpr("id", "id % 7 AS k")
    with caplog.at_level("WARNING", logger=jvm_rows.__name__):
        got = streaming_repartition(df, 2, "k")
        assert jvm_rows.to_rows(spark) is None  # asked again: no second warning
    warned = [r.getMessage() for r in caplog.records if r.name == jvm_rows.__name__]
    assert len(warned) == 1 and "\n" not in warned[0] and "did not load" in warned[0], warned
    assert python_passes(got) == 1
    assert sorted_partitions(got) == sorted_partitions(df.repartition(2, "k"))


def test_streaming_repartition_keeps_every_column_type_arrow_carries(spark: Any) -> None:
    """The input arrives as the JVM's own Arrow batches read with the schema the JVM gives them:
    times with and without a zone, decimals, binary, nulls and nested types come out as they went in."""
    df = spark.range(0, 300, 1, 2).selectExpr(
        "id % 5 AS k", "CAST(id AS INT) AS i", "id * 0.5 AS d", "CAST(id AS DECIMAL(20, 3)) AS dec",
        "id % 2 = 0 AS b", "IF(id % 3 = 0, NULL, CAST(id AS STRING)) AS s", "CAST(CAST(id AS STRING) AS BINARY) AS bin",
        "TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts",
        "CAST(TIMESTAMP'2026-01-01 00:00:00' AS TIMESTAMP_NTZ) AS ntz", "DATE'2026-01-01' + CAST(id AS INT) AS day",
        "array(id, id + 1) AS arr", "named_struct('x', id, 'y', CAST(id AS STRING)) AS st", "map('m', id) AS m")
    got = streaming_repartition(df, 2, "k")
    assert got.schema == df.schema

    def partitions(frame: Any) -> list[list[str]]:
        return cast(list[list[str]], frame.rdd.glom().map(lambda rows: sorted(repr(r) for r in rows)).collect())

    assert partitions(got) == partitions(df.repartition(2, "k"))


def test_a_service_the_caller_owns_shuffles_then_releases_its_coordinator(spark: Any) -> None:
    """``with StreamingShuffle(spark) as s``: its own coordinator (not the context's default one),
    closed with the block: its cluster service stops listening and it opens no more shuffles."""
    import socket
    from urllib.parse import urlsplit

    from reference.spark import StreamingShuffle

    sc = spark.sparkContext
    pairs = sc.parallelize([(i % 13, i) for i in range(2000)], 2)
    df = spark.range(0, 600, 1, 2).selectExpr("id", "id % 7 AS k")
    with StreamingShuffle(spark) as service:
        assert service.directory is not StreamingShuffle.default(sc).directory
        assert_same_partitions(service.shuffle(pairs, 2).glom().collect(), pairs.partitionBy(2).glom().collect())
        mine = service.repartition(df, 2, "k").rdd.glom().map(lambda rows: sorted(tuple(r) for r in rows)).collect()
        assert mine == df.repartition(2, "k").rdd.glom().map(lambda rows: sorted(tuple(r) for r in rows)).collect()
        address = urlsplit(service.directory.task_url)
    assert address.scheme == "tcp"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address.hostname, address.port), timeout=5).close()
    with pytest.raises(ValueError, match="closed"):
        service.shuffle(pairs, 2)
