"""pgoutput golden vectors: well-formed, and the spec's decoder reads every captured payload as
recorded, builds every status update byte for byte and refuses every malformed one with its error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conformance.pgoutput import vectorgen
from conformance.pgoutput.vector_suite import STREAM_FILE, TRANSACTIONS_FILE, check_vectors, load


@pytest.mark.parametrize("path", [STREAM_FILE, TRANSACTIONS_FILE], ids=lambda p: p.name)
def test_vector_file_matches_its_schema(path: Path) -> None:
    doc = load(path)
    jsonschema.validate(doc, json.loads((path.parent / doc["schema"]).read_text()))


def test_every_vector_passes_against_the_reference() -> None:
    results = list(check_vectors("reference"))
    assert {r.group for r in results} == {"Captured", "StandbyStatusUpdate", "Malformed", "Transactions"}
    assert [r for r in results if not r.passed] == []


def test_transaction_vectors_are_derived_from_the_capture() -> None:
    assert vectorgen.main(["--check"]) == 0, "run: python -m conformance.pgoutput.vectorgen"
    flags = [t["flags"] for g in load(TRANSACTIONS_FILE)["testGroups"] for t in g["tests"]]
    assert ["Captured", "NoPrimaryKey"] in flags


def test_the_capture_holds_every_protocol_version_1_message() -> None:
    captured = next(g for g in load()["testGroups"] if g["type"] == "Captured")["tests"]
    inner = {t["decoded"]["data"]["type"] for t in captured if t["decoded"]["type"] == "XLogData"}
    assert inner == {"Begin", "Commit", "Origin", "Relation", "TypeInfo", "Insert", "Update", "Delete", "Truncate",
                     "LogicalMessage"}
    assert {t["decoded"]["type"] for t in captured} == {"XLogData", "PrimaryKeepalive"}
    column_kinds = {c["kind"] for t in captured if t["decoded"]["type"] == "XLogData"
                    for part in ("new", "old") for c in t["decoded"]["data"].get(part) or []}
    assert column_kinds == {"n", "u", "t"}


def test_vectors_command_reports_all_passed() -> None:
    out = subprocess.run([sys.executable, "-m", "conformance", "vectors", "--suite", "pgoutput"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    total = load()["numberOfTests"] + load(TRANSACTIONS_FILE)["numberOfTests"]
    assert f"vectors: {total} passed, 0 failed" in out.stdout


def test_generated_spec_has_every_message_type_and_error() -> None:
    from spec.docs import pgoutput as pgoutput_doc
    from spec.pgoutput import errors, layouts

    text = pgoutput_doc.render()
    assert all(f"Byte1('{tag.value.decode()}')" in text for tag in (*layouts.PgOutputTag, *layouts.ReplicationTag))
    conditions = {cls.condition for cls in errors.PgOutputError.__subclasses__()}
    assert conditions and all(f"`{condition}`" in text for condition in conditions)
    assert "| 1184 | timestamp with time zone | timestamp[us, tz=UTC] |" in text
