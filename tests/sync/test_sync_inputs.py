"""The input corpus: the recorded requests are the candidates their labels name, the file follows its schema, the
report is the one the file renders, the suite's cases replay every request, and a request through the reference
target answers as the sans-IO runner the selection used."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pyarrow as pa

from conformance.sync import inputs
from conformance.sync.suite import REFERENCE_CMD, SyncTarget
from conformance.sync.vector_suite import VECTOR_DIR, load_vectors


def test_input_file_matches_its_schema_its_seed_and_its_report() -> None:
    doc = load_vectors("inputs.json")
    jsonschema.validate(doc, json.loads((VECTOR_DIR / doc["schema"]).read_text()))
    selection = doc["selection"]
    table = inputs.faults() | inputs.later_faults()
    for test in doc["testGroups"][0]["tests"]:  # built from its label alone: drawing every candidate takes seconds
        assert test["request"] == inputs.from_label(test["label"], test["request"]["origin"][2:], table), test["tcId"]
        assert test["killed"] == sum(i == test["candidate"] for i in selection["killedBy"].values())
    kept = [t["candidate"] for t in doc["testGroups"][0]["tests"] if t["killed"]]
    assert sorted(set(selection["killedBy"].values())) == kept
    assert inputs.REPORT_FILE.read_text() == inputs.report(doc), "run python -m conformance.sync.inputs"


def test_the_derived_faults_range_over_every_type_the_spec_names_and_every_nested_kind_it_refuses() -> None:
    """Each type ``spec.sync.schema`` names and a type of each nested kind admission refuses has a sample (but a
    dictionary, refused as a Flight message), and what a put takes is the samples but the null, nested and half-float
    types."""
    from spec.sync import admission, schema

    samples = {kind: inputs._arrow_type(kind) for kind in inputs.TYPE_SAMPLES}
    assert set(schema._RUST_TYPE_NAMES) <= set(samples.values())
    refused = [test for test in admission._NESTED if test is not pa.types.is_dictionary]
    assert all(any(test(t) for t in samples.values()) for test in refused)
    taken = {kind for kind, t in samples.items() if not pa.types.is_null(t) and not pa.types.is_float16(t)
             and not any(test(t) for test in refused)}
    assert set(inputs.TAKEN_TYPES) == taken


def test_the_recorded_selection_judges_every_mutant_of_the_spec_now() -> None:
    """Stale when a rule is added, changed or removed, not when code only moves (by rule, without lines)."""
    assert inputs.record_problems(load_vectors("inputs.json")["selection"]) == [], \
        "select again: nice -n 10 python -m conformance.sync.inputs select --out PART, then record PART"


def test_every_recorded_request_is_in_a_case_the_suite_runs() -> None:
    ids = [i for _, group in inputs.groups() for i in group]
    assert ids == list(range(1, load_vectors("inputs.json")["numberOfTests"] + 1))


def test_requests_through_the_reference_target_answer_as_the_runner_does() -> None:
    """The live path (a Flight put, the table read back) and the sans-IO runner agree on a refusal, a taken put whose
    -0.0 key is stored as 0.0, a probe, a put opening a transaction followed by another origin's put, and a put adding
    a column to the table an earlier put stored."""
    plain: dict[str, Any] = {"path": "inputs/t1", "origin": "o1", "seq": 1,
                             "descriptors": [[0, "id"], [1, "id"], [3, "v"]],
                             "columns": [["old_id", "double", [None]], ["new_id", "double", ["-0.0"]],
                                         ["v", "string", ["a"]]]}
    probe = dict(plain, origin="o4", columns=[[n, k, []] for n, k, _ in plain["columns"]], seq=None)
    requests = [dict(plain, path="inputs/_t0", origin="o0"), plain, probe,
                dict(plain, path="inputs/t2", origin="o2", seq=None), dict(plain, path="inputs/t3", origin="o3"),
                dict(plain, path="inputs/t5", origin="o5", stored=dict(plain, path="inputs/t5", origin="o5-stored"),
                     descriptors=[*plain["descriptors"], [3, "w"]], columns=[*plain["columns"], ["w", "string", ["w"]]])]
    target = SyncTarget("reference", frozenset(), REFERENCE_CMD, None)
    target.start()
    try:
        got = [inputs.live_answer(target, request, 30.0) for request in requests]
    finally:
        target.close()
    assert got == [inputs.run_sans_io(request) for request in requests]
    assert got[0]["error"] == "INVALID_TABLE_PATH" and got[1]["tables"] == {"{root}/inputs/t1": [[["id", "0.0"], ["v", "a"]]]}
    assert got[5]["tables"] == {"{root}/inputs/t5": [[["id", "0.0"], ["v", "a"], ["w", "w"]]]}
