"""The decode corpus: the file follows its schema, its inputs are the candidates of its seed, the recorded answers
are the spec's answers now, and the report is the one the file renders."""

from __future__ import annotations

import json
import time

import jsonschema

from conformance.framework import CaseContext, RunOptions
from conformance.sync import decode
from conformance.sync.suite import REFERENCE_CMD, SUITE, SyncTarget
from conformance.sync.vector_suite import VECTOR_DIR, load_vectors


def test_decode_file_matches_its_schema_its_seed_and_its_report() -> None:
    doc = load_vectors("decode.json")
    jsonschema.validate(doc, json.loads((VECTOR_DIR / doc["schema"]).read_text()))
    selection = doc["selection"]
    pool = decode.candidates(selection["seed"])
    assert selection["candidates"] == len(pool)
    for test in doc["testGroups"][0]["tests"]:
        assert test["input"] == pool[test["candidate"]], test["tcId"]
        assert test["killed"] == sum(i == test["candidate"] for i in selection["killedBy"].values())
    assert decode.REPORT_FILE.read_text() == decode.report(doc), "run python -m conformance.sync.decode"


def test_the_recorded_selection_judges_every_mutant_of_the_spec_now() -> None:
    """Stale when a rule is added, changed or removed, not when code only moves (by rule, without lines)."""
    assert decode.record_problems(load_vectors("decode.json")["selection"]) == [], \
        "select again: nice -n 10 python -m conformance.sync.decode select"


def test_recorded_answers_are_the_spec_s_answers_now() -> None:
    for test in load_vectors("decode.json")["testGroups"][0]["tests"]:
        assert decode.answer(test["input"]) == test["expected"], test["tcId"]


def test_an_untyped_error_is_recorded_as_raised_and_a_long_run_is_compact() -> None:
    assert decode.answer({"decoder": "ipc", "header": "", "body": ""})["raised"] == "EOFError"
    many = decode.answer({"decoder": "flight_data", "hex": {"repeat": "1a016d", "times": 1000}})
    assert many == {"value": {"descriptor": None, "header": "", "body": ""}}
    assert decode.varint(1, 3) == b"\x81\x80\x00" and decode.field(2, b"x") == b"\x12\x01x"


def test_the_suite_s_case_replays_every_input_through_the_reference_target_s_decode_line() -> None:
    """The MUST case passes on the reference target (which declares ``decode``), fails on an answer that differs, and
    is for targets declaring ``decode`` only (a target without it reports it unsupported)."""
    case = next(c for c in SUITE.cases if c.id == "decode/recorded")
    assert case.requires == frozenset({"decode"})
    target = SyncTarget("reference", frozenset(), REFERENCE_CMD, None)
    target.start()
    try:
        assert target.declared is not None and "decode" in target.declared
        ctx = CaseContext(options=RunOptions(suite="sync", target="reference"), deadline=time.monotonic() + 60)
        verdict = case.check(target, ctx)
        assert verdict.passed, verdict
        cut = {"decoder": "descriptor", "hex": "1202"}
        line = target.control("DECODE " + json.dumps(cut))
        assert line == "DECODE " + json.dumps(decode.answer(cut)) and '"error": "FLIGHT_DATA_ERROR"' in line
        assert target.control("DECODE {").startswith("ERROR ")
    finally:
        target.close()


class _Differs:
    """A target whose decoder answers every input with the same value."""

    def control(self, line: str, timeout: float = 0.0) -> str:
        return 'DECODE {"value": 0}'


def test_the_case_fails_on_the_first_answer_that_differs() -> None:
    ctx = CaseContext(options=RunOptions(suite="sync", target="fake"), deadline=time.monotonic() + 60)
    verdict = decode.replay(_Differs(), ctx)  # type: ignore[arg-type]
    assert not verdict.passed and verdict.expected.startswith("input tcId 1 ") and verdict.actual == '{"value": 0}'
