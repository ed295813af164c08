"""Which failure a task of a failed attempt ends with: the root cause, not its own symptom.

When one task of an attempt fails, the others see symptoms of it: a connection closed before its
termination, a failed write, a writer nobody can reach. A task whose own error is such a symptom
looks at the attempt in the directory (again, for up to :data:`ROOT_CAUSE_WAIT_S`, while the
failing task's report travels) and ends with the first cause it finds, in this order: a task's
node the cluster provider declared FAIL (its lost data explains everything else), another task's
reported failure, the attempt's retirement (the job that read it has ended: not a failure). Any
other error is its own root cause. The runtime only looks and waits; this module decides.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from spec.shuffle import errors
from spec.shuffle.coordination import AttemptFailure, AttemptState, Writers

ROOT_CAUSE_WAIT_S: Final = 2.0
"""How long a task hit by a peer's failure waits for that peer's report to reach the directory."""

PEER_SYMPTOMS: Final = (errors.ConnectionClosedBeforeTermination, errors.SendFailed, errors.WriterUnreachable,
                        ConnectionError)
"""Errors that are usually the consequence of another task's failure."""


class RootCause(Enum):
    OWN = "the task's own error"
    NODE_FAILED = "a task's node was declared FAIL (the look at the attempt raised it)"
    PEER_FAILED = "another task's reported failure"
    RETIRED = "the attempt was retired"
    LOOK_AGAIN = "nothing yet: look at the attempt again"


def is_symptom(error: BaseException) -> bool:
    """Whether ``error`` may only be the consequence of another task's failure (worth a look)."""
    return isinstance(error, PEER_SYMPTOMS)


def root_cause(error: BaseException, seen: Writers | errors.ShuffleError | None, waited_s: float) -> RootCause:
    """What a task that failed with ``error`` ends with, after one look at its attempt: ``seen`` is
    what the look returned, the error it raised (a task's node FAIL), or None when the directory
    could not be asked; ``waited_s`` is how long the task has been looking."""
    if not is_symptom(error) or seen is None:
        return RootCause.OWN
    if isinstance(seen, errors.ShuffleError):
        return RootCause.NODE_FAILED
    if isinstance(seen.state, AttemptFailure):
        return RootCause.PEER_FAILED
    if seen.state is AttemptState.RETIRED:
        return RootCause.RETIRED
    return RootCause.LOOK_AGAIN if waited_s < ROOT_CAUSE_WAIT_S else RootCause.OWN
