"""The conformance runner's vocabulary, shared by every suite (shuffle, cluster, sync).

A suite is data: cases with an id, a level and a requirement, judged by a check that observes
the implementation under test (on the wire, or through its public interface), never by its exit
status. The runner (:mod:`conformance.runner`) turns checks into outcomes and reports.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Protocol, Sequence

from spec.auth import AuthConfig


class Level(str, Enum):
    """How binding a requirement is (RFC 2119); INFO cases only describe behaviour."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    INFO = "INFO"


class CaseOutcome(str, Enum):
    """Autobahn-style outcomes; UNSUPPORTED comes only from a target's declared capabilities."""

    PASS = "PASS"
    NON_STRICT = "NON_STRICT"
    FAIL = "FAIL"
    INFO = "INFO"
    UNSUPPORTED = "UNSUPPORTED"
    TIMEOUT = "TIMEOUT"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check saw: whether the requirement held, and expected vs actual in words."""

    passed: bool
    expected: str
    actual: str


class CaseTimeout(Exception):
    """Raised by a check (or its helpers) when the case deadline passes; becomes TIMEOUT."""


class TargetUnreachable(Exception):
    """Raised while opening a target that cannot be reached: the run stops before any case (exit 2)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """Something the peer awaited from the implementation that did not come in time."""

    what: str
    seconds: float
    came: str

    def __str__(self) -> str:
        return f"awaited {self.what} for {self.seconds:.1f} s; came instead: {self.came}"


@dataclass(frozen=True, slots=True)
class Blame:
    """While a case ran, the implementation broke the requirement that case ``case_id`` judges.

    A failing case whose first blame names another failing case is reported as that case's
    dependent: its failure follows from the earlier one rather than being a fault of its own.
    """

    case_id: str
    text: str


class WireLog:
    """Both directions of a case's traffic, in order, for the per-case hex wire log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._entries: list[dict[str, object]] = []

    def record(self, direction: str, data: bytes | bytearray | memoryview) -> None:
        """``direction`` names the sender from the runner's side, e.g. ``"peer->impl"``."""
        entry = {"t_ms": round((time.monotonic() - self._start) * 1000, 3), "dir": direction,
                 "hex": bytes(data).hex()}
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[dict[str, object]]:
        with self._lock:
            return list(self._entries)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What the user asked for on the command line."""

    suite: str
    target: str
    role: str | None = None
    case_prefixes: tuple[str, ...] = ()
    """Only cases whose id starts with one of these (none: every case)."""
    strict: bool = False
    timeout: float = 30.0
    capabilities: frozenset[str] | None = None
    """What the user declared the target can do (``--capabilities``); None: the suite infers it."""
    auth: AuthConfig | None = None
    """Shuffle: authenticate and encrypt every connection (``--secret-file``, ``--cipher``)."""
    jobs: int = 1
    """How many cases run at once (``--jobs``); more than one only where :attr:`Suite.independent_cases` allows."""


@dataclass(slots=True)
class CaseContext:
    """Per-case facilities handed to a check."""

    options: RunOptions
    deadline: float
    level: Level | None = None
    """The requirement level of the case running (None: a check run outside the runner)."""
    wirelog: WireLog = field(default_factory=WireLog)
    waits: list[Wait] = field(default_factory=list)
    blames: list[Blame] = field(default_factory=list)

    def remaining(self) -> float:
        """Seconds left before the case times out; raises CaseTimeout when none are."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CaseTimeout("case deadline passed")
        return left

    def awaited(self, what: str, seconds: float, came: str) -> None:
        """Record a wait for ``what`` that ended after ``seconds`` without it (``came`` instead)."""
        self.waits.append(Wait(what, seconds, came))

    def blame(self, case_id: str, text: str) -> None:
        """Record that the implementation broke case ``case_id``'s requirement (once per case id)."""
        if all(b.case_id != case_id for b in self.blames):
            self.blames.append(Blame(case_id, text))


class Target(Protocol):
    """An implementation under test, opened once per run by its suite."""

    @property
    def description(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...


Check = Callable[[Any, CaseContext], Verdict]


@dataclass(frozen=True, slots=True)
class Case:
    """One requirement and the check that judges it."""

    id: str
    level: Level
    role: str
    requirement: str
    check: Check
    requires: frozenset[str] = frozenset()
    spec_ref: str = ""
    """The section of the generated specification (``docs/spec/<suite>.md#anchor``) the case checks."""

    @property
    def topic(self) -> str:
        return self.id.rsplit("/", 1)[0]


@dataclass(frozen=True, slots=True)
class Suite:
    """A named catalogue of cases and how to reach a target named on the command line."""

    name: str
    cases: Sequence[Case]
    open_target: Callable[[RunOptions], AbstractContextManager[Target]]
    roles: tuple[str, ...]
    target_help: str
    independent_cases: Callable[[str], bool] = lambda target: False
    """Whether the cases against the target named so share nothing (each its own program, connections and
    deadline), so that several may run at once; a target whose cases share a process or a server runs one at a
    time."""


@dataclass(frozen=True, slots=True)
class VectorResult:
    """One golden vector checked against a target (``python -m conformance vectors``)."""

    group: str
    name: str
    passed: bool
    detail: str = ""
    unsupported: bool = False
    """The target declared it cannot take this vector (``detail`` says what it lacks); not run."""
