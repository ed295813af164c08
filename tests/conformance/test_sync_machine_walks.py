"""The sync machine walk corpus (conformance/sync/vectors/machine_walks.json): valid against its schema, every
walk's recorded answers still what the spec's machines give (a spec change that alters behaviour forces a
regeneration), every comment naming the rule it was kept for, and its replay through the ``MACHINES`` control able
to fail."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema

from conformance.corpus_record import stale
from conformance.sync import machine_walks
from conformance.sync.reference_target import answer
from spec.sync.client import Fault
from spec.sync.errors import condition_in, refusals


def test_the_corpus_matches_its_schema_and_counts() -> None:
    corpus = json.loads(machine_walks.WALKS_FILE.read_text())
    jsonschema.validate(corpus, json.loads((machine_walks.WALKS_FILE.parent / machine_walks.SCHEMA_NAME).read_text()))
    tests = machine_walks.recorded()
    assert corpus["numberOfTests"] == len(tests) and [t["tcId"] for t in tests] == list(range(1, len(tests) + 1))
    assert corpus["seed"] == machine_walks.SEED and corpus["generatorVersion"] == machine_walks.GENERATOR_VERSION
    assert {t["machine"] for t in tests} == {"client", "admission", "commit", "responses", "settings", "errors",
                                             "flight"}


def test_the_record_and_report_are_a_selection_over_the_spec_s_mutants_now() -> None:
    """Stale when a rule of the machines' code is added, changed or removed (not when code only moves), or when the
    report or corpus is not the record's."""
    assert stale(machine_walks.FILES, machine_walks.machine_mutants(), machine_walks.report) == [], \
        "run: nice -n 10 python -m conformance.sync.machine_walks"


def test_every_recorded_answer_is_the_spec_s_answer_now() -> None:
    """Regenerate with ``nice -n 10 python -m conformance.sync.machine_walks`` when this fails."""
    modules = {m.rsplit(".", 1)[-1] for m in machine_walks.MODULES}
    for test in machine_walks.recorded():
        assert machine_walks.run_walk(machine_walks.walk_of(test)) == test["answer"], f"tcId {test['tcId']} is stale"
        assert test["comment"].split(".", 1)[0] in modules and ": " in test["comment"]


class _Control:
    """The reference target's control lines answered in process (no server: ``MACHINES`` needs none)."""

    def control(self, line: str) -> str:
        return answer(None, None, line)  # type: ignore[arg-type]


def test_a_walk_answered_otherwise_fails_its_replay_through_the_control() -> None:
    run = machine_walks.through_control(_Control())  # type: ignore[arg-type]
    tests = machine_walks.recorded()
    assert [p for t in tests for p in machine_walks.replay_through(run, t)] == []
    changed: dict[str, Any] = copy.deepcopy(tests[0])
    changed["answer"][-1]["result"] = "not the spec's"
    problems = machine_walks.replay_through(run, changed)
    assert problems and "not the spec's" in problems[0]
    assert _Control().control("MACHINES {not json").startswith("ERROR")


def _recorded_steps(machine: str, call: str) -> list[dict[str, Any]]:
    return [s for t in machine_walks.recorded() if t["machine"] == machine for s in t["steps"] if s["call"] == call]


def test_the_client_is_judged_on_every_refusal_the_spec_defines_under_every_fault() -> None:
    """A re-selection that drops the derived walks (or a refusal added to the spec but not to them) fails here."""
    machine_walks.derived()  # every error the target builds is imported
    conditions = {cls.condition for cls in refusals()}
    judged = {(s["fault"], condition_in(s["text"])) for s in _recorded_steps("client", "afterFailure")}
    assert {("refused", c) for c in conditions} <= judged
    assert {f.value for f in Fault} <= {fault for fault, _ in judged}


def test_every_control_character_is_made_one_line_in_the_corpus() -> None:
    texts = "".join(s["text"] for s in _recorded_steps("errors", "oneLine"))
    assert {chr(c) for c in [*range(0x20), 0x7F]} <= set(texts)
