"""The driver's side of each run (attempt) of a streaming shuffle: when its readers have all started,
whom it serves, the writers its stage lacks, and retiring it once its readers are done or its stage ends.

A run is decided (closed to new readers, its readers fixed) as soon as every partition's task has
joined it, or every unfinished task of its Spark stage has: a stage reading only some partitions
(``take``, ``first``), one task reading several (``coalesce``), or a stage that also reads other
data (``union``) is decided then, and the input partitions whose exchange task is not in the stage
get writer-only tasks from the driver, so the run always has all n writers. A run whose stage has
not started all its tasks within the start bound fails with the numbers (a second action reading
the same result at the same time, or fewer free slots than partitions), rather than wait forever.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Final, NamedTuple

from reference.shuffle.cluster_directory import ClusterDirectory
from spec.shuffle import coordination
from spec.shuffle.errors import ShuffleError

STAGE_POLL_S: Final = 0.02
"""How often the driver looks at the reading stage (its readers joining, its end)."""


class RunDidNotStart(ShuffleError):
    """The tasks of a run's stage did not all start within the start bound."""

    condition = "STREAMING_SHUFFLE_RUN_DID_NOT_START"

    def __init__(self, key: coordination.ShuffleKey, stage: int | None, joined: int, partitions: int,
                 waited_s: float) -> None:
        super().__init__(
            f"streaming shuffle {key.shuffle_id} (run {key.attempt}, stage {stage}): only {joined} of the {partitions} "
            f"partitions' tasks started within {waited_s:g} s; every partition's task must run at once (another "
            "action reading the same result at the same time, or fewer free task slots than partitions)",
            shuffleId=key.shuffle_id, attempt=key.attempt, stage=stage, joined=joined, partitions=partitions)


class StageState(NamedTuple):
    """A stage as the driver's status store knows it."""

    status: str
    """PENDING, ACTIVE, COMPLETE, FAILED or SKIPPED."""
    num_tasks: int
    completed_tasks: int

    @property
    def ended(self) -> bool:
        return self.status not in ("PENDING", "ACTIVE")

    @property
    def unfinished(self) -> int:
        return self.num_tasks - self.completed_tasks


def stage_state(sc: Any, stage: int) -> StageState | None:
    """The latest attempt of ``stage`` in the driver's status store (the one ``statusTracker`` reads,
    which does not show a stage's status); None until the store has heard of the stage."""
    from py4j.protocol import Py4JJavaError

    try:
        data = sc._jsc.sc().statusStore().lastStageAttempt(stage)
    except Py4JJavaError:  # NoSuchElementException: the listener has not seen the stage yet
        return None
    return StageState(str(data.status().toString()), int(data.numTasks()), int(data.numCompleteTasks()))


class Decision(NamedTuple):
    """Whom a run serves, and the Spark stage reading it (watched for its end)."""

    served: frozenset[int]
    stage: int | None


def decide_when_started(sc: Any, holder: ClusterDirectory, key: coordination.ShuffleKey, partitions: int,
                        start_bound_s: float, is_open: Callable[[], bool]) -> Decision | None:
    """Whom run ``key`` serves, decided once all partitions or all unfinished tasks of its stage
    joined; None (the run retired) when the stage ended first or the shuffle closed.
    Raises RunDidNotStart after ``start_bound_s``."""
    deadline = time.monotonic() + start_bound_s
    while is_open():
        run = holder.open_attempt(key)
        if run is None:
            return None  # only this launcher decides its run: it was never opened
        state = None if run.stage is None else stage_state(sc, run.stage)
        if state is not None and state.ended:
            holder.retire(key)
            return None
        if len(run.readers) >= partitions or (state is not None and len(run.readers) >= state.unfinished):
            served = holder.decide(key)
            if served is not None:
                return Decision(served, run.stage)
            continue  # a reader joined meanwhile: look again
        if time.monotonic() > deadline:
            raise RunDidNotStart(key, run.stage, len(run.readers), partitions, start_bound_s)
        time.sleep(STAGE_POLL_S)
    return None


def retire_when_it_ends(sc: Any, holder: ClusterDirectory, key: coordination.ShuffleKey, decision: Decision,
                        is_open: Callable[[], bool]) -> None:
    """Watch the run on a thread of its own while the shuffle is open; retire it once every reader
    it serves reads no more or its stage ends (whatever its end: the writers serving it end quietly).

    A reader whose consumer stopped early (``take``) may leave before it ever connected to some
    writers, which would wait for it; an exchange task waits for its own writer, so its stage could
    never end: the readers' ``done`` marks end the run instead. The stage is the one the decision
    saw (the readers' own entries may not have reached the driver's view yet)."""

    def finished() -> bool:
        if decision.served <= holder.readers_done(key):
            return True
        state = None if decision.stage is None else stage_state(sc, decision.stage)
        return state is not None and state.ended

    def watch() -> None:
        from py4j.protocol import Py4JError

        try:
            while is_open():
                time.sleep(STAGE_POLL_S)
                if finished():
                    holder.retire(key)
                    return
        except (Py4JError, ConnectionError, coordination.CoordinationError):
            return  # the context or the shuffle is closing: nothing is left to retire

    threading.Thread(target=watch, name=f"shuffle-retire-{key.shuffle_id}-{key.attempt}", daemon=True).start()
