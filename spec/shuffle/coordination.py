"""What writer and reader tasks ask of the shuffle's directory, as types and one protocol.

Spark 4.3.0 keeps this in the driver's ``StreamingShuffleOutputTracker`` (writers register
``(executor, host, port)``, readers poll every 10 ms). Its RPC is internal to Spark; here the
directory lives on the cluster-provider interface (reference/shuffle/cluster_directory.py), and
the tasks depend only on :class:`ShuffleDirectory`, so a test, a benchmark or a conformance target
can hand them one without a cluster (reference/shuffle/standalone_directory.py).

A shuffle *attempt* is one run of the writers for one run of the readers: recomputing the lazy
result starts a new attempt, so readers never see the servers of an earlier run. An attempt ends
when its writers complete, when a task fails (the first failure), or when it is *retired*: the job
that read it no longer needs it (a partial evaluation took its rows), which is not a failure, so
every task of the attempt ends quietly.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Protocol

from spec.shuffle.errors import ShuffleError

MAX_TEXT_BYTES: Final = 16 * 1024
"""Longest failure report kept, in UTF-8 bytes (long traces are cut, not lost)."""

POLL_INTERVAL_S: Final = 0.010
"""Readers look for writers every 10 ms, as Spark's tracker clients do."""


class Role(IntEnum):
    WRITER = 0
    READER = 1
    DRIVER = 2


class CoordinationError(ShuffleError):
    """A directory operation failed; tasks treat it like a lost directory."""

    condition = "STREAMING_SHUFFLE_COORDINATION_ERROR"


@dataclass(frozen=True, slots=True)
class ShuffleKey:
    shuffle_id: int
    attempt: int


@dataclass(frozen=True, slots=True)
class WriterLocation:
    """Where a writer task's server listens."""

    writer_id: int
    executor: str
    host: str
    port: int


class AttemptState(Enum):
    RUNNING = "running"
    RETIRED = "retired: nobody reads the attempt any more, its tasks end quietly"


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """An attempt's first failure, as every other task reads it (see :func:`failure_text`)."""

    text: str


@dataclass(frozen=True, slots=True)
class Writers:
    """The writers known so far and where the attempt stands; a failure wins over a retirement."""

    writers: tuple[WriterLocation, ...]
    state: AttemptState | AttemptFailure = AttemptState.RUNNING


class ShuffleDirectory(Protocol):
    """What writer and reader tasks need from the directory, and nothing more."""

    def register(self, key: ShuffleKey, writer: WriterLocation) -> None: ...

    def lookup(self, key: ShuffleKey) -> Writers: ...

    def unregister(self, key: ShuffleKey, writer_id: int) -> None: ...

    def report_failure(self, key: ShuffleKey, role: Role, task: int, description: str) -> None: ...


def failure_text(role: Role, task: int, description: str) -> str:
    """How an attempt's first failure reads to every other task (``task`` < 0: the role itself),
    cut to MAX_TEXT_BYTES so that it always fits the directory."""
    who = role.name.lower() if task < 0 else f"{role.name.lower()} {task}"
    raw = f"{who} failed: {description}".encode()
    return raw[:MAX_TEXT_BYTES].decode(errors="ignore")
