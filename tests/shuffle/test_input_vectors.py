"""The input corpus: current with the spec (every recorded answer is the spec's answer now, so a change of behaviour
forces a regeneration), valid against its schema, replayed through the exec: inputs contract, and its report
written from the recorded selection."""

from __future__ import annotations

import json
import shlex
import sys

import jsonschema

from conformance.shuffle import inputs
from conformance.shuffle.derived_inputs import derived_requests
from conformance.shuffle.suite.input_cases import first_difference

DOCUMENT = json.loads(inputs.INPUT_FILE.read_text())
SELECTED = [t for t in DOCUMENT["tests"] if t["source"] == "selected"]
REFERENCE = f"{shlex.quote(sys.executable)} -m conformance.shuffle.reference_target"


def test_inputs_json_is_the_spec_s_answer_to_its_recorded_requests() -> None:
    assert inputs.main(["--check"]) == 0, "run: python -m conformance.shuffle.inputs"


def test_inputs_follow_their_schema() -> None:
    schema = json.loads((inputs.INPUT_FILE.parent / inputs.SCHEMA_NAME).read_text())
    jsonschema.validate(DOCUMENT, schema)
    tests = DOCUMENT["tests"]
    assert [t["tcId"] for t in tests] == list(range(1, len(tests) + 1))
    assert DOCUMENT["numberOfTests"] == len(tests) and DOCUMENT["seed"] == inputs.SEED
    assert len({t["candidate"] for t in SELECTED}) == len(SELECTED)


def test_the_derived_requests_follow_the_selected_ones_with_the_spec_s_answers() -> None:
    """An implementer reading only the vector file gets the requests derived from the spec's tables too (the live
    cases send nothing else), each answered as the spec answers it now."""
    derived = DOCUMENT["tests"][len(SELECTED):]
    assert [t["source"] for t in derived] == ["derived"] * len(derived_requests())
    assert [(t["comment"], t["request"]) for t in derived] == derived_requests()
    assert all(t["answer"] == inputs.answer(t["request"]) for t in derived)
    assert {"-500us", "-500US"} <= {value for t in derived for value in t["request"].get("settings", {}).values()}


def test_the_reference_target_answers_every_request_and_a_changed_answer_is_reported() -> None:
    tests = tuple(DOCUMENT["tests"])
    assert first_difference(REFERENCE, tests) is None
    changed = json.loads(json.dumps(tests[:3]))
    changed[2]["answer"] = {"value": "not the spec's"}
    detail = first_difference(REFERENCE, tuple(changed))
    assert detail is not None and detail.startswith(f"tcId {changed[2]['tcId']} ") and "not the spec's" in detail


def test_the_report_is_written_from_the_recorded_selection() -> None:
    outcome = json.loads(inputs.SELECTION_FILE.read_text())
    assert inputs.REPORT_FILE.read_text() == inputs.report(outcome), "run: python -m conformance.shuffle.inputs --report"
    assert [[t["candidate"], t["comment"]] for t in SELECTED] == outcome["kept"]
    names = {m["name"] for m in outcome["mutants"]}
    assert names == set(outcome["killedBy"]) | set(outcome["broken"]) | set(outcome["survivors"]) | set(
        outcome["timedOut"])


def test_a_kept_request_the_seed_no_longer_draws_stays_a_candidate_while_the_spec_answers_it_alike() -> None:
    """A re-selection only adds: an earlier corpus's request the seed no longer draws is a candidate again (numbered
    past the seed's), unless the spec answers it otherwise now; one the seed draws is not added twice."""
    drawn = inputs.candidate(0)
    undrawn = {"function": "authReplays", "capacity": 1, "salts": [[0, 2], [0, 1]]}
    earlier = [{"request": drawn, "answer": inputs.answer(drawn)},
               {"request": undrawn, "answer": {"value": [2, 1]}},
               {"request": undrawn, "answer": {"value": [2, 1]}},
               {"request": {**undrawn, "capacity": 2}, "answer": {"value": [2, 1]}}]  # the spec says [2, 0]
    assert inputs._undrawn(earlier, [drawn]) == [undrawn]
    numbers = [t["candidate"] for t in SELECTED if t["candidate"] >= inputs.CANDIDATES]
    assert numbers == list(range(inputs.CANDIDATES, inputs.CANDIDATES + len(inputs.carried_requests())))


def test_the_record_judges_every_mutant_of_every_family_now() -> None:
    # a new family (or a rule changed) leaves mutants unjudged: python -m conformance.shuffle.inputs --unjudged
    from conformance.operator_mutants import record_problems, rule_of

    outcome = json.loads(inputs.SELECTION_FILE.read_text())
    listed = [rule_of(name) for key in ("survivors", "broken", "timedOut") for name in outcome[key]]
    assert record_problems(inputs.mutants_now(), outcome["killedBy"].keys(), listed) == []
