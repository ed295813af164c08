"""How a streaming shuffle fits the cluster: one exchange task per output partition, each writing
one input partition beside its reader, so n partitions need n task slots at once."""

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

    @property
    def fits(self) -> bool:
        return self.slots == 0 or self.slots >= self.partitions

    @property
    def coalesced(self) -> bool:
        return self.input_partitions > self.partitions

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


def choose_shape(input_partitions: int, partitions: int, slots: int) -> Shape:
    """The shape of a shuffle of ``input_partitions`` into ``partitions`` on ``slots`` task slots."""
    if partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {partitions}")
    return Shape(partitions, input_partitions, slots)
