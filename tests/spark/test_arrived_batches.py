"""Batching what has arrived: every item in order, and never waiting for an item still to come."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest

from reference.spark.arrived import arrived_batches

HANG_GUARD_S = 30.0


def test_every_item_arrives_in_order_and_batches_respect_the_limit() -> None:
    batches = list(arrived_batches(iter(range(10_000)), limit=64))
    assert [item for batch in batches for item in batch] == list(range(10_000))
    assert all(1 <= len(batch) <= 64 for batch in batches)


def test_a_batch_never_waits_for_an_item_that_has_not_arrived() -> None:
    second_may_come = threading.Event()

    def source() -> Iterator[int]:
        yield 1
        assert second_may_come.wait(HANG_GUARD_S)
        yield 2

    batches = arrived_batches(source())
    assert next(batches) == [1]  # the source is still waiting: the batch holds only what came
    second_may_come.set()
    assert next(batches) == [2]
    assert list(batches) == []


def test_an_error_of_the_source_is_raised_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise KeyError("bad row")

    seen: list[int] = []
    with pytest.raises(KeyError, match="bad row"):
        for batch in arrived_batches(source()):
            seen += batch
    assert seen == [1]


def test_closed_early_the_puller_takes_no_item_after_the_close() -> None:
    asked: list[int] = []
    second_asked = threading.Event()

    def source() -> Iterator[int]:
        for i in range(3):
            asked.append(i)
            if i == 1:
                second_asked.set()
            yield i

    batches = arrived_batches(source(), limit=1)
    assert next(batches) == [0]
    assert second_asked.wait(HANG_GUARD_S)  # the puller took item 1 and waits for room (limit 1)
    batches.close()
    assert 2 not in asked
