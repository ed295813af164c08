"""The tasks of a streaming shuffle run: the exchange task of partition ``i`` is the writer of input
partition ``i`` and the reader of output partition ``i`` side by side (an all-to-all exchange, so n
partitions need n task slots); a writer-only task is what the driver launches for an input
partition whose exchange task is not in the reading stage (``take``, ``coalesce``).

An exchange task joins the run as a reader, waits for the driver's decision of whom the run serves
(runs.py), then writes its input on a thread of its own (which opened its directory meanwhile)
while its task thread reads. Done reading, it marks itself done (the driver retires the run once
all its readers are), and it returns only once its writer has ended, also when its consumer
stopped early: the other readers of the run may still need this writer's data, and a reused
Python worker must not keep a thread reading the previous task's input.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from reference.shuffle.cluster_directory import ClusterDirectory
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.task import PeerTaskFailed, describe
from reference.shuffle.writer_task import WriterTask
from reference.spark.plan import Plan
from spec.shuffle import coordination
from spec.shuffle.errors import ShuffleError
from spec.shuffle.root_cause import ROOT_CAUSE_WAIT_S

RecordsOf = Callable[[Iterable[Any], frozenset[int]], Iterator[tuple[int, bytes]]]
"""Turns a task's input into ``(reader_id, record)`` pairs for the readers a run serves."""

Decode = Callable[[bytes], Iterable[Any]]
"""Turns one received record back into the result's items."""

log = logging.getLogger(__name__)


class ReaderRetryUnsupported(ShuffleError):
    """A reader cannot be retried alone: its writers have already streamed their data (no replay)."""

    condition = "STREAMING_SHUFFLE_READER_RETRY_UNSUPPORTED"

    def __init__(self, reader_id: int, attempt: int, first_failure: str) -> None:
        first_failure = first_failure or (
            f"reader {reader_id}'s first task attempt ended without reporting a failure (its Python worker "
            f"or its executor died)")
        super().__init__(
            f"reader {reader_id} is being retried (task attempt {attempt}); a streaming shuffle cannot "
            f"replay a single reader, so the job fails instead; first failure: {first_failure}",
            readerId=reader_id, attemptNumber=attempt, firstFailure=first_failure,
        )


DECISION_MARGIN_S = 30.0
"""How much longer than the driver's start bound a task waits for its decision (the driver may be gone)."""


def _task_context() -> tuple[int, int | None]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.attemptNumber(), ctx.stageId()) if ctx is not None else (0, None)


def join_run(plan: Plan, reader_id: int) -> tuple[ClusterDirectory, coordination.ShuffleKey]:
    """Join the run of this task's stage as reader ``reader_id``; a retried task fails instead,
    naming the run's first failure (Spark shows the last attempt's error)."""
    attempt_number, stage = _task_context()
    client = plan.shard.open(coordination.Role.READER, reader_id, plan.host())
    if attempt_number > 0:
        try:
            raise ReaderRetryUnsupported(reader_id, attempt_number,
                                         client.latest_failure(plan.shuffle_id, ROOT_CAUSE_WAIT_S))
        finally:
            client.close()
    return client, coordination.ShuffleKey(plan.shuffle_id, client.join(plan.shuffle_id, reader_id, stage))


def wait_served(plan: Plan, client: ClusterDirectory, key: coordination.ShuffleKey) -> frozenset[int] | None:
    """The readers run ``key`` serves, once the driver decided; None when it was retired first.
    Raises the run's first failure (the driver's RunDidNotStart among them)."""
    deadline = time.monotonic() + plan.start_bound_s + DECISION_MARGIN_S
    while True:
        served = client.served(key)
        if served is not None:
            return served
        state = client.lookup(key).state
        if isinstance(state, coordination.AttemptFailure):
            raise PeerTaskFailed(state.text, f"reader {key.attempt} waiting for its run to start")
        if state is coordination.AttemptState.RETIRED:
            return None
        if time.monotonic() > deadline:
            raise PeerTaskFailed(f"the driver did not start run {key.attempt} of shuffle {key.shuffle_id} within "
                                 f"{plan.start_bound_s + DECISION_MARGIN_S:g} s", "waiting for the run to start")
        time.sleep(coordination.POLL_INTERVAL_S)


def open_writer(plan: Plan, writer_id: int) -> ClusterDirectory:
    """Writer ``writer_id``'s own directory (its node in the membership)."""
    return plan.shard.open(coordination.Role.WRITER, writer_id, plan.host())


def write(plan: Plan, key: coordination.ShuffleKey, writer_id: int, records: Iterable[tuple[int, bytes]],
          served: frozenset[int], client: ClusterDirectory) -> None:
    """Stream ``(reader_id, bytes)`` pairs as writer ``writer_id`` to the readers ``served``; closes ``client``."""
    try:
        WriterTask(key, writer_id, plan.num_partitions, plan.settings, client, plan.options("writer", writer_id),
                   served).run(records)
    finally:
        client.close()
        close = getattr(records, "close", None)
        if close is not None:  # a retired run leaves the input unread: stop every thread reading it first
            close()


def exchange(plan: Plan, records_of: RecordsOf, decode: Decode, index: int, items: Iterable[Any]) -> Iterator[Any]:
    """The exchange task of partition ``index``: writes input partition ``index``, yields output partition ``index``.

    The writer's thread opens its directory at once, while the task thread joins the run and waits
    for the decision (each open is a few round trips to the driver: 40-50 ms on a quiet machine),
    then takes the decision, or None when there is nothing to write."""
    decision: queue.SimpleQueue[tuple[coordination.ShuffleKey, frozenset[int]] | None] = queue.SimpleQueue()
    failures: list[BaseException] = []

    def write_input() -> None:
        try:
            client = open_writer(plan, index)
            decided = decision.get()
            if decided is None:
                client.close()
                return
            key, served = decided
            write(plan, key, index, records_of(items, served), served, client)
        except BaseException as error:  # noqa: BLE001 - raised on the task thread after the reader
            failures.append(error)

    writer = threading.Thread(target=write_input, name=f"shuffle-exchange-writer{index}", daemon=True)
    writer.start()
    try:
        client, key = join_run(plan, index)
    except BaseException:
        decision.put(None)
        writer.join()
        raise
    try:
        served = wait_served(plan, client, key)
        if served is None:
            return
        decision.put((key, served))
        try:
            reader = ReaderTask(key, index, range(plan.num_partitions), plan.settings, client,
                                plan.options("reader", index))
            for record in reader.records():
                yield from decode(record)
        finally:
            read_no_more(client, key, index)
    finally:
        decision.put(None)  # the writer takes only the first: this one releases it if none was put
        writer.join()
        client.close()
    if failures:
        raise failures[0]


def read_no_more(client: ClusterDirectory, key: coordination.ShuffleKey, reader_id: int) -> None:
    """Tell the driver this reader is done with run ``key`` (runs.py retires a run whose readers all
    are); unreachable, the run still ends with its stage or its failure."""
    try:
        client.reader_done(key, reader_id)
    except (OSError, coordination.CoordinationError) as error:
        log.info("reader %d of %s could not mark itself done: %s", reader_id, key, describe(error))


def write_only(plan: Plan, key: coordination.ShuffleKey, served: frozenset[int], records_of: RecordsOf, index: int,
               items: Iterable[Any]) -> Iterator[None]:
    """A writer-only task the driver launched for input partition ``index`` of run ``key``."""
    write(plan, key, index, records_of(items, served), served, open_writer(plan, index))
    return iter(())
