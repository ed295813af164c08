"""Golden vectors of the data-sync protocol (``python -m conformance vectors --suite sync``).

``--target reference`` checks all seven files (traces, messages, sync schema, squash, walks, inputs, machine walks)
against the spec code (the walks on the reference target in this process, the inputs on the sans-IO runner).  ``--target exec:CMD`` checks trace vectors against another
implementation: CMD is run with a trace file appended and must print the lines of
``python -m conformance sync-trace`` (the other files exercise library functions
that have no command-line form, so an exec target is judged on traces alone).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from conformance.framework import VectorResult
from conformance.sync.trace import replay
from spec.sync.errors import SyncError
from spec.sync.messages import (
    ColumnDescriptor,
    StorageLocation,
    SyncCommand,
    SyncResponse,
    decode_command,
    decode_descriptor_cmd,
    decode_response,
)
from spec.sync.schema import SyncSchema
from spec.sync.squash import apply_squashed, squash

VECTOR_DIR = Path(__file__).resolve().parent / "vectors"
EXEC_TIMEOUT_S = 30.0


def load_vectors(name: str) -> dict[str, Any]:
    """One vector file, with its id and count bookkeeping checked."""
    doc: dict[str, Any] = json.loads((VECTOR_DIR / name).read_text(encoding="utf-8"))
    ids = [t["tcId"] for g in doc["testGroups"] for t in g["tests"]]
    if ids != list(range(1, len(ids) + 1)) or doc["numberOfTests"] != len(ids):
        raise ValueError(f"{name}: tcIds must run 1..numberOfTests")
    return doc


def _tests(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for group in doc["testGroups"]:
        yield from group["tests"]


def _u64(v: str | None) -> int | None:
    return None if v is None else int(v)


def _message_check(t: dict[str, Any]) -> tuple[bool, str]:
    f, kind, want = t["fields"], t["message"], t["hex"]
    if kind == "DataSyncResponse":
        resp = SyncResponse(accepted=f["accepted"], memory_sequence_number=_u64(f["memory_sequence_number"]),
                            durable_sequence_number=_u64(f["durable_sequence_number"]), first=f["first"])
        got, back = resp.encode().hex(), decode_response(bytes.fromhex(want)) == resp
    else:
        inner = f if kind == "DataSyncCommand" else None
        if inner is None:
            cmd = decode_command(bytes.fromhex(f["command_hex"]))
            got, back = cmd.to_descriptor_cmd().hex(), decode_descriptor_cmd(bytes.fromhex(want)) == cmd
        else:
            store = inner["store"]
            cmd = SyncCommand(
                path=inner["path"],
                origin=inner["origin"],
                column_descriptors=tuple(ColumnDescriptor(role=r, name=n) for r, n in inner["column_descriptors"]),
                sequence_number=_u64(inner["sequence_number"]),
                store=None if store is None else StorageLocation(location=store["location"], options=store["options"],
                                                                 name=store["name"]),
                format=inner["format"],
                truncate=inner.get("truncate", False),
            )
            got, back = cmd.encode().hex(), decode_command(bytes.fromhex(want)) == cmd
    return got == want and back, f"encoded {got}, expected {want}; decodes back: {back}"


def _schema_of(fields: list[list[Any]]) -> pa.Schema:
    return pa.schema([pa.field(n, pa.type_for_alias(t), nullable) for n, t, nullable in fields])


def _schema_check(t: dict[str, Any]) -> tuple[bool, str]:
    try:
        SyncSchema.validate([ColumnDescriptor(role=r, name=n) for r, n in t["descriptors"]], _schema_of(t["fields"]))
        got = None
    except SyncError as exc:
        got = exc.message
    return got == t["error"], f"error {got!r}, expected {t['error']!r}"


def _squash_checker(doc: dict[str, Any]) -> Callable[[dict[str, Any]], tuple[bool, str]]:
    arrow = _schema_of(doc["fields"])
    schema = SyncSchema.validate([ColumnDescriptor(role=r, name=n) for r, n in doc["descriptors"]], arrow)
    table_schema = schema.table_schema()

    def check(t: dict[str, Any]) -> tuple[bool, str]:
        changes = pa.Table.from_pylist([dict(zip(arrow.names, r)) for r in t["changes"]], schema=arrow)
        stored = pa.Table.from_pylist([dict(zip(table_schema.names, r)) for r in t["stored"]], schema=table_schema)
        squashed = squash(changes, schema)
        got_sq = [list(r.values()) for r in squashed.to_pylist()]
        got = sorted(([list(r.values()) for r in apply_squashed(stored, squashed, schema).to_pylist()]), key=repr)
        ok = got_sq == t["squashed"] and got == sorted(t["result"], key=repr)
        return ok, f"squashed {got_sq} applied {got}; expected {t['squashed']} and {t['result']}"

    return check


def _walk_check(t: dict[str, Any]) -> tuple[bool, str]:
    from conformance.sync.walks import run_in_process

    got = run_in_process(t)
    return got == t["expected"], f"answers {got}"


def _input_check(t: dict[str, Any]) -> tuple[bool, str]:
    from conformance.sync.inputs import run_sans_io

    got = run_sans_io(t["request"])
    return got == t["expected"], f"answer {got}"


def _machine_walk_check(t: dict[str, Any]) -> tuple[bool, str]:
    from conformance.sync.machine_walks import run_walk, walk_of

    got = run_walk(walk_of(t))
    return got == t["answer"], f"answers {got}"


def _exec_trace(command: str, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"ops": ops}, fh)
    try:
        proc = subprocess.run(
            shlex.split(command) + [fh.name], capture_output=True, text=True, timeout=EXEC_TIMEOUT_S, check=False
        )
    finally:
        Path(fh.name).unlink()
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def check_vectors(target: str) -> Iterator[VectorResult]:
    """Check every sync vector against ``target`` (``reference`` or ``exec:CMD``)."""
    if target == "reference":
        trace_lines: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda ops: list(replay(ops))
    elif target.startswith("exec:"):
        command = target[len("exec:"):]
        trace_lines = lambda ops: _exec_trace(command, ops)
    else:
        raise ValueError(f"unknown target {target!r} (use reference or exec:CMD)")
    for t in _tests(load_vectors("traces.json")):
        got = trace_lines(t["ops"])
        yield VectorResult("sync/traces", f"tcId {t['tcId']}", got == t["expected"], f"got {got}")
    if target != "reference":
        return
    checks: list[tuple[str, Callable[[dict[str, Any]], tuple[bool, str]], dict[str, Any]]] = []
    squash_doc = load_vectors("squash.json")
    checks.append(("sync/messages", _message_check, load_vectors("messages.json")))
    checks.append(("sync/schema", _schema_check, load_vectors("schema.json")))
    checks.append(("sync/squash", _squash_checker(squash_doc), squash_doc))
    checks.append(("sync/walks", _walk_check, load_vectors("walks.json")))
    checks.append(("sync/inputs", _input_check, load_vectors("inputs.json")))
    checks.append(("sync/machine-walks", _machine_walk_check, load_vectors("machine_walks.json")))
    for group, check, doc in checks:
        for t in _tests(doc):
            try:
                ok, detail = check(t)
            except (SyncError, ValueError, KeyError, pa.ArrowException) as exc:
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            yield VectorResult(group, f"tcId {t['tcId']}", ok, detail)
