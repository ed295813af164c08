"""How many writers a streaming shuffle runs: the input's partitions, coalesced to the free slots."""

from __future__ import annotations

import pytest

from reference.spark.shuffle import InsufficientSlots, Shape, choose_shape


def test_writers_are_the_input_partitions_when_they_fit() -> None:
    assert choose_shape(3, 2, slots=8) == Shape(writers=3, readers=2, input_partitions=3, slots=8)
    assert not choose_shape(3, 2, slots=8).coalesced


def test_writers_shrink_to_the_slots_left_beside_the_readers() -> None:
    shape = choose_shape(200, 2, slots=4)
    assert (shape.writers, shape.coalesced) == (2, True)
    assert shape.describe() == "2 writers (input coalesced from 200 partitions) + 2 readers on 4 task slots"
    assert choose_shape(4, 1, slots=2).writers == 1  # local[2] repartitions into one partition


def test_no_executor_yet_keeps_the_input_for_the_launch_to_check() -> None:
    assert choose_shape(5, 3, slots=0) == Shape(5, 3, 5, 0)


def test_fails_with_the_numbers_only_when_one_writer_cannot_run_beside_the_readers() -> None:
    with pytest.raises(InsufficientSlots, match="needs 1 writer \\+ 2 reader = 3 concurrent task slots, but the "
                                                "cluster offers 2") as caught:
        choose_shape(4, 2, slots=2)
    assert caught.value.condition == "STREAMING_SHUFFLE_INSUFFICIENT_SLOTS"
    with pytest.raises(ValueError, match="num_partitions must be >= 1, got 0"):
        choose_shape(4, 0, slots=8)
