"""Deletion-vector golden vectors checked against ``spec.delta.deletion_vectors`` (``--target reference``).

The bytes are Delta's own format, so the same file serves any Delta reader or writer; the
independent checks (pyroaring, deltalake) live in ``tests/sync/test_delta_dv_vectors.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conformance.framework import VectorResult
from spec.delta.deletion_vectors import (
    DeletionVectorDescriptor,
    DeletionVectorError,
    decode_positions,
    dv_file,
    encode_positions,
    read_dv_entry,
    read_dv_file,
    z85_decode,
    z85_encode,
)

VECTOR_FILE = Path(__file__).resolve().parent / "vectors" / "deletion_vectors.json"


def load_vectors() -> dict[str, Any]:
    """The vector file, with its id and count bookkeeping checked."""
    doc: dict[str, Any] = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))
    ids = [t["tcId"] for g in doc["testGroups"] for t in g["tests"]]
    if ids != list(range(1, len(ids) + 1)) or doc["numberOfTests"] != len(ids):
        raise ValueError(f"{VECTOR_FILE.name}: tcIds must run 1..numberOfTests")
    return doc


def positions_of(ranges: list[list[str]]) -> list[int]:
    """The row positions of a vector's inclusive ``[first, last]`` ranges."""
    return [p for first, last in ranges for p in range(int(first), int(last) + 1)]


def _bitmap(t: dict[str, Any]) -> tuple[bool, str]:
    data = bytes.fromhex(t["hex"])
    if t["result"] == "invalid":
        try:
            got = decode_positions(data)
        except DeletionVectorError as exc:
            return True, str(exc)
        return False, f"decoded {len(got)} positions from malformed bytes"
    want = positions_of(t["positions"])
    decoded = decode_positions(data).tolist() == want
    # This writer emits array and bitmap containers only; run containers are read, not written.
    encoded = "RunContainer" in t["flags"] or encode_positions(want) == data
    return decoded and encoded, f"decodes to the positions: {decoded}; encodes to the hex: {encoded}"


def _file(t: dict[str, Any]) -> tuple[bool, str]:
    data = bytes.fromhex(t["hex"])
    if t["result"] == "invalid":
        try:
            read_dv_file(data)
        except DeletionVectorError as exc:
            return True, str(exc)
        return False, "malformed file read without error"
    dvs = [positions_of(d) for d in t["dvs"]]
    built, offsets = dv_file([encode_positions(d) for d in dvs])
    read = [decode_positions(read_dv_entry(data[o:], len(encode_positions(d)))).tolist()
            for o, d in zip(t["offsets"], dvs)]
    whole = [decode_positions(b).tolist() for b in read_dv_file(data)]
    ok = built == data and offsets == t["offsets"] and read == dvs == whole
    return ok, f"built {built.hex()} at {offsets}; read back {read}"


def _descriptor(t: dict[str, Any]) -> tuple[bool, str]:
    d = DeletionVectorDescriptor.from_json(t["descriptor"])
    path = d.relative_path() if d.storage_type == "u" else None
    positions = decode_positions(d.inline_data()).tolist() if d.storage_type == "i" else None
    want_positions = None if t["positions"] is None else positions_of(t["positions"])
    ok = (d.to_json() == t["descriptor"] and d.unique_id == t["uniqueId"] and path == t["relativePath"]
          and positions == want_positions)
    return ok, f"uniqueId {d.unique_id!r}, path {path!r}, positions {positions}"


def _z85(t: dict[str, Any]) -> tuple[bool, str]:
    if t["result"] == "invalid":
        try:
            z85_decode(t["text"])
        except DeletionVectorError as exc:
            return True, str(exc)
        return False, "decoded malformed Z85"
    data = bytes.fromhex(t["hex"])
    return z85_encode(data) == t["text"] and z85_decode(t["text"]) == data, f"encoded {z85_encode(data)!r}"


CHECKS: dict[str, Callable[[dict[str, Any]], tuple[bool, str]]] = {
    "RoaringBitmapArray": _bitmap, "DeletionVectorFile": _file, "DeletionVectorDescriptor": _descriptor, "Z85": _z85,
}


def check_vectors(target: str) -> Iterator[VectorResult]:
    """Check every deletion-vector vector against ``target`` (``reference`` only: these are library formats)."""
    if target != "reference":
        raise ValueError(f"unknown target {target!r} (the deletion-vector vectors check the reference only)")
    for group in load_vectors()["testGroups"]:
        for t in group["tests"]:
            try:
                ok, detail = CHECKS[group["type"]](t)
            except (DeletionVectorError, ValueError, KeyError) as exc:
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            yield VectorResult(f"delta/{group['type']}", f"tcId {t['tcId']}", ok, detail)
