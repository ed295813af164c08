"""The task-failure requests of the shuffle input corpus (``vectors/inputs.json``, capability ``inputs-tasks``): how
an attempt's first failure reads to the other tasks, which failure a task hit by a peer's ends with, and what a
typed error says of itself; decisions the walks never reach (a trace is one channel, not an attempt's tasks).

``failureText`` is :func:`spec.shuffle.coordination.failure_text` (``description`` a string, or compactly
``{"repeat": HEX, "times": n}``: that UTF-8 repeated, so a report past the 16 KiB bound is a short request; an
answer past 512 bytes is shown as its length and SHA-256). ``rootCause`` is :func:`spec.shuffle.root_cause.root_cause`
for a task's error (named by its type), one look at the attempt (``seen``: null when the directory could not be
asked, ``{"raised": CONDITION}`` when the look raised, else the attempt's ``state`` and writer count) and the seconds
waited. ``errorReport`` builds a typed error of :mod:`spec.shuffle.errors` from its arguments and answers its text,
its JSON and the text of a copy sent to another process (pickled, as PySpark's workers send it).
"""

from __future__ import annotations

import inspect
import pickle
import random
from typing import Any, Callable, Final, Mapping

from conformance.compact_bytes import expand_bytes
from conformance.shuffle.auth_inputs import shown
from spec.shuffle import errors
from spec.shuffle.coordination import MAX_TEXT_BYTES, AttemptFailure, AttemptState, CoordinationError, Role, \
    Writers, WriterLocation, failure_text
from spec.shuffle.root_cause import ROOT_CAUSE_WAIT_S, root_cause

Json = Mapping[str, Any]
FUNCTIONS: Final = ("failureText", "rootCause", "errorReport")

TASK_ERRORS: Final[dict[str, Callable[[], BaseException]]] = {
    "ConnectionClosedBeforeTermination": lambda: errors.ConnectionClosedBeforeTermination("reader", 0),
    "SendFailed": lambda: errors.SendFailed("DATA_MESSAGE_UNSAFE_ROW", "writer", 1, "connection reset"),
    "WriterUnreachable": lambda: errors.WriterUnreachable(0, 2**31 - 1, 0, 120000, "connection refused"),
    "ConnectionError": ConnectionError, "ConnectionResetError": ConnectionResetError,
    "TimeoutError": TimeoutError, "ValueError": ValueError,
    "TaskAborted": lambda: errors.TaskAborted("killed"),
    "ChecksumVerificationFailed": lambda: errors.ChecksumVerificationFailed(0, 1, 2, 3),
    "CoordinationError": lambda: CoordinationError("the directory is lost"),
}
"""A task's own error, by its type's name (symptoms of a peer's failure and errors of its own); any other typed error
of :mod:`spec.shuffle.errors` is named too (:func:`task_error`)."""

REPORTED: Final = tuple(cls for cls in vars(errors).values()
                        if isinstance(cls, type) and issubclass(cls, errors.ShuffleError)
                        and cls.__init__ is not errors.ShuffleError.__init__ and cls is not errors.WriterWaitTimeout)
"""The typed errors whose arguments an ``errorReport`` request gives (a writer's wait is named by its subclasses,
which say what it waited for)."""


def task_error(name: str) -> BaseException:
    """The task's error a ``rootCause`` request names: one of :data:`TASK_ERRORS`, else the typed error of that name
    with each int parameter 0 and each string "reader" (the derived requests name every one)."""
    if name in TASK_ERRORS:
        return TASK_ERRORS[name]()
    cls = next(c for c in REPORTED if c.__name__ == name)
    args: list[Any] = [0 if p.annotation in (int, "int") else "reader"
                       for p in list(inspect.signature(cls.__init__).parameters.values())[1:]]
    return cls(*args)


def _description(value: str | Json) -> str:
    return value if isinstance(value, str) else expand_bytes(value).decode()


def _seen(value: Json | None) -> Writers | errors.ShuffleError | None:
    if value is None:
        return None
    if "raised" in value:
        return CoordinationError(value["raised"])
    state = value["state"]
    writers = tuple(WriterLocation(i, f"executor-{i}", "127.0.0.1", 7337 + i) for i in range(int(value["writers"])))
    return Writers(writers, AttemptState(state) if isinstance(state, str) else AttemptFailure(state["failed"]))


def _error_report(request: Json) -> dict[str, Any]:
    cls = next(c for c in REPORTED if c.__name__ == request["error"])
    error = cls(*request["args"])
    copy = pickle.loads(pickle.dumps(error))
    return {"text": str(error), "json": error.to_json(), "copyText": str(copy), "copyJson": copy.to_json()}


def answer_tasks(request: Json) -> dict[str, Any]:
    """The spec's answer to one task-failure request."""
    function = request["function"]
    if function == "failureText":
        text = failure_text(Role[request["role"]], int(request["task"]), _description(request["description"]))
        return {"value": text if len(text.encode()) <= 512 else shown(text.encode())}
    if function == "rootCause":
        cause = root_cause(task_error(request["error"]), _seen(request["seen"]), float(request["waitedS"]))
        return {"value": cause.name}
    return {"value": _error_report(request)}


# -- the generator ----------------------------------------------------------------------------------------------

_TEXTS: Final = ("", "x", "é", "€", "😀", "ab", "line\nbreak", "\x00")


def _failure_text(rng: random.Random) -> dict[str, Any]:
    task = rng.choice((-(2**31), -2, -1, 0, 1, 2, 2**31 - 1, 2**31, rng.randint(0, 5000)))
    text = rng.choice(_TEXTS)
    prefix = len(f"{Role.READER.name.lower()} {task} failed: ".encode())
    unit = max(len(text.encode()), 1)
    times = rng.choice((0, 1, 3, (MAX_TEXT_BYTES - prefix) // unit, (MAX_TEXT_BYTES - prefix) // unit + 1,
                        MAX_TEXT_BYTES // unit, MAX_TEXT_BYTES // unit + 1, 4 * MAX_TEXT_BYTES // unit))
    description: str | dict[str, Any] = (text * times if times * unit <= 64 else
                                         {"repeat": text.encode().hex(), "times": times})
    return {"function": "failureText", "role": rng.choice([r.name for r in Role]), "task": task,
            "description": description}


def _root_cause(rng: random.Random) -> dict[str, Any]:
    seen: dict[str, Any] | None = rng.choice((
        None, {"raised": "node 3 was declared FAIL"},
        {"state": rng.choice(["running", "running", AttemptState.RETIRED.value,
                              {"failed": "writer 0 failed: boom"}]), "writers": rng.choice((0, 1, 3))}))
    waited = rng.choice((0.0, 0.001, ROOT_CAUSE_WAIT_S - 0.001, ROOT_CAUSE_WAIT_S, ROOT_CAUSE_WAIT_S, ROOT_CAUSE_WAIT_S + 0.001,
                         10.0))
    return {"function": "rootCause", "error": rng.choice(list(TASK_ERRORS)), "seen": seen, "waitedS": waited}


def _argument(rng: random.Random, annotation: object) -> Any:
    if annotation in (int, "int"):
        return rng.choice((0, 1, -1, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63)))
    return rng.choice(("", "reader", "writer", "é", "DATA_MESSAGE_UNSAFE_ROW", "connection reset"))


def _error_report_request(rng: random.Random) -> dict[str, Any]:
    cls = rng.choice(REPORTED)
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return {"function": "errorReport", "error": cls.__name__,
            "args": [_argument(rng, p.annotation) for p in parameters]}


SHAPES: Final[tuple[tuple[Callable[[random.Random], dict[str, Any]], int], ...]] = (
    (_failure_text, 2), (_root_cause, 4), (_error_report_request, 4))
"""Each task-failure request shape with its weight among all the inputs' shapes."""
