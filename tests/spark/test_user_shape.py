"""How a streaming shuffle fits the cluster: one exchange task per partition, the input coalesced
into them or spread over them, and the numbers when the slots do not suffice."""

from __future__ import annotations

import pytest

from reference.spark.shape import InsufficientSlots, Shape, choose_shape


def test_n_partitions_need_n_slots_whatever_the_input() -> None:
    assert choose_shape(3, 2, slots=2) == Shape(partitions=2, input_partitions=3, slots=2)
    assert choose_shape(200, 2, slots=2).fits and not choose_shape(2, 3, slots=2).fits


def test_the_input_is_coalesced_into_or_spread_over_the_exchange_tasks_and_that_is_said() -> None:
    assert choose_shape(200, 2, slots=4).describe() == ("input coalesced from 200 partitions into 2 exchange tasks "
                                                        "on 4 task slots")
    assert choose_shape(1, 3, slots=4).describe() == "1 input partitions in 3 exchange tasks (2 only read) on 4 task slots"
    assert choose_shape(2, 2, slots=0).describe() == ("2 input partitions in 2 exchange tasks on a cluster with no "
                                                      "executor registered yet")


def test_only_a_coalesced_python_input_runs_behind_a_pipe_and_the_warning_names_the_numbers_and_the_fix() -> None:
    """Fewer input partitions keep the input's Python function in the exchange tasks (shuffle.py's
    spread); coalescing cannot, so that shape says so, with the partitions that would avoid it."""
    assert choose_shape(6, 2, slots=4, python_input=True).input_behind_a_pipe
    assert not choose_shape(1, 2, slots=4, python_input=True).input_behind_a_pipe
    assert not choose_shape(2, 2, slots=4, python_input=True).input_behind_a_pipe
    assert not choose_shape(6, 2, slots=4).input_behind_a_pipe  # no Python function: nothing waits in a pipe
    assert choose_shape(6, 2, slots=4, python_input=True).pipe_warning() == (
        "streaming shuffle into 2 partitions coalesces 6 input partitions: their Python function runs in Python "
        "workers of its own and its records reach the exchange tasks late, in batches, through PySpark's buffered "
        "pipe (a source that waits on its own output waits forever); give the input at most 2 partitions to run it "
        "inside the exchange tasks")


def test_no_executor_yet_fits_for_the_launch_to_check_again() -> None:
    assert choose_shape(5, 3, slots=0).fits


def test_fails_with_the_numbers_when_the_partitions_outnumber_the_slots() -> None:
    with pytest.raises(InsufficientSlots, match="streaming shuffle into 3 partitions needs 3 concurrent task slots "
                                                r"\(each partition's task writes and reads at once\), but the "
                                                "cluster offers 2") as caught:
        choose_shape(4, 3, slots=2).require()
    assert caught.value.condition == "STREAMING_SHUFFLE_INSUFFICIENT_SLOTS"
    with pytest.raises(ValueError, match="num_partitions must be >= 1, got 0"):
        choose_shape(4, 0, slots=8)
