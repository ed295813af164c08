"""Golden vectors: well-formed, checked by the reference, and the trace CLI prints them exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conformance.sync.vector_suite import VECTOR_DIR, check_vectors, load_vectors
from spec.sync.errors import CommandDecodeError
from spec.sync.messages import SyncCommand, decode_command, decode_descriptor_cmd

FILES = ("traces.json", "messages.json", "schema.json", "squash.json", "walks.json", "inputs.json", "machine_walks.json")


@pytest.mark.parametrize("name", FILES)
def test_vector_file_matches_its_schema(name: str) -> None:
    doc = load_vectors(name)
    jsonschema.validate(doc, json.loads((VECTOR_DIR / doc["schema"]).read_text()))


def test_every_vector_passes_against_the_reference() -> None:
    results = list(check_vectors("reference"))
    assert {r.group for r in results} == {"sync/traces", "sync/messages", "sync/schema", "sync/squash",
                                          "sync/walks", "sync/inputs", "sync/machine-walks"}
    assert [r for r in results if not r.passed] == []


def test_trace_cli_prints_the_worked_example(tmp_path: Path) -> None:
    doc = load_vectors("traces.json")
    example = next(t for g in doc["testGroups"] for t in g["tests"] if "WorkedExample" in t["flags"])
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"ops": example["ops"]}))
    out = subprocess.run([sys.executable, "-m", "conformance", "sync-trace", str(trace)],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines == example["expected"]
    assert [line["durable"]["origin-A"] for line in lines[-3:]] == [None, 1, 3]


def test_trace_cli_rejects_a_malformed_trace(tmp_path: Path) -> None:
    trace = tmp_path / "bad.json"
    trace.write_text(json.dumps({"ops": [{"op": "jump"}]}))
    out = subprocess.run([sys.executable, "-m", "conformance", "sync-trace", str(trace)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown op" in out.stderr


def test_command_round_trips_through_the_any_wrapper() -> None:
    cmd = SyncCommand(path="a/b", origin="pg", sequence_number=2**64 - 1)
    assert decode_descriptor_cmd(cmd.to_descriptor_cmd()) == cmd
    assert decode_command(cmd.encode()) == cmd


def test_undecodable_and_foreign_commands_are_typed_errors() -> None:
    with pytest.raises(CommandDecodeError, match="Couldn't decode command"):
        decode_command(b"\x0a\xff")
    from google.protobuf import any_pb2

    foreign = any_pb2.Any(type_url="type.googleapis.com/Other", value=b"").SerializeToString()
    with pytest.raises(CommandDecodeError, match="Unsupported command type_url"):
        decode_descriptor_cmd(foreign)
