"""The trace vectors: current with their scenarios, valid against their schema, and replayed."""

from __future__ import annotations

import json

import jsonschema

from conformance.shuffle import vector_traces
from conformance.shuffle.vector_suite import check_vectors

DOCUMENT = json.loads(vector_traces.VECTOR_FILE.read_text())


def test_traces_json_is_regenerated_from_the_scenarios() -> None:
    assert vector_traces.main(["--check"]) == 0, "run: python -m conformance.shuffle.vector_traces --write"


def test_traces_follow_their_schema_and_every_flag_is_explained() -> None:
    schema = json.loads((vector_traces.VECTOR_FILE.parent / vector_traces.SCHEMA_NAME).read_text())
    jsonschema.validate(DOCUMENT, schema)
    tests = DOCUMENT["tests"]
    assert [t["tcId"] for t in tests] == list(range(1, len(tests) + 1))
    assert DOCUMENT["numberOfTests"] == len(tests) >= 30
    assert {f for t in tests for f in t["flags"]} <= set(DOCUMENT["notes"])
    assert {t["role"] for t in tests} == {"writer", "reader"}
    assert len({t["name"] for t in tests}) == len(tests)


def test_every_trace_passes_on_the_reference() -> None:
    failed = [r for r in vector_traces.check_trace_vectors("reference") if not r.passed]
    assert not failed, failed[:3]


def test_a_changed_answer_is_reported() -> None:
    trace = json.loads(json.dumps(DOCUMENT["tests"][1]))
    trace["steps"][1]["events"][0]["records"] = ["00"]
    detail = vector_traces.check_trace(trace)
    assert detail is not None and detail.startswith("step 1")


def test_the_shuffle_vector_suite_replays_the_traces() -> None:
    names = [r.group for r in check_vectors("reference")]
    assert names.count("traces/reader") + names.count("traces/writer") == len(DOCUMENT["tests"])
