"""How a streaming shuffle fits the cluster: one exchange task per output partition, each writing
one input partition beside its reader, so n partitions need n task slots at once; and whether the
input's Python function runs inside the exchange tasks or in Python workers of its own."""

from __future__ import annotations

from typing import NamedTuple

from spec.shuffle.errors import ShuffleError


class InsufficientSlots(ShuffleError):
    """Every partition's exchange task must run at once; the cluster cannot hold that many tasks."""

    condition = "STREAMING_SHUFFLE_INSUFFICIENT_SLOTS"

    def __init__(self, partitions: int, slots: int) -> None:
        super().__init__(
            f"streaming shuffle into {partitions} partitions needs {partitions} concurrent task slots (each "
            f"partition's task writes and reads at once), but the cluster offers {slots}; use at most {slots} "
            "partitions, more executor cores, or fallback=\"spark\"",
            partitions=partitions, slots=slots,
        )


class Shape(NamedTuple):
    """The exchange tasks of a shuffle and how the input is assigned to them."""

    partitions: int
    input_partitions: int
    slots: int
    """Task slots of the cluster (0: no executor registered yet, checked again at launch)."""
    python_input: bool = False
    """The input ends in a Python function PySpark can pipeline (an uncached ``PipelinedRDD``)."""

    @property
    def fits(self) -> bool:
        return self.slots == 0 or self.slots >= self.partitions

    @property
    def coalesced(self) -> bool:
        return self.input_partitions > self.partitions

    @property
    def input_behind_a_pipe(self) -> bool:
        """The input's Python function runs in Python workers of its own, its records reaching the
        exchange tasks through PySpark's batched serializer and buffered pipe: late, in batches, and
        never for a source that waits on its own output. Coalescing takes the input's ``_jrdd`` (its
        function's output), and a coalesced task's stream has no partition boundaries to run the
        function on; an input with fewer partitions keeps its function in the exchange tasks."""
        return self.python_input and self.coalesced

    def pipe_warning(self) -> str:
        """The one line a shuffle logs when its input is behind a pipe: the numbers and the fix."""
        return (f"streaming shuffle into {self.partitions} partitions coalesces {self.input_partitions} input "
                "partitions: their Python function runs in Python workers of its own and its records reach the "
                "exchange tasks late, in batches, through PySpark's buffered pipe (a source that waits on its own "
                f"output waits forever); give the input at most {self.partitions} partitions to run it inside the "
                "exchange tasks")

    def describe(self) -> str:
        if self.coalesced:
            inputs = f"input coalesced from {self.input_partitions} partitions into {self.partitions} exchange tasks"
        elif self.input_partitions < self.partitions:
            inputs = (f"{self.input_partitions} input partitions in {self.partitions} exchange tasks "
                      f"({self.partitions - self.input_partitions} only read)")
        else:
            inputs = f"{self.partitions} input partitions in {self.partitions} exchange tasks"
        where = f"{self.slots} task slots" if self.slots else "a cluster with no executor registered yet"
        return f"{inputs} on {where}"

    def require(self) -> Shape:
        """This shape, or InsufficientSlots with the numbers when it does not fit."""
        if not self.fits:
            raise InsufficientSlots(self.partitions, self.slots)
        return self


def choose_shape(input_partitions: int, partitions: int, slots: int, python_input: bool = False) -> Shape:
    """The shape of a shuffle of ``input_partitions`` into ``partitions`` on ``slots`` task slots;
    ``python_input``: the input ends in a Python function PySpark can pipeline."""
    if partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {partitions}")
    return Shape(partitions, input_partitions, slots, python_input)
