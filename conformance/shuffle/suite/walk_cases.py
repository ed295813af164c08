"""The walk corpus as cases (``vectors/walks.json``, docs/conformance.md "Walk corpus: shuffle"): every recorded
walk is replayed through the ``exec:`` trace contract and each answer must equal the one recorded from the spec
machines (with ``deadlines`` declared, the instant the side next needs a tick too). A case reports the first
walk that differs, at its first differing step, expected against actual.

Walks are split by the side under test and by level: a walk ending in a failure where the reference is
stricter than Spark 4.3.0, or using an option Spark lacks, is a SHOULD (``walks.level_of``). Each walk costs one
trace-driver process; two run at a time, so a case of forty walks stays well inside a case's 15 s.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, Callable, Final, Mapping

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.suite.deadline_cases import CONNECT_TIMEOUT
from conformance.shuffle.targets import ExecTarget, ShuffleTarget
from conformance.shuffle.vector_exec import DEADLINES, HEADER_KEYS, TraceDriverError, exec_answers
from conformance.shuffle.walks import WALK_FILE

Json = Mapping[str, Any]
OBSERVED: Final = ("sends", "events")
WORKERS: Final = 2


@cache
def recorded_walks() -> tuple[Json, ...]:
    return tuple(json.loads(WALK_FILE.read_text())["tests"])


def walks_of(role: str, level: str) -> list[Json]:
    return [w for w in recorded_walks() if w["role"] == role and w["level"] == level]


def first_difference(command: str, walk: Json, deadlines: bool) -> str | None:
    """Where the program's answers to ``walk`` first differ from the recorded ones, or None."""
    header = {**{k: walk[k] for k in HEADER_KEYS if k in walk}, "deadlines": deadlines}
    inputs = [{k: v for k, v in step.items() if k not in (*OBSERVED, "deadline")} for step in walk["steps"]]
    observed = (*OBSERVED, "deadline") if deadlines else OBSERVED
    try:
        answers = exec_answers(command, header, inputs)
    except TraceDriverError as exc:
        return f"walk {walk['tcId']}: the trace driver: {exc}"
    for index, (step, answer) in enumerate(zip(walk["steps"], answers)):
        expected = {k: step[k] for k in observed}
        actual = {k: answer.get(k) for k in observed}
        if actual != expected:
            return (f"walk {walk['tcId']} (kept for {walk['comment']}) step {index} ({step['input']}): expected "
                    f"{json.dumps(expected)[:400]}, got {json.dumps(actual)[:400]}")
    return None


def walk_corpus(role: str, level: str) -> Callable[[ShuffleTarget, CaseContext], Verdict]:
    """The case replaying the ``role`` walks of ``level``."""

    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        assert isinstance(t, ExecTarget)  # only a program can declare ``traces``
        walks = walks_of(role, level)
        if CONNECT_TIMEOUT not in t.capabilities:
            walks = [w for w in walks if "connectTimeoutMs" not in w]
        deadlines = DEADLINES in t.capabilities
        with ThreadPoolExecutor(WORKERS) as pool:
            found = list(pool.map(lambda w: first_difference(t.command, w, deadlines), walks))
        problems = [p for p in found if p is not None]
        expected = f"the spec machines' answers to {len(walks)} {role} walks ({level})"
        if problems:
            return Verdict(False, expected, f"{len(problems)} differ; first: {problems[0]}"[:1200])
        return Verdict(True, expected, f"{len(walks)} walks answered as the spec answers")

    return check
