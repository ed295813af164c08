"""A streamed result used in any stage gives correct results, or a one-line error naming the case
within the start bound: combined with other data (union, exceptAll, a join), read by one task per
several partitions (coalesce, zip), and read by two actions at once."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from reference.spark import RunDidNotStart, streaming_repartition, streaming_shuffle

pytestmark = pytest.mark.spark

START_BOUND = {"spark.streamwire.shuffle.startTimeoutMs": "60000"}


def rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in df.collect())


@pytest.fixture(scope="module")
def data(spark: Any) -> tuple[Any, Any]:
    df = spark.range(0, 600, 1, 3).selectExpr("id", "id % 7 AS key")
    return df, streaming_repartition(df, 2, "key", conf=START_BOUND)


def test_union_with_other_data_and_with_itself(data: tuple[Any, Any]) -> None:
    df, out = data
    assert rows(out.union(df)) == rows(df.union(df))
    assert rows(df.union(out)) == rows(df.union(df))
    assert out.union(out).count() == 1200


def test_except_all_and_a_join(data: tuple[Any, Any]) -> None:
    df, out = data
    assert out.exceptAll(df).count() == 0 and df.exceptAll(out).count() == 0
    assert rows(out.join(df.withColumnRenamed("key", "k"), "id").select("id", "key")) == rows(df)


def test_one_task_reading_several_partitions(data: tuple[Any, Any]) -> None:
    df, out = data
    assert rows(out.coalesce(1)) == rows(df)
    assert out.coalesce(1).rdd.getNumPartitions() == 1


def test_zip_reads_each_partition_twice_in_one_task(spark: Any) -> None:
    """Each read of a partition is whole; their orders may differ (a reader interleaves its writers'
    streams as they arrive), so zip pairs elements of the same partition."""
    pairs = spark.sparkContext.parallelize([(i % 5, i) for i in range(300)], 2)
    result = streaming_shuffle(pairs, 2, conf=START_BOUND)
    zipped = result.zip(result.map(lambda kv: kv[1])).collect()
    assert sorted(kv[1] for kv, _ in zipped) == sorted(v for _, v in zipped) == list(range(300))
    assert all(kv[0] % 2 == (v % 5) % 2 for kv, v in zipped)  # small ints hash to themselves


def test_two_actions_at_once_are_each_correct_or_name_the_case(data: tuple[Any, Any]) -> None:
    """local[4] holds both runs of 2 partitions at once; where it could not, the run that cannot
    start fails with RunDidNotStart within the start bound instead of waiting forever."""
    df, out = data
    outcomes: list[object] = []

    def count() -> None:
        try:
            outcomes.append(out.count())
        except Exception as error:  # noqa: BLE001 - the outcome is the assertion
            outcomes.append(error)

    threads = [threading.Thread(target=count) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(o == 600 or RunDidNotStart.condition in str(o) for o in outcomes), outcomes
    assert 600 in outcomes
