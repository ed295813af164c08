"""The walk corpus: current with the spec (every recorded answer is the spec machines' answer now, so a change
of behaviour forces a regeneration), valid against its schema, and replayed as the trace vectors are."""

from __future__ import annotations

import json
import shlex
import sys

import jsonschema

from conformance.shuffle import walks
from conformance.shuffle.suite.walk_cases import first_difference, playable
from conformance.shuffle.vector_exec import READER_LEFT

DOCUMENT = json.loads(walks.WALK_FILE.read_text())


def test_walks_json_is_the_spec_s_answer_to_its_recorded_walks() -> None:
    assert walks.main(["--check"]) == 0, "run: python -m conformance.shuffle.walks"


def test_walks_follow_their_schema() -> None:
    schema = json.loads((walks.WALK_FILE.parent / walks.SCHEMA_NAME).read_text())
    jsonschema.validate(DOCUMENT, schema)
    tests = DOCUMENT["tests"]
    assert [t["tcId"] for t in tests] == list(range(1, len(tests) + 1))
    assert DOCUMENT["numberOfTests"] == len(tests) and DOCUMENT["seed"] == walks.SEED
    assert {t["role"] for t in tests} == {"writer", "reader"}
    assert len({t["walk"] for t in tests}) == len(tests)


MACHINES = f"{shlex.quote(sys.executable)} -m conformance.shuffle.machines_target"


def test_the_replay_reports_a_changed_deadline_at_its_step() -> None:
    walks = json.loads(json.dumps(DOCUMENT["tests"][:2]))
    assert first_difference(MACHINES, walks, deadlines=True, reset=True) is None
    last = len(walks[1]["steps"]) - 1
    walks[1]["steps"][last]["deadline"] = 123456789
    for reset in (True, False):  # one process for every walk, or one each
        detail = first_difference(MACHINES, walks, deadlines=True, reset=reset)
        assert detail is not None and detail.startswith(f"walk {walks[1]['tcId']} ") and f"step {last} " in detail
        assert "123456789" in detail
    # a target without deadlines is not asked for them
    assert first_difference(MACHINES, walks, deadlines=False, reset=True) is None


def test_the_report_is_written_from_the_recorded_selection() -> None:
    outcome = json.loads(walks.SELECTION_FILE.read_text())
    assert walks.REPORT_FILE.read_text() == walks.report(outcome), "run: python -m conformance.shuffle.walks --report"
    assert [[t["walk"], t["comment"]] for t in DOCUMENT["tests"]] == outcome["kept"]
    # every mutant is told apart, broken or a survivor, and every survivor is judged or listed as a gap
    names = {m["name"] for m in outcome["mutants"]}
    assert names == set(outcome["killedBy"]) | set(outcome["broken"]) | set(outcome["survivors"]) | set(
        outcome["timedOut"])


LEAVING = [t for t in DOCUMENT["tests"] if walks.leaves(t)]


def test_readers_leave_through_the_trace_contract() -> None:
    # the driver takes readerLeft and readersMayLeave (capability reader-left) and answers as the spec
    assert LEAVING and all(t["role"] == "writer" and t["level"] == "SHOULD" for t in LEAVING)
    assert first_difference(MACHINES, LEAVING, deadlines=True, reset=True) is None
    # a program that does not declare reader-left is never sent them; one that does is sent every one
    declared = frozenset({"traces", "writer", "connect-timeout"})
    assert not any(walks.leaves(w) for w in playable(DOCUMENT["tests"], declared))
    assert playable(DOCUMENT["tests"], declared | {READER_LEFT}) == DOCUMENT["tests"]


def test_the_walks_tell_a_leave_that_keeps_an_open_buffer_s_permits_apart() -> None:
    # the ninth blind round's writer survivor, caught by the walk corpus alone (the walk-corpus cases replay it)
    bug = "writer-leave-keeps-open-buffer-permits"
    assert walks.catalogue_caught([bug]) == ([bug], [])


def test_the_record_judges_every_mutant_of_every_family_now() -> None:
    # a new family (or a rule changed) leaves mutants unjudged: python -m conformance.shuffle.walks --select
    from conformance.operator_mutants import every_mutant, record_problems, rule_of

    outcome = json.loads(walks.SELECTION_FILE.read_text())
    now = [m for module in walks.MODULES for m in every_mutant(module)] + walks.table_mutants()
    listed = [rule_of(name) for key in ("survivors", "broken", "timedOut") for name in outcome[key]]
    assert record_problems(now, outcome["killedBy"].keys(), listed) == []
