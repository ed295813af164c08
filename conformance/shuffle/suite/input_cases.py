"""The input corpus as cases (``vectors/inputs.json``, docs/conformance.md "Input corpus: shuffle"): every recorded
request of a family (the selected ones, then those derived from the spec's tables) is sent through the ``exec:``
inputs contract (capability ``inputs``, one process a case) and each answer must equal the one recorded. A case
reports the first request that differs, expected against actual."""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Callable, Final, Mapping

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.inputs import INPUT_FILE
from conformance.shuffle.targets import ExecTarget, ShuffleTarget
from conformance.shuffle.vector_exec import TraceDriverError, exec_inputs

Json = Mapping[str, Any]
CODEC_FUNCTIONS: Final = frozenset({"decodeFrame", "decodeBody", "decodeStream", "encode", "maxFrame", "checksum",
                                   "gathered"})
SETTINGS_FUNCTIONS: Final = frozenset({"settings", "networkTimeout", "budget"})
AUTH_FUNCTIONS: Final = frozenset({"authServer", "authClient", "authSettings", "authReplays"})
TASK_FUNCTIONS: Final = frozenset({"failureText", "rootCause", "errorReport"})
ADMISSION_FUNCTIONS: Final = frozenset({"strangers", "departures", "connections", "watch"})
"""The request families, one case each: the codec and the JSON form of messages; settings parsing and the memory
budgets they set; authentication; task failures; a server's bounds on connections and a connection's use."""


@cache
def recorded_inputs() -> tuple[Json, ...]:
    return tuple(json.loads(INPUT_FILE.read_text())["tests"])


def first_difference(command: str, tests: tuple[Json, ...]) -> str | None:
    """Where the program's answers first differ from the recorded ones, or None."""
    try:
        answers = exec_inputs(command, [t["request"] for t in tests])
    except TraceDriverError as exc:
        return f"the inputs driver: {exc}"
    for test, actual in zip(tests, answers):
        if actual != test["answer"]:
            why = f"kept for {test['comment']}" if test["source"] == "selected" else test["comment"]
            return (f"tcId {test['tcId']} ({why}) {json.dumps(test['request'])[:400]}: expected "
                    f"{json.dumps(test['answer'])[:300]}, got {json.dumps(actual)[:300]}")
    return None


def input_corpus(functions: frozenset[str], level: str) -> Callable[[ShuffleTarget, CaseContext], Verdict]:
    """The case sending every recorded request (selected and derived) of ``functions`` of ``level`` (INFO requests,
    where Spark 4.3.0 answers otherwise and the wire vectors accept both, are recorded for implementers, never
    judged)."""

    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        assert isinstance(t, ExecTarget)  # only a program can declare ``inputs``
        tests = tuple(test for test in recorded_inputs()
                      if test["request"]["function"] in functions and test["level"] == level)
        expected = f"the spec's answers to {len(tests)} recorded requests ({', '.join(sorted(functions))}; {level})"
        problem = first_difference(t.command, tests)
        if problem is not None:
            return Verdict(False, expected, problem[:1200])
        return Verdict(True, expected, f"{len(tests)} requests answered as the spec answers")

    return check
