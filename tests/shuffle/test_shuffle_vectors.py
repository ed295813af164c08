"""The golden wire vectors: well-formed, up to date, and obeyed by both byte paths.

Every vector goes through the fast ``struct`` codec (via the vector runner) and through the
construct layouts, which are the source of truth; together this proves the two agree.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from construct import ConstructError

from conformance.shuffle.vector_suite import VECTOR_DIR, check_vectors, check_wire_test, load
from conformance.shuffle import vectorgen
from spec.shuffle.jsonform import from_json
from spec.shuffle.layouts import FIELDS_BY_TYPE, FRAME, MESSAGE_BODY
from spec.shuffle.messages import DataMessage, Message

DOCUMENT = load("wire_messages.json")
TESTS = [(group, test) for group in DOCUMENT["testGroups"] for test in group["tests"]]
IDS = [f"{test['tcId']}-{group['name']}" for group, test in TESTS]
BODY_ERRORS = {"STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE", "TRUNCATED_INPUT", "NEGATIVE_DATA_SIZE",
               "DATA_SIZE_MISMATCH"}


def construct_fields(message: Message) -> dict[str, Any]:
    """The message in the shape of :data:`MESSAGE_BODY`, field names taken from the layouts."""
    fields = {sub.name: getattr(message, sub.name) for sub in FIELDS_BY_TYPE[message.type].subcons}
    payload = bytes(message.payload) if isinstance(message, DataMessage) else None
    return {"header": {"type_id": int(message.type), "seq": message.seq}, "fields": fields, "payload": payload}


def plain(value: Any) -> Any:
    """A parsed construct Container as plain dicts, without construct's private ``_io`` keys."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if not k.startswith("_")}
    return value


def test_file_is_what_the_generator_produces() -> None:
    assert (VECTOR_DIR / "wire_messages.json").read_text() == vectorgen.render(), \
        "run: python -m conformance.shuffle.vectorgen"


def test_file_validates_against_its_schema() -> None:
    schema = json.loads((VECTOR_DIR / "wire_messages.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(DOCUMENT)


def test_schema_rejects_a_64_bit_number_written_as_json_number() -> None:
    schema = json.loads((VECTOR_DIR / "wire_messages.schema.json").read_text())
    broken = json.loads(json.dumps(DOCUMENT))
    broken["testGroups"][0]["tests"][0]["message"]["seq"] = 5
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_counts_ids_and_flags() -> None:
    results = Counter(test["result"] for _, test in TESTS)
    assert results["valid"] >= 30 and results["invalid"] >= 25
    assert [test["tcId"] for _, test in TESTS] == list(range(1, len(TESTS) + 1))
    assert DOCUMENT["numberOfTests"] == len(TESTS)
    used = {flag for _, test in TESTS for flag in test["flags"]}
    assert used == set(DOCUMENT["notes"])
    types = {test["message"]["type"] for _, test in TESTS if test["result"] == "valid"}
    assert len(types) == 4
    assert Path(VECTOR_DIR / "wire_messages.json").stat().st_size < 1024 * 1024


@pytest.mark.parametrize(("group", "test"), TESTS, ids=IDS)
def test_reference_codec_obeys_vector(group: dict[str, Any], test: dict[str, Any]) -> None:
    assert check_wire_test(group, test) is None


@pytest.mark.parametrize(("group", "test"), [t for t in TESTS if t[1]["result"] == "valid"],
                         ids=[i for i, t in zip(IDS, TESTS) if t[1]["result"] == "valid"])
def test_construct_layouts_agree_on_valid_vector(group: dict[str, Any], test: dict[str, Any]) -> None:
    message = from_json(test["message"])
    body, frame = bytes.fromhex(test["body"]), bytes.fromhex(test["frame"])
    assert MESSAGE_BODY.build(construct_fields(message)) == body
    assert plain(MESSAGE_BODY.parse(body)) == construct_fields(message)
    frame_header = {"frame_length": len(frame), "message_type": 9, "body_length": len(body)}
    assert FRAME.build({"header": frame_header, "body": construct_fields(message)}) == frame
    assert plain(FRAME.parse(frame)) == {"header": frame_header, "body": construct_fields(message)}


@pytest.mark.parametrize(("group", "test"), [t for t in TESTS if t[1].get("error") in BODY_ERRORS and "body" in t[1]],
                         ids=[i for i, t in zip(IDS, TESTS) if t[1].get("error") in BODY_ERRORS and "body" in t[1]])
def test_construct_layouts_reject_invalid_body(group: dict[str, Any], test: dict[str, Any]) -> None:
    with pytest.raises(ConstructError):
        MESSAGE_BODY.parse(bytes.fromhex(test["body"]))


def test_construct_layout_ignores_fixed_body_trailing_bytes_like_spark() -> None:
    acceptable = [t for _, t in TESTS if "SparkIgnoresTrailingBytes" in t["flags"]]
    assert acceptable
    for test in acceptable:
        parsed = MESSAGE_BODY.parse(bytes.fromhex(test["body"]))
        assert parsed.header.seq == int(test["message"]["seq"])


def test_runner_reports_every_vector_and_names_groups() -> None:
    results = [r for r in check_vectors("reference") if not r.group.startswith("traces/")]  # traces: test_model_trace_vectors
    assert len(results) == len(TESTS) and all(r.passed for r in results)
    assert {r.group for r in results} == {g["name"] for g in DOCUMENT["testGroups"]}


def test_runner_fails_a_vector_whose_bytes_were_altered() -> None:
    group, test = next((g, t) for g, t in TESTS if t["result"] == "valid")
    altered = dict(test, frame=test["frame"][:-2] + "ff")
    assert check_wire_test(group, altered) is not None


def test_every_spec_ref_points_at_an_anchor_of_the_generated_spec() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "spec" / "shuffle.md").read_text()
    anchors = {test["specRef"].split("#", 1)[1] for _, test in TESTS}
    assert all(f'<a id="{anchor}"></a>' in text for anchor in anchors)
