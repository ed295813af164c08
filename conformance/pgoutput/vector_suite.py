"""Golden vectors of pgoutput and the replication stream (``python -m conformance vectors --suite pgoutput``).

``stream.json`` holds CopyData payloads captured from a real Postgres 15 replication connection
(``python -m conformance.pgoutput.vectorgen --capture`` records them) with what they decode to, status
updates with their bytes, and malformed payloads with the error they must raise.
``transactions.json`` (derived from it) holds each captured transaction's messages and the sync
changes they become (:func:`transactions_json`), or the error that stops the stream. Decoded
messages are written by :func:`message_json`: the message's type and fields, every integer as a
decimal string (LSNs and timestamps are 64-bit), bytes as hex, a tuple column as its kind and,
for a text value, its text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any, Final

from conformance.framework import VectorResult
from spec.pgoutput.changes import TablePut
from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.messages import (
    StandbyStatusUpdate,
    TupleValue,
    XLogData,
    decode_pgoutput,
    decode_replication,
)
from spec.pgoutput.transactions import TransactionAssembler

VECTOR_DIR: Final = Path(__file__).resolve().parent / "vectors"
STREAM_FILE: Final = VECTOR_DIR / "stream.json"
TRANSACTIONS_FILE: Final = VECTOR_DIR / "transactions.json"


def message_json(message: object) -> Any:
    """The vectors' JSON form of a decoded message (see the module docstring)."""
    if isinstance(message, TupleValue):
        kind = message.kind.value.decode()
        if message.value is None:
            return {"kind": kind}
        if kind == "t":
            return {"kind": kind, "text": message.value.decode("utf-8", "backslashreplace")}
        return {"kind": kind, "hex": message.value.hex()}
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        out: dict[str, Any] = {"type": type(message).__name__}
        for f in dataclasses.fields(message):
            out[f.name] = message_json(getattr(message, f.name))
        return out
    if isinstance(message, bool) or message is None or isinstance(message, str):
        return message
    if isinstance(message, int):
        return str(message)
    if isinstance(message, bytes):
        return message.hex()
    if isinstance(message, Enum):
        return message_json(message.value)
    if isinstance(message, tuple):
        return [message_json(m) for m in message]
    raise TypeError(f"no JSON form for {type(message).__name__}")


def decoded_json(payload: bytes) -> dict[str, Any]:
    """A CopyData payload decoded, an XLogData's pgoutput message inside it included."""
    message = decode_replication(payload)
    out: dict[str, Any] = message_json(message)
    if isinstance(message, XLogData):
        out["data"] = message_json(decode_pgoutput(message.data))
    return out


def value_json(value: object) -> Any:
    """A column value in the transaction vectors: null, a boolean, or text (decimal integers and
    numerics, ISO dates and times, ``\\x``-hex bytes, floats as Python's repr)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return repr(value) if isinstance(value, float) else str(value)


def transactions_json(messages: list[bytes], primary_keys: dict[str, list[str]]) -> dict[str, Any]:
    """Feed pgoutput messages to the assembler: the transactions (commit LSN, per table its sync
    descriptors and rows in batch column order) or, if it stops, the error too."""
    machine = TransactionAssembler(
        primary_key=lambda rel: tuple(primary_keys.get(f"{rel.namespace}/{rel.name}", ())))
    out: dict[str, Any] = {"transactions": []}
    try:
        for data in messages:
            tx = machine.feed_data(data)
            if tx is None:
                continue
            tables = {}
            for path, changes in tx.changes.items():
                image = tx.tables[path]
                put = TablePut.of(changes)
                truncate, batch = put.truncate, put.batch()
                tables[path] = {"descriptors": [[d.role, d.name] for d in image.descriptors()],
                                "columns": [f"{f.name}: {f.type}" for f in batch.schema],
                                "rows": [[value_json(v) for v in row.values()] for row in batch.to_pylist()],
                                **({"truncate": True} if truncate else {})}
            out["transactions"].append({"commit_lsn": str(tx.commit_lsn), "tables": tables})
    except PgOutputError as exc:
        out["error"] = {"condition": exc.condition, "message": exc.message}
    return out


def load(path: Path = STREAM_FILE) -> dict[str, Any]:
    """A vector file, with its id and count bookkeeping checked."""
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    ids = [t["tcId"] for g in doc["testGroups"] for t in g["tests"]]
    if ids != list(range(1, len(ids) + 1)) or doc["numberOfTests"] != len(ids):
        raise ValueError(f"{path.name}: tcIds must run 1..numberOfTests")
    return doc


def check_test(group: str, test: dict[str, Any]) -> tuple[bool, str]:
    """One vector against the spec's decoder (and encoder, for status updates)."""
    payload = bytes.fromhex(test["hex"])
    if group == "Malformed":
        try:
            got = decoded_json(payload)
        except PgOutputError as exc:
            ok = exc.condition == test["error"] and exc.message == test["message"]
            return ok, f"raised {exc.condition}: {exc.message}; expected {test['error']}: {test['message']}"
        return False, f"decoded to {got}; expected {test['error']}"
    got = decoded_json(payload)
    if group == "StandbyStatusUpdate":
        f = test["decoded"]
        built = StandbyStatusUpdate(int(f["written_lsn"]), int(f["flushed_lsn"]), int(f["applied_lsn"]),
                                    int(f["client_time"]), f["reply_requested"]).encode().hex()
        return got == f and built == test["hex"], f"decoded {got}, built {built}"
    return got == test["decoded"], f"decoded {got}; expected {test['decoded']}"


def check_transaction(test: dict[str, Any]) -> tuple[bool, str]:
    """One transaction vector against the spec's assembler."""
    got = transactions_json([bytes.fromhex(h) for h in test["messages"]], test["primaryKeys"])
    return got == test["expected"], f"got {got}; expected {test['expected']}"


def check_vectors(target: str) -> Iterator[VectorResult]:
    """Every pgoutput vector; only the spec's decoder is a target (a decoder has no wire to test over)."""
    for group in [*load()["testGroups"], *load(TRANSACTIONS_FILE)["testGroups"]]:
        for test in group["tests"]:
            name = f"tc{test['tcId']} {test['comment']}"
            if target != "reference":
                yield VectorResult(group["type"], name, False, "only --target reference decodes pgoutput",
                                   unsupported=True)
                continue
            ok, detail = check_transaction(test) if group["type"] == "Transactions" else check_test(group["type"], test)
            yield VectorResult(group["type"], name, ok, detail)
