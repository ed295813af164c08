"""The walk corpus as cases (``vectors/walks.json``, docs/conformance.md "Walk corpus: shuffle"): every recorded
walk is replayed through the ``exec:`` trace contract and each answer must equal the one recorded from the spec
machines (with ``deadlines`` declared, the instant the side next needs a tick too). A case reports the first
walk that differs, at its first differing step, expected against actual.

Walks are split by the side under test and by level: a walk ending in a failure where the reference is
stricter than Spark 4.3.0, or using an option Spark lacks, is a SHOULD (``walks.level_of``); a walk making a reader
leave is played only by a program declaring ``reader-left``, one with ``connectTimeoutMs`` only by one declaring
``connect-timeout``. A program declaring
``trace-reset`` plays a case's walks in one process; otherwise, or when that process breaks the contract (a crash
in one walk), each walk gets a process of its own, two at a time, and the first walk that differs is named.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, Callable, Final, Mapping, Sequence

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.suite.deadline_cases import CONNECT_TIMEOUT
from conformance.shuffle.targets import ExecTarget, ShuffleTarget
from conformance.shuffle.vector_exec import DEADLINES, HEADER_KEYS, READER_LEFT, RESET, TraceDriverError, exec_traces
from conformance.shuffle.walks import WALK_FILE, leaves

Json = Mapping[str, Any]
OBSERVED: Final = ("sends", "events")
WORKERS: Final = 2


@cache
def recorded_walks() -> tuple[Json, ...]:
    return tuple(json.loads(WALK_FILE.read_text())["tests"])


def walks_of(role: str, level: str) -> list[Json]:
    return [w for w in recorded_walks() if w["role"] == role and w["level"] == level]


def _header(walk: Json, deadlines: bool) -> dict[str, Any]:
    return {**{k: walk[k] for k in HEADER_KEYS if k in walk}, "deadlines": deadlines}


def _inputs(walk: Json) -> list[dict[str, Any]]:
    return [{k: v for k, v in step.items() if k not in (*OBSERVED, "deadline")} for step in walk["steps"]]


def compare(walk: Json, answers: Sequence[Json], deadlines: bool) -> str | None:
    """Where ``answers`` first differ from the walk's recorded ones, or None."""
    observed = (*OBSERVED, "deadline") if deadlines else OBSERVED
    for index, (step, answer) in enumerate(zip(walk["steps"], answers)):
        expected = {k: step[k] for k in observed}
        actual = {k: answer.get(k) for k in observed}
        if actual != expected:
            return (f"walk {walk['tcId']} (kept for {walk['comment']}) step {index} ({step['input']}): expected "
                    f"{json.dumps(expected)[:400]}, got {json.dumps(actual)[:400]}")
    return None


def first_difference(command: str, walks: Sequence[Json], deadlines: bool, reset: bool) -> str | None:
    """Where the program's answers first differ from the recorded ones: the walks played by one process when it
    declares ``trace-reset``, else by one process each, two at a time."""
    def played(batch: Sequence[Json]) -> str | None:
        try:
            answers = exec_traces(command, [(_header(w, deadlines), _inputs(w)) for w in batch])
        except TraceDriverError as exc:
            return f"walks {batch[0]['tcId']}..{batch[-1]['tcId']}: the trace driver: {exc}"
        return next((p for w, a in zip(batch, answers) if (p := compare(w, a, deadlines)) is not None), None)

    if reset:
        found = played(walks)
        if found is None or "the trace driver" not in found:
            return found
    with ThreadPoolExecutor(WORKERS) as pool:  # a walk a process: a crash is pinned to its walk
        return next((p for p in pool.map(lambda w: played([w]), walks) if p is not None), None)


def playable(walks: Sequence[Json], capabilities: frozenset[str]) -> list[Json]:
    """The ``walks`` a program declaring ``capabilities`` plays: one with ``connectTimeoutMs`` needs
    ``connect-timeout``, one making a reader leave needs ``reader-left``."""
    return [w for w in walks if (CONNECT_TIMEOUT in capabilities or "connectTimeoutMs" not in w)
            and (READER_LEFT in capabilities or not leaves(w))]


def walk_corpus(role: str, level: str) -> Callable[[ShuffleTarget, CaseContext], Verdict]:
    """The case replaying the ``role`` walks of ``level``."""

    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        assert isinstance(t, ExecTarget)  # only a program can declare ``traces``
        walks = playable(walks_of(role, level), t.capabilities)
        deadlines = DEADLINES in t.capabilities
        problem = first_difference(t.command, walks, deadlines, RESET in t.capabilities)
        expected = f"the spec machines' answers to {len(walks)} {role} walks ({level})"
        if problem is not None:
            return Verdict(False, expected, problem[:1200])
        return Verdict(True, expected, f"{len(walks)} walks answered as the spec answers")

    return check
