"""The sync input corpus (issue 43): single DoPut requests kept by the mutants (every family) of the decode and validate
rules.

A request is one put a Flight client can send the suite's target: its command's fields (table path, origin,
sequence number, column descriptors, format, truncate, store location, the ``Any``'s type URL, or raw command
bytes) and its columns (name, Arrow type, values; split over two record batches or not), and the put that stored
its table first, if any (``stored``: another origin's, its answer left out). Its answer is plain
JSON: the response's numbers and, when a table was written, the table's rows after the flush the target makes
at once; or the refusal's condition and one-line text. Store locations are written ``{root}/...`` and answered
under ``{root}``, the target's store. Float values are written as text (``"NaN"``, ``"-0.0"``), so a key
``-0.0`` and ``0.0`` stay two answers.

:func:`candidates` generates the requests from a seed, biased as a tester would: every rule of the command,
its table name, its store location, its column descriptors (``spec.sync.schema``) and what a table can store
(``spec.sync.admission``'s ``admit_schema`` and ``admit_rows``) at its smallest violating input and its nearest
valid one; every pair of them at once (which refusal wins); each against every kind of request (a probe, a
closing put without rows, a put with rows, a truncating put with and without rows: a rule holds for the kinds
it names and not the others); sizes at their bound, one past, 0 and the max; equal values in canonical and
other forms. ``python -m conformance.sync.inputs select`` runs :func:`conformance.operator_mutants.select`
over every candidate and :data:`MODULES`' mutants on the sans-IO runner (:mod:`conformance.sync.input_runner`,
the reference server's steps for one put) and writes ``vectors/inputs.json`` and ``docs/walks/sync-inputs.md``;
the suite's ``inputs/`` cases replay the kept requests through the target (:func:`live_answer`).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import itertools
import json
import logging
import math
import random
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf import any_pb2

from conformance import vectorgen
from conformance.corpus_record import Rule, told_apart_elsewhere, told_apart_in_file
from conformance.framework import CaseContext, Verdict
from conformance.operator_mutants import judgement, rule_of, score
from spec.sync.confinement import MAX_NAME_BYTES, MAX_SEGMENT_BYTES, table_name
from spec.sync.errors import CONDITION_PATTERN, InvalidTablePath
from spec.sync.messages import COMMAND_TYPE_URL, ColumnDescriptor, StorageLocation, SyncCommand, decode_response

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

SEED: Final = 4343
MODULES: Final = ("spec.sync.messages", "spec.sync.schema", "spec.sync.flight", "spec.sync.confinement",
                  "spec.sync.admission")
"""The spec modules whose rules one request reaches; of ``spec.sync.admission`` only :data:`FUNCTIONS`."""
FUNCTIONS: Final = {"spec.sync.admission": ("name_problem", "admit_schema", "_type_problem", "_signed_max",
                                            "admit_rows", "admit_put", "fits_watermark")}
"""Where a module's mutants are limited to some functions: the rest (put slots, streams, the memory budget) are
stateful, the sync walk corpus's (``conformance.sync.walks``)."""
PREFIXES: Final = ("spec.", "reference.sync", "conformance.sync.reference_target", "conformance.sync.clock",
                   "conformance.sync.input_runner")
"""What a mutant's run imports afresh: the server's side. This module (the client: the request's bytes, the
response's decoding) stays as first imported, so the judge of a mutant is unmutated, as with an ``exec:`` target."""
VECTOR_FILE: Final = Path(__file__).resolve().parent / "vectors" / "inputs.json"
REPORT_FILE: Final = Path(__file__).resolve().parents[2] / "docs" / "walks" / "sync-inputs.md"
ROOT: Final = "{root}"
U64_MAX: Final = 2**64 - 1

Request = dict[str, Any]


# -- the request on the wire (the client's side) ------------------------------------------------------------------

_NESTED_TYPES: Final = {"struct": pa.struct([("a", pa.int64()), ("b", pa.int64())]), "list": pa.list_(pa.int64()),
                        "map": pa.map_(pa.string(), pa.int64()), "large_list": pa.large_list(pa.int64()),
                        "fixed_size_list": pa.list_(pa.int64(), 1),
                        "union": pa.sparse_union([pa.field("a", pa.int64())])}
"""The nested kinds a request names: one of each kind ``spec.sync.admission`` refuses (its ``_NESTED``) but a
dictionary's, whose values a Flight client sends as a dictionary message, refused before any schema rule
(``conformance.sync.input_runner``, as the reference server reads a put)."""


def _arrow_type(kind: str) -> pa.DataType:
    return _NESTED_TYPES[kind] if kind in _NESTED_TYPES else pa.type_for_alias(kind)


def _array(values: list[Any], kind: str) -> pa.Array:
    """``values`` as an array of ``kind`` (a union's from its one child: pyarrow builds none from Python values)."""
    if kind == "union":
        return pa.UnionArray.from_sparse(pa.array([0] * len(values), pa.int8()), [pa.array(values, pa.int64())], ["a"])
    return pa.array(values, _arrow_type(kind))


def batches(request: Request) -> list[pa.RecordBatch]:
    """The request's record batches: none without rows, else one, or two split before row ``split``."""
    columns: list[list[Any]] = _from_json(request).get("columns", [])
    table = pa.table({name: _array(values, kind) for name, kind, values in columns})
    if table.num_rows == 0:
        return []
    split = request.get("split")
    parts = [table] if split is None else [table.slice(0, split), table.slice(split)]
    return [pa.RecordBatch.from_struct_array(part.to_struct_array().combine_chunks()) if part.num_rows else
            pa.RecordBatch.from_pylist([], schema=table.schema) for part in parts]


def arrow_schema(request: Request) -> pa.Schema:
    columns: list[list[Any]] = request.get("columns", [])
    return pa.schema([pa.field(name, _arrow_type(kind)) for name, kind, _ in columns])


def command_bytes(request: Request, root: str) -> bytes:
    """The descriptor's ``cmd``: the command in an ``Any`` of the request's type URL, or the request's raw bytes."""
    if "cmdHex" in request:
        return bytes.fromhex(request["cmdHex"])
    store = request.get("store")
    command = SyncCommand(
        path=request["path"], origin=request["origin"], sequence_number=request.get("seq"),
        column_descriptors=tuple(ColumnDescriptor(role=r, name=n) for r, n in request.get("descriptors", [])),
        format=request.get("format", 0), truncate=request.get("truncate", False),
        store=None if store is None else StorageLocation(location=store.replace(ROOT, root),
                                                         options=request.get("storeOptions", {}), name="inputs"))
    return any_pb2.Any(type_url=request.get("typeUrl", COMMAND_TYPE_URL),
                       value=command.encode()).SerializeToString(deterministic=True)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data if data else b""


def flight_messages(request: Request, root: str) -> list[bytes]:
    """The ``FlightData`` messages a Flight client sends for the request: the descriptor with the schema, then
    each record batch (encoded here, apart from ``spec.sync.flight``, as a client's library does)."""
    descriptor = b"\x08\x02" + _field(2, command_bytes(request, root))  # type CMD, cmd
    sent = batches(request)  # the stream's schema is its first batch's, as a client's put (suite.do_put) sends it
    schema = pa.ipc.read_message((sent[0].schema if sent else arrow_schema(request)).serialize())
    out = [_field(1, descriptor) + _field(2, schema.metadata.to_pybytes())]
    for batch in sent:
        message = pa.ipc.read_message(batch.serialize())
        out.append(_field(2, message.metadata.to_pybytes()) + _field(1000, message.body.to_pybytes()))
    return out


def client_wires(requests: Sequence[Request], root: str) -> list[list[bytes]]:
    """The ``FlightData`` messages pyarrow's Flight client sends for each request, as a server receives them (its
    headers are not those of :func:`flight_messages` in every byte: a schema's IPC header goes unpadded), caught by
    the reference transport on a loopback port with a handler that keeps nothing."""
    import reference.sync.transport as transport
    from conformance.sync.suite import do_put
    from reference.sync.clock import MonotonicClock
    from reference.sync.credentials import ServerSecurity
    from spec.sync.admission import PutLimits
    from spec.sync.messages import MAX_MESSAGE_BYTES

    caught: list[bytes] = []
    decode: Callable[[bytes], Any] = getattr(transport, "decode_flight_data")  # noqa: B009 - patched below

    def catch(raw: bytes) -> Any:
        caught.append(bytes(raw))
        return decode(raw)

    def drain(messages: Any, claim: Callable[[], bool]) -> bytes:
        for _ in messages:
            pass
        return b""

    limits = PutLimits(MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES, 4, 60.0, 60.0, 8, 60.0, 60.0, 4)
    server = transport.FlightPutTransport(drain, host="127.0.0.1", port=0, limits=limits, security=ServerSecurity(),
                                          clock=MonotonicClock())
    setattr(transport, "decode_flight_data", catch)  # noqa: B010 - the transport's decoder sees the raw bytes first
    wires = []
    try:
        for request in requests:
            caught.clear()
            do_put(f"grpc://127.0.0.1:{server.port}", command_bytes(request, root),
                   batches(request) or [arrow_schema(request).empty_table()], timeout=60.0)
            wires.append(list(caught))
    finally:
        setattr(transport, "decode_flight_data", decode)  # noqa: B010
        server.stop(0)
    return wires


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value)  # -0.0 and 0.0 are two answers; NaN is one
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def rows_of(rows: list[dict[str, Any]]) -> list[list[list[Any]]]:
    return sorted(([[k, _plain(row[k])] for k in sorted(row)] for row in rows), key=repr)


def decoded(raw: dict[str, Any], root: str) -> dict[str, Any]:
    """The plain answer of the runner's raw one: the response decoded by the client, tables under ``{root}``."""
    if "error" in raw:
        return {"error": raw["error"], "message": raw["message"].replace(root, ROOT)}
    r = decode_response(bytes.fromhex(raw["response"]))
    out: dict[str, Any] = {"accepted": r.accepted, "memory": r.memory_sequence_number,
                           "durable": r.durable_sequence_number}
    if "tables" in raw:
        out["tables"] = {uri.replace(root, ROOT): rows_of(rows) for uri, rows in sorted(raw["tables"].items())}
    return out


def run_sans_io(request: Request) -> dict[str, Any]:
    """The request's answer on the spec, as the selection computes it (:mod:`conformance.sync.input_runner`)."""
    from conformance.sync.input_runner import STORE_ROOT, raw_answer

    stored = request.get("stored")
    return decoded(raw_answer(flight_messages(request, STORE_ROOT),
                              None if stored is None else flight_messages(stored, STORE_ROOT)), STORE_ROOT)


def _runner_loader() -> Callable[[], Callable[[Any], Any]]:
    """``select``'s loader: the server's side imported afresh, the client's (this module's) as it is."""
    import importlib

    def load() -> Callable[[Any], Any]:
        runner = importlib.import_module("conformance.sync.input_runner")
        return lambda item: decoded(runner.raw_answer(item["wire"], item["stored"]), runner.STORE_ROOT)

    return load


# -- the request through a live target ---------------------------------------------------------------------------

def _flight_error(error: Exception) -> tuple[str, str]:
    """The condition and one-line text a Flight error carries (``spec.sync.errors.wire_text``)."""
    text = str(error).split("with message: ", 1)[-1]
    text = text.split(". gRPC client debug context", 1)[0].split(". Detail:", 1)[0]
    found = CONDITION_PATTERN.findall(text)
    message = CONDITION_PATTERN.sub("", text).rstrip()
    internal = isinstance(error, flight.FlightInternalError)
    return (found[-1] if found else "INTERNAL" if internal else type(error).__name__), message


def requires(request: Request) -> frozenset[str]:
    """The capabilities replaying the request needs beyond ``store`` (the rows of a table it wrote are read)."""
    needed = {"store"}
    if request.get("truncate"):
        needed.add("truncate")
    if request.get("store") is not None:
        needed.add("store-locations")
    return frozenset(needed)


def _written(request: Request, root: str) -> str | None:
    """Where the request's table lands if the put is taken (None: it writes no table)."""
    if not (request.get("truncate") or any(values for _, _, values in request.get("columns", []))):
        return None
    try:
        name = table_name(request["path"])
    except InvalidTablePath:
        return None
    store = request.get("store")
    location = store.replace(ROOT, root).rstrip("/") if store else root
    return f"{location}/{name}"


def live_answer(target: SyncTarget, request: Request, timeout: float) -> dict[str, Any]:
    """The request's answer from a live target (flushing after every put, the suite's default policy)."""
    from conformance.sync.suite import do_put
    from reference.sync.store import read_delta

    root = target.store
    stored = request.get("stored")
    if stored is not None:  # its answer is left out, as the runner leaves it out
        do_put(target.location, command_bytes(stored, root), batches(stored), timeout=timeout, security=target.security)
    outcome = do_put(target.location, command_bytes(request, root), batches(request) or [arrow_schema(
        request).empty_table()], timeout=timeout, security=target.security)
    if outcome.response is None:
        condition, message = _flight_error(outcome.error or RuntimeError("no answer"))
        return {"error": condition, "message": message.replace(root, ROOT)}
    r = outcome.response
    out: dict[str, Any] = {"accepted": r.accepted, "memory": r.memory_sequence_number,
                           "durable": r.durable_sequence_number}
    uri = _written(request, root)
    if r.accepted and uri is not None and request.get("seq") is None and "cmdHex" not in request:
        close = SyncCommand(path="inputs/closing", origin=request["origin"], sequence_number=U64_MAX)
        do_put(target.location, close.to_descriptor_cmd(), [], timeout=timeout, security=target.security)
        # the transaction it opened is closed, so the next request starts from no open transaction, as on the spec
    if r.accepted and uri is not None:
        try:
            rows: list[dict[str, Any]] | None = read_delta(uri).to_pylist()
        except Exception:  # noqa: BLE001 - no table where the spec writes one is an answer
            rows = None
        out["tables"] = {uri.replace(root, ROOT): None if rows is None else rows_of(rows)}
    return out


# -- generating requests -----------------------------------------------------------------------------------------

OLD, NEW, CHANGED, VALUE = 0, 1, 2, 3
KINDS: Final = ("rows", "probe", "close", "truncate-empty", "truncate-rows")
"""Every kind of request a rule may be tried on: a put with rows, a probe (no rows, no sequence number), a closing
put (no rows, a sequence number), a truncating put without and with rows."""


def _base(tag: str, kind: str) -> Request:
    columns: list[list[Any]] = [["old_id", "int64", [None]], ["new_id", "int64", [1]], ["v", "string", ["a"]]]
    request: Request = {"path": f"inputs/{tag}", "origin": f"o-{tag}", "seq": 1,
                        "descriptors": [[OLD, "id"], [NEW, "id"], [VALUE, "v"]], "columns": columns}
    if kind in ("probe", "close", "truncate-empty"):
        request["columns"] = [[n, k, []] for n, k, _ in columns]
    if kind == "probe":
        request["seq"] = None
    if kind.startswith("truncate"):
        request["truncate"] = True
    return request


Fault = Callable[[Request], None]


def _column(name: str, kind: str, values: list[Any], role: int = VALUE, logical: str | None = None) -> Fault:
    """One more column (batch name ``name``, descriptor ``logical``, even empty, else ``name``)."""
    def add(r: Request) -> None:
        rows = len(r["columns"][0][2])
        taken = {c[0] for c in r["columns"]}
        batch_name = name + "_" * next(i for i in itertools.count() if name + "_" * i not in taken)
        r["columns"].append([batch_name, kind, (values * rows)[:rows] if rows else []])
        r["descriptors"].append([role, name if logical is None else logical])
    return add


def _key_type(kind: str, old: Any, new: Any) -> Fault:
    def change(r: Request) -> None:
        rows = len(r["columns"][0][2])
        r["columns"][0] = ["old_id", kind, [old] * rows]
        r["columns"][1] = ["new_id", kind, [new] * rows]
    return change


def _set(**fields: Any) -> Fault:
    def change(r: Request) -> None:
        for key, value in fields.items():
            if key == "path" and isinstance(value, str):
                value = value.replace("TAG", r["path"].split("/", 1)[1])
            r[key] = value
    return change


def _descriptor(index: int, role: int | None = None, name: str | None = None) -> Fault:
    def change(r: Request) -> None:
        d = r["descriptors"][index]
        r["descriptors"][index] = [d[0] if role is None else role, d[1] if name is None else name]
    return change


def _drop_descriptor(r: Request) -> None:
    r["descriptors"].pop()


def _extra_descriptor(r: Request) -> None:
    r["descriptors"].append([VALUE, "x"])


def _long_path(segment: int, total: int) -> Fault:
    """A path of ``total`` bytes whose last segment has ``segment`` bytes (after ``inputs/TAG/``)."""
    def change(r: Request) -> None:
        head = r["path"] + "/"
        middle = total - len(head) - segment
        parts = [head.rstrip("/")]
        while middle > 0:
            piece = min(MAX_SEGMENT_BYTES, middle - 1)
            parts.append("m" * max(piece, 1))
            middle -= max(piece, 1) + 1
        parts.append("s" * segment)
        r["path"] = "/".join(parts)
    return change


def _second_key(r: Request, old: Any = None, new: Any = 1, kind: str = "int64") -> None:
    rows = len(r["columns"][0][2])
    r["columns"][1:1] = [["old_k", kind, [old] * rows]]
    r["columns"].append(["new_k", kind, [new] * rows])
    r["descriptors"][1:1] = [[OLD, "k"]]
    r["descriptors"].append([NEW, "k"])


def _partly_null(side: str) -> Fault:
    def change(r: Request) -> None:
        _second_key(r, None if side == "old" else 1, None if side == "new" else 1)
        if side == "old":
            r["columns"][0][2] = [1] * len(r["columns"][0][2])
    return change


def _rows(*keys: Any, kind: str = "int64", values: Sequence[Any] | None = None, old: bool = False) -> Fault:
    """The put's rows replaced: one per key (inserts, or updates with ``old``)."""
    def change(r: Request) -> None:
        if not r["columns"][0][2]:
            return  # a kind without rows stays without rows
        r["columns"][0] = ["old_id", kind, list(keys) if old else [None] * len(keys)]
        r["columns"][1] = ["new_id", kind, list(keys)]
        r["columns"][2] = ["v", "string", list(values) if values is not None else [f"v{i}" for i in range(len(keys))]]
        for column in r["columns"][3:]:
            column[2] = (column[2] * len(keys))[:len(keys)]
    return change


def _split(at: int) -> Fault:
    def change(r: Request) -> None:
        if len(r["columns"][0][2]) > at:
            r["split"] = at
    return change


def _both(*faults: Fault) -> Fault:
    def change(r: Request) -> None:
        for fault in faults:
            fault(r)
    return change


def _changed_before_value(r: Request) -> None:
    r["columns"].insert(2, ["changed_v", "bool", [True] * len(r["columns"][0][2])])
    r["descriptors"].insert(2, [CHANGED, "v"])


def _second_row_partly_null(r: Request) -> None:
    """Two rows, the second's new key null in its last column only (the first row is whole)."""
    if r["columns"][0][2]:
        for column in r["columns"][:-1]:
            column[2] = (column[2] * 2)[:2]
        r["columns"][-1][2] = [1, None]


def faults() -> dict[str, Fault]:
    """Every rule's smallest violating input, its nearest valid one, and equal values in other forms, by name."""
    f: dict[str, Fault] = {
        # the command's bytes and its Any
        "cmd-not-protobuf": _set(cmdHex="ff"),
        "cmd-empty": _set(cmdHex=""),
        "cmd-any-garbage-value": _set(cmdHex=any_pb2.Any(type_url=COMMAND_TYPE_URL, value=b"\xff").SerializeToString().hex()),
        "type-url-empty": _set(typeUrl=""),
        "type-url-other-case": _set(typeUrl="datasynccommand"),
        "type-url-prefixed": _set(typeUrl="type.googleapis.com/clade.sync.DataSyncCommand"),
        "type-url-trailing-space": _set(typeUrl="DataSyncCommand "),
        # the format
        "format-iceberg": _set(format=1), "format-2": _set(format=2), "format-max": _set(format=2**31 - 1),
        "format-negative": _set(format=-1),
        # the sequence number
        "seq-0": _set(seq=0), "seq-max": _set(seq=U64_MAX), "seq-none": _set(seq=None), "seq-2": _set(seq=2),
        # table names
        "path-empty": _set(path=""), "path-dot": _set(path="."), "path-slash": _set(path="/"),
        "path-slashes": _set(path="//"), "path-doubled-slash": _set(path="inputs//TAG/"),
        "path-dot-segment": _set(path="inputs/./TAG"), "path-dotdot": _set(path="inputs/../TAG"),
        "path-dotdot-end": _set(path="inputs/TAG/.."), "path-leading-dotdot": _set(path="../TAG"),
        "path-absolute": _set(path="/inputs/TAG"), "path-url": _set(path="file://inputs/TAG"),
        "path-drive": _set(path="C:TAG"), "path-colon-second": _set(path="a:TAG"),
        "path-colon-third": _set(path="ab:TAG"), "path-backslash": _set(path="inputs\\TAG"),
        "path-nul": _set(path="inputs/TAG\x00"), "path-unit-separator": _set(path="inputs/TAG\x1f"),
        "path-space": _set(path="inputs/TAG x"), "path-del": _set(path="inputs/TAG\x7f"),
        "path-c1": _set(path="inputs/TAG\x85"), "path-tilde": _set(path="inputs/TAG~"),
        "path-underscore": _set(path="inputs/_TAG"), "path-underscore-inner": _set(path="inputs/TAG_x"),
        "path-dash": _set(path="inputs/-TAG"), "path-dot-start": _set(path="inputs/.TAG"),
        "path-percent": _set(path="inputs/%2e%2e/TAG"), "path-unicode": _set(path="inputs/TAGé"),
        "path-fullwidth": _set(path="inputs/TAGａ"), "path-delta-log": _set(path="inputs/TAG/_delta_log"),
        "path-drive-only": _set(path="C:"), "path-colon-only": _set(path=":"), "path-dash-first": _set(path="-TAG"),
        "path-every-character": _set(path="inputs/TAG/abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"),
        # one path with two faults: which of table_name's checks comes first
        "path-control-backslash": _set(path="inputs\\TAG\x01"), "path-backslash-absolute": _set(path="/inputs\\TAG"),
        "path-absolute-dotdot": _set(path="/inputs/../TAG"), "path-dotdot-character": _set(path="inputs/../TAG x"),
        "path-dotdot-empty-rest": _set(path="../"), "path-character-underscore": _set(path="inputs/_TAG x"),
        "path-underscore-long": _set(path="inputs/_" + "s" * MAX_SEGMENT_BYTES),
        "path-character-long": _set(path="inputs/" + "s" * MAX_SEGMENT_BYTES + " "),
        "path-long-segment-long-name": _long_path(MAX_SEGMENT_BYTES + 1, MAX_NAME_BYTES + 1),
        "path-control-absolute": _set(path="/inputs/TAG\x00"), "path-url-dotdot": _set(path="s3://../TAG"),
        "segment-at-bound": _long_path(MAX_SEGMENT_BYTES, 300), "segment-past-bound": _long_path(MAX_SEGMENT_BYTES + 1, 300),
        "name-at-bound": _long_path(10, MAX_NAME_BYTES), "name-past-bound": _long_path(10, MAX_NAME_BYTES + 1),
        "name-at-bound-trailing-slash": _both(_long_path(10, MAX_NAME_BYTES), lambda r: r.update(path=r["path"] + "/")),
        "name-past-bound-by-slashes": _both(_long_path(10, MAX_NAME_BYTES - 1),
                                            lambda r: r.update(path=r["path"].replace("/", "//", 1))),
        # store locations (the target allows {root}/allowed)
        "store-none-empty": _set(store=""), "store-allowed": _set(store=f"{ROOT}/allowed"),
        "store-allowed-slash": _set(store=f"{ROOT}/allowed/"), "store-below": _set(store=f"{ROOT}/allowed/x"),
        "store-beside": _set(store=f"{ROOT}/allowedx"), "store-dotdot": _set(store=f"{ROOT}/allowed/../x"),
        "store-dotdot-end": _set(store=f"{ROOT}/allowed/x/.."), "store-parent": _set(store=ROOT),
        "store-elsewhere": _set(store="/elsewhere"), "store-scheme": _set(store=f"file://{ROOT}/allowed"),
        "store-doubled-slash": _set(store=f"{ROOT}/allowed//x"),
        "store-dotdot-before-scheme": _set(store=f"{ROOT}/allowed/../x://y"),
        "store-scheme-below": _set(store=f"{ROOT}/allowed/x://y"),
        "store-scheme-dotdot-after": _set(store=f"{ROOT}/allowed/x://../y"),
        "store-dot": _set(store=f"{ROOT}/allowed/./x"),
        "store-options": _set(store=f"{ROOT}/allowed", storeOptions={"region": "x", "": ""}),
        # descriptors against the batch (Seafowl's rules)
        "descriptor-missing": _drop_descriptor, "descriptor-extra": _extra_descriptor,
        "role-unknown-4": _descriptor(2, role=4), "role-unknown-max": _descriptor(2, role=2**31 - 1),
        "role-negative": _descriptor(2, role=-1),
        "no-old-key": _descriptor(0, role=VALUE, name="u"), "no-new-key": _descriptor(1, role=VALUE, name="u"),
        "key-names-differ": _descriptor(1, name="jd"), "key-names-case": _descriptor(1, name="ID"),
        "key-types-differ": lambda r: r["columns"].__setitem__(1, ["new_id", "int32", r["columns"][1][2]]),
        "keys-both-int32": _key_type("int32", None, 1),
        "changed-bool": _both(_column("w", "string", ["w"]), _column("changed_v", "bool", [True], CHANGED, "v")),
        "changed-not-bool": _column("changed_v", "int64", [1], CHANGED, "v"),
        "changed-then-unknown-role": _both(_column("changed_z", "bool", [True], CHANGED, "z"),
                                           _column("x", "string", ["x"], 4, "z")),
        "changed-not-bool-names-nothing": _column("changed_z", "int64", [1], CHANGED, "z"),
        "changed-names-key": _column("changed_id", "bool", [True], CHANGED, "id"),
        "changed-names-nothing": _column("changed_z", "bool", [True], CHANGED, "z"),
        "changed-names-changed": _both(_column("changed_v", "bool", [True], CHANGED, "v"),
                                       _column("changed_c", "bool", [True], CHANGED, "c")),
        "changed-before-value": _changed_before_value,
        "struct-one-descriptor": _column("s", "struct", [{"a": 1, "b": 2}]),
        "struct-three-descriptors": _both(_column("s", "struct", [{"a": 1, "b": 2}]), _extra_descriptor,
                                          _extra_descriptor),
        # what a table can store
        "name-empty": _column("x", "string", ["x"], VALUE, ""),
        "name-nul": _column("x", "string", ["x"], VALUE, "a\x00b"),
        "name-unit-separator": _column("x", "string", ["x"], VALUE, "a\x1f"),
        "name-del": _column("x", "string", ["x"], VALUE, "a\x7f"),
        "name-c1": _column("x", "string", ["x"], VALUE, "a\x85"),
        "name-space": _column("x", "string", ["x"], VALUE, "a b"),
        "name-unicode": _column("x", "string", ["x"], VALUE, "é"),
        "name-decomposed": _column("x", "string", ["x"], VALUE, "e\u0301"),
        "value-same-case": _column("x", "string", ["x"], VALUE, "V"),
        "value-same-name": _column("x", "string", ["x"], VALUE, "v"),
        "value-like-key": _column("x", "string", ["x"], VALUE, "ID"),
        "value-named-key": _column("x", "string", ["x"], VALUE, "id"),
        "type-null": _column("x", "null", [None]), "type-list": _column("x", "list", [[1]]),
        "type-map": _column("x", "map", [[("k", 1)]]), "type-binary": _column("x", "binary", [b"\x00"]),
        "type-date": _column("x", "date32", [datetime.date(2026, 1, 1)]),
        "type-large-string": _column("x", "large_string", ["x"]),
        "type-halffloat": _column("x", "halffloat", [1.5]),
        "uint8-at-bound": _column("x", "uint8", [127]), "uint8-past-bound": _column("x", "uint8", [128]),
        "uint8-max": _column("x", "uint8", [255]), "uint8-zero": _column("x", "uint8", [0]),
        "uint16-past-bound": _column("x", "uint16", [2**15]), "uint16-at-bound": _column("x", "uint16", [2**15 - 1]),
        "uint32-past-bound": _column("x", "uint32", [2**31]), "uint64-at-bound": _column("x", "uint64", [2**63 - 1]),
        "uint64-past-bound": _column("x", "uint64", [2**63]), "uint64-max": _column("x", "uint64", [U64_MAX]),
        "uint8-null": _column("x", "uint8", [None]), "int8-min": _column("x", "int8", [-128]),
        "uint-key-past-bound": _key_type("uint8", None, 200), "uint-key-at-bound": _key_type("uint8", None, 127),
        "value-nan": _column("x", "double", ["nan"]), "value-minus-zero": _column("x", "double", ["-0.0"]),
        "key-nan": _key_type("double", None, "nan"), "key-nan-old": _key_type("double", "nan", 1.0),
        "key-minus-zero": _key_type("double", None, "-0.0"), "key-zero": _key_type("double", None, "0.0"),
        "key-minus-zero-float32": _key_type("float", None, "-0.0"), "key-inf": _key_type("double", None, "inf"),
        "key-minus-zero-old": _key_type("double", "-0.0", "-0.0"),
        "partly-null-old": _partly_null("old"), "partly-null-new": _partly_null("new"),
        "two-keys": lambda r: _second_key(r), "two-keys-all-null-old": lambda r: _second_key(r, None, 1),
        # rows
        "rows-many": _rows(1, 2, 3, 4), "rows-same-key": _rows(1, 1), "rows-update": _rows(1, 2, old=True),
        "rows-null-key": _rows(None), "rows-split-first": _split(0), "rows-split-1": _split(1),
        "rows-split-2": _both(_rows(1, 2, 3), _split(2)),
        "rows-nan-last": _both(_rows(1.0, 2.0, "nan", kind="double")),
        "rows-nan-second-batch": _both(_rows(1.0, "nan", kind="double"), _split(1)),
        "rows-minus-zero-second-batch": _both(_rows(1.0, "-0.0", kind="double"), _split(1)),
        "rows-uint-past-second-batch": _both(_rows(1, 2, kind="uint8"), _split(1),
                                             lambda r: r["columns"][1].__setitem__(2, [1, 200]) if r["columns"][0][2] else None),
        "rows-partly-null-last": _both(_partly_null("new"), _second_row_partly_null),
    }
    return f


def _json_safe(request: Request) -> Request:
    """Floats written as text (JSON has no NaN and keeps no -0.0 apart), dates as ISO text, bytes as hex."""
    def plain(v: Any) -> Any:
        if isinstance(v, float):
            return repr(v) if not math.isfinite(v) or v == 0 else v
        if isinstance(v, datetime.date):
            return v.isoformat()
        if isinstance(v, bytes):
            return v.hex()
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return {k: plain(v) for k, v in request.items()}


def later_faults() -> dict[str, Fault]:
    """Faults added after the corpus was first selected, each tried alone on a put with rows after every other
    candidate, so the numbers a recorded selection keys its requests by stay: a key named in upper case with a value
    column named like it in lower case (the key names are compared lower-cased), a name holding every C0 control
    character but NUL in descending order (a refusal names them in ascending order), then the derived ones
    (:func:`derived_faults`)."""
    return {"value-named-upper-key": _both(_descriptor(0, name="ID"), _descriptor(1, name="ID"),
                                           _column("x", "string", ["x"], VALUE, "id")),
            "name-controls-descending": _column("x", "string", ["x"], VALUE,
                                                "a" + "".join(map(chr, range(0x1F, 0, -1)))),
            **derived_faults()}


TYPE_SAMPLES: Final[dict[str, Any]] = {
    "bool": True, "int8": -1, "int16": -1, "int32": -1, "int64": -1, "uint8": 1, "uint16": 1, "uint32": 1,
    "uint64": 1, "halffloat": 1.5, "float": 1.5, "double": 1.5, "string": "x", "large_string": "x",
    "binary": b"\x00", "large_binary": b"\x00", "date32": datetime.date(2026, 1, 1),
    "date64": datetime.date(2026, 1, 1), "null": None, "timestamp[us]": datetime.datetime(2026, 1, 1, 0, 0, 1),
    "list": [1], "large_list": [1], "fixed_size_list": [1], "map": [("k", 1)], "struct": {"a": 1, "b": 2},
    "union": 1}
"""A value of every Arrow type the spec names (``spec.sync.schema``'s Rust type names), of one it does not name
(a timestamp: its refusals show pyarrow's name) and of each nested kind of :data:`_NESTED_TYPES`."""


TAKEN_TYPES: Final = {kind: value for kind, value in TYPE_SAMPLES.items()
                      if kind not in _NESTED_TYPES and kind not in ("null", "halffloat")}
"""The types of :data:`TYPE_SAMPLES` a table stores (not the null type, nor a nested one, nor a half float, which
Delta has no type for)."""


def _plain_name(kind: str) -> str:
    return kind.split("[", 1)[0]


def _keys_of_every_taken_type(r: Request) -> None:
    """A key of one more column of each type of :data:`TAKEN_TYPES` (the put's rows insert it)."""
    rows = len(r["columns"][0][2])
    for kind, value in TAKEN_TYPES.items():
        name = f"k_{_plain_name(kind)}"
        r["columns"] += [[f"old_{name}", kind, [None] * rows], [f"new_{name}", kind, [value] * rows]]
        r["descriptors"] += [[OLD, name], [NEW, name]]


def derived_faults() -> dict[str, Fault]:
    """Each schema rule derived over what it ranges over, each input beside its nearest twin on the other side of
    the rule: every type of :data:`TYPE_SAMPLES` as a value column (with a value, and null), as the key and as a
    CHANGED column; a column name at each edge of the control characters (U+001F, U+007F and U+0080 to U+009F
    refused; a space, ``~`` and U+00A0 taken), a key's name and a CHANGED column's with one; a key named twice (in
    one case or two) and no key at all; rows of one key split over two batches (the later one wins); a sequence
    number either side of the largest signed one. The twins a put takes are also drawn together, as a tester who
    cannot afford a put each would (:data:`TAKEN_FAULTS`): a value of every type a table stores and a null of it, a
    key of every such type, the taken names."""
    out: dict[str, Fault] = {}
    for kind, value in TYPE_SAMPLES.items():
        out[f"derived-value-{kind}"] = _column("x", kind, [value])
        out[f"derived-null-value-{kind}"] = _column("x", kind, [None])
        out[f"derived-key-{kind}"] = _key_type(kind, None, value)
        out[f"derived-changed-{kind}"] = _both(_column("w", "string", ["w"]),
                                               _column("changed_w", kind, [value], CHANGED, "w"))
    for label, name in (("c0-last", "a\x1f"), ("space", " "), ("tilde", "a~"), ("del", "a\x7f"), ("c1-first", "a\x80"),
                        ("c1-last", "a\x9f"), ("nbsp", "a\xa0")):
        out[f"derived-name-{label}"] = _column("x", "string", ["x"], VALUE, name)
    out["derived-every-taken-type"] = _both(_rows(1, 2), *(_column(f"x_{_plain_name(kind)}", kind, [value, None])
                                                           for kind, value in TAKEN_TYPES.items()))
    out["derived-key-of-every-taken-type"] = _keys_of_every_taken_type
    out["derived-names-taken"] = _both(*(_column(f"x{n}", "string", ["x"], VALUE, name)
                                         for n, name in enumerate((" ", "a~", "a\xa0"))))
    out["derived-key-name-control"] = _both(_descriptor(0, name="i\x01d"), _descriptor(1, name="i\x01d"))
    out["derived-changed-name-control"] = _both(_column("w\x01", "string", ["w"]),
                                                _column("changed_w", "bool", [True], CHANGED, "w\x01"))
    for label, name in (("same", "id"), ("other-case", "ID")):
        out[f"derived-key-twice-{label}"] = _both(lambda r: _second_key(r), _descriptor(1, name=name),
                                                  _descriptor(4, name=name))
    out["derived-no-key"] = _both(_descriptor(0, role=VALUE, name="u"), _descriptor(1, role=VALUE, name="w"))
    out["derived-rows-same-key-split"] = _both(_rows(1, 1), _split(1))
    out["derived-seq-signed-max"] = _set(seq=2**63 - 1)
    out["derived-seq-signed-past"] = _set(seq=2**63)
    out.update(stored_faults())
    return out


def _on_stored(*changes: Fault, stored: Sequence[Fault] = ()) -> Fault:
    """The put after one that stored its table (the put with rows as it was, by another origin, changed by
    ``stored``), changed by ``changes``: the request's schema against a table's (``spec.sync.schema.check_table_fit``)."""
    def change(r: Request) -> None:
        if not r["columns"][0][2]:
            return  # a kind without rows stays without rows
        earlier = copy.deepcopy(r)
        earlier["origin"] += "-stored"
        for fault in stored:
            fault(earlier)
        r["stored"] = earlier
        for fault in changes:
            fault(r)
    return change


def _retype(index: int, kind: str, value: Any) -> Fault:
    def change(r: Request) -> None:
        name, _, values = r["columns"][index]
        r["columns"][index] = [name, kind, [value] * len(values)]
    return change


def _keys_reversed(r: Request) -> None:
    """The key columns of each role in the reverse order (their descriptors with them)."""
    for role in (OLD, NEW):
        at = [i for i, (kind, _) in enumerate(r["descriptors"]) if kind == role]
        for listed in (r["descriptors"], r["columns"]):
            picked = [listed[i] for i in at]
            for i, item in zip(at, reversed(picked)):
                listed[i] = item


def _drop_value(r: Request) -> None:
    del r["columns"][2], r["descriptors"][2]


def stored_faults() -> dict[str, Fault]:
    """A put to a table an earlier put stored, at each rule of the fit and beside its twin: the same schema; a
    value's or the key's type changed (the put's type name sorting before the table's and after it); a key column added, the key's columns in another order, or its name in
    another case; a value column added, left out, or named in another case (one and two of them, and the table's in
    upper case); two problems at once (the order a refusal names them in)."""
    second_key: Fault = lambda r: _second_key(r)  # noqa: E731 - its defaults
    return {
        "stored-same": _on_stored(),
        "stored-value-type": _on_stored(_retype(2, "int64", 1)),
        "stored-key-type": _on_stored(_key_type("int32", None, 1)),
        "stored-key-added": _on_stored(second_key),
        "stored-keys-reordered": _on_stored(second_key, stored=(second_key, _keys_reversed)),
        "stored-key-other-case": _on_stored(_descriptor(0, name="ID"), _descriptor(1, name="ID")),
        "stored-column-added": _on_stored(_column("w", "string", ["w"])),
        "stored-column-left-out": _on_stored(_rows(2), _drop_value),
        "stored-column-other-case": _on_stored(_descriptor(2, name="V")),
        "stored-column-upper-case": _on_stored(stored=(_descriptor(2, name="V"),)),
        "stored-two-columns-other-case": _on_stored(_descriptor(2, name="V"), _column("W", "string", ["w"]),
                                                    stored=(_column("w", "string", ["w"]),)),
        "stored-two-problems": _on_stored(second_key, _retype(3, "int64", 1)),
        "stored-value-type-sorting-before": _on_stored(stored=(_retype(2, "int64", 1),)),
    }


def candidates(seed: int) -> list[dict[str, Any]]:
    """Every candidate, each ``{"label", "request"}``: the plain request of each kind, each fault on each kind, every
    pair of the faults refused alone on a put with rows (on the spec as it is: which refusal wins), a sample of the
    other pairs, and a sample of the refused pairs on each other kind."""
    rng = random.Random(seed)
    table = faults()
    names = sorted(table)
    singles = [f"{kind}: {name}" for kind in KINDS for name in names]
    refused = [name for name in names if "error" in run_sans_io(from_label(f"rows: {name}", "c", table) or {})]
    both_refused = list(itertools.combinations(refused, 2))
    others = [pair for pair in itertools.combinations(names, 2) if not set(pair) <= set(refused)]
    plans = [*KINDS, *singles]
    plans += [f"rows: {a} + {b}" for a, b in both_refused + rng.sample(others, PAIR_SAMPLE)]
    for kind in KINDS[1:]:
        plans += [f"{kind}: {a} + {b}" for a, b in rng.sample(both_refused, PAIR_SAMPLE // 4)]
    later = later_faults()
    plans += [f"rows: {name}" for name in later]
    out = []
    for number, label in enumerate(plans):
        built = from_label(label, f"c{number:05d}", table | later)
        if built is not None:
            out.append({"label": label, "request": built})
    return out


PAIR_SAMPLE: Final = 400


def from_label(label: str, tag: str, table: dict[str, Fault] | None = None) -> Request | None:
    """The candidate of ``label`` (``kind``, or ``kind: fault[ + fault]``) whose table and origin are named ``tag``
    (``c`` and its number among the labels drawn), built alone."""
    kind, _, chosen = label.partition(": ")
    return _built(kind, tuple(chosen.split(" + ")) if chosen else (), table or faults() | later_faults(), tag)


def _built(kind: str, chosen: Sequence[str], table: dict[str, Fault], tag: str) -> Request | None:
    """The request of ``kind`` with the faults ``chosen``; None where the first took away what the second changes or
    left values the second's column type cannot hold."""
    request = _base(tag, kind)
    try:
        for name in chosen:
            table[name](request)
        request = _json_safe(request)
        batches(request)
    except (IndexError, pa.ArrowException):
        return None
    return request


def _from_json(request: Request) -> Request:
    """The request with float columns' text values back as numbers (what :func:`batches` builds arrays from)."""
    columns = [[n, k, [float(v) if isinstance(v, str) and k in ("double", "float", "halffloat") else
                       datetime.date.fromisoformat(v) if k in ("date32", "date64") and isinstance(v, str) else
                       datetime.datetime.fromisoformat(v) if k.startswith("timestamp") and isinstance(v, str) else
                       bytes.fromhex(v) if k in ("binary", "large_binary") and isinstance(v, str) else
                       [tuple(pair) for pair in v] if k == "map" and v is not None else v for v in values]]
               for n, k, values in request.get("columns", [])]
    return dict(request, columns=columns)


# -- selection, vectors, report ------------------------------------------------------------------------------------

def _mutants() -> list[Any]:
    from conformance.operator_mutants import every_mutant

    found = []
    for module in MODULES:
        only = FUNCTIONS.get(module)
        found += [m for m in every_mutant(module) if only is None or m.function.split(".", 1)[0] in only]
    return found


def select(seed: int) -> dict[str, Any]:
    """Every candidate against every mutant of :data:`MODULES` (every family) whose lines it runs, then
    every candidate against the survivors no candidate runs the lines of; no limit of tries."""
    from conformance.operator_mutants import select_all

    logging.disable(logging.CRITICAL)
    found = _mutants()
    items = _items([c["request"] for c in candidates(seed)])
    result = select_all(items, _runner_loader(), PREFIXES, found,
                        progress=lambda line: print(line, file=sys.stderr, flush=True),
                        carried=[(item, None) for item in _items([t["request"] for t in recorded()])])
    modules: dict[str, Any] = {}
    for module in MODULES:
        names = {m.name for m in found if m.module == module}
        modules[module] = {"mutants": len(names), "toldApart": len(names & result.killed_by.keys()),
                           "broken": len(names & set(result.broken)),
                           "brokenRules": sorted(rule_of(n) for n in result.broken if n in names),
                           "survivors": sorted(rule_of(n) for n in result.survivors if n in names),
                           "timedOut": sorted(rule_of(n) for n in result.timed_out if n in names)}
    return {"seed": seed, "modules": modules, "killedBy": dict(result.killed_by)}


def _items(requests: Sequence[Request]) -> list[dict[str, Any]]:
    """What the runner is handed for each request: its messages as a Flight client sends them, and those of the put
    that stored its table first (None: no such put)."""
    wires = client_wires(requests, _store_root())
    at = [i for i, request in enumerate(requests) if "stored" in request]
    stored = dict(zip(at, client_wires([requests[i]["stored"] for i in at], _store_root())))
    return [{"wire": wire, "stored": stored.get(i)} for i, wire in enumerate(wires)]


def record_problems(selection: dict[str, Any]) -> list[str]:
    """What makes a recorded selection stale (:func:`conformance.operator_mutants.record_problems`): it judges every
    mutant the corpus is selected for now (:func:`_mutants`), each by rule, the broken ones counted without their
    names."""
    from conformance.operator_mutants import selection_problems

    return selection_problems(_mutants(), selection)


def _store_root() -> str:
    from conformance.sync.input_runner import STORE_ROOT

    return STORE_ROOT


RULE_KEPT: Final = "a refusal no request kept by a mutant shows, at its smallest violating input"
"""The comment of a request kept for its refusal: one per refusal (condition and text) a single fault on a put with
rows gets, so a rule broken otherwise than by a first-order mutant (refusing ``_delta_log`` only instead of every
``_`` segment) is still tried."""


RULE_TAKEN: Final = "what a put takes, drawn together (derived: inputs.TAKEN_FAULTS)"
TAKEN_FAULTS: Final = ("derived-every-taken-type", "derived-key-of-every-taken-type", "derived-names-taken",
                       "derived-rows-same-key-split")
"""The derived twins a put takes (:func:`derived_faults`), kept whether a mutant needs them or not: each taken put
costs the target a flush and a read, so the twins are drawn together, four puts where one a twin would be fifty."""


def _refusal(request: Request, answer: dict[str, Any]) -> tuple[str, str] | None:
    """The refusal's condition and text with the request's own names left out, or None for an answer taken."""
    if "error" not in answer:
        return None
    return answer["error"], answer["message"].replace(request["origin"][2:], "TAG")


def document(selection: dict[str, Any]) -> dict[str, Any]:
    """The vector file: each kept request once, with the first rule it was kept for and its answer now."""
    pool = candidates(selection["seed"])
    rules: dict[int, list[str]] = {}
    for name, index in sorted(selection["killedBy"].items()):
        rules.setdefault(index, []).append(rule_of(name))
    answers = {index: run_sans_io(pool[index]["request"]) for index in rules}
    shown = {_refusal(pool[i]["request"], answers[i]) for i in rules}
    for index, candidate in enumerate(pool):  # every refusal's smallest violating input, also one no mutant needs
        label = candidate["label"]
        if label.startswith("rows: ") and " + " not in label:
            answer = run_sans_io(candidate["request"])
            refusal = _refusal(candidate["request"], answer)
            if refusal is not None and refusal not in shown:
                shown.add(refusal)
                rules[index], answers[index] = [RULE_KEPT], answer
            elif label.removeprefix("rows: ") in TAKEN_FAULTS and index not in rules:
                rules[index], answers[index] = [RULE_TAKEN], answer
    tests = []
    for n, index in enumerate(sorted(rules), 1):
        request = pool[index]["request"]
        tests.append({"tcId": n, "comment": rules[index][0], "label": pool[index]["label"], "candidate": index,
                      "killed": len([r for r in rules[index] if r not in (RULE_KEPT, RULE_TAKEN)]),
                      "requires": sorted(requires(request)),
                      "request": request, "expected": answers[index]})
    return {
        "algorithm": "seafowl-data-sync/inputs",
        "schema": "sync_inputs_schema.json",
        "numberOfTests": len(tests),
        "header": [
            "Single DoPut requests, each kept because it tells the spec apart from one of its mutants of any family "
            "(conformance/operator_mutants.every_mutant) of the decode and validate rules, because it shows a "
            "refusal no other kept request shows, or because it is one of the derived puts the spec takes "
            "(inputs.TAKEN_FAULTS).",
            "Regenerate: nice -n 10 python -m conformance.sync.inputs select (minutes), then python -m "
            "conformance.sync.inputs.",
        ],
        "notes": {"comment": "module.function: operator of the first mutant the request was kept for (of `killed`), "
                             "or, with killed 0, that it shows a refusal no other request shows or is a derived put "
                             "the spec takes",
                  "{root}": "the target's store root"},
        "selection": selection,
        "testGroups": [{"type": "SyncInput", "tests": tests}],
    }


_CLIENT: Final = "the client's side: a server decodes commands and never encodes one (the request's bytes are made " \
    "by the unmutated client, as a live target's are)"
_FITTED: Final = "the shape a fitted put leaves the table: a third put's fit reads it, and the reference server's flush " \
    "orders the columns it writes by it (SyncServer._flushed_shape); a request puts twice at most, and the runner " \
    "holds a table's rows in memory (the sync walk corpus puts more, and the suite's apply/derived-table-schema-fit)"
_FLIGHT_DATA_CLASS: Final = "the FlightData message class: the server decodes FlightData by hand (decode_flight_data)"
_COMMUTES: Final = "pc.or_ and pc.and_ commute, and the masks they fold are pc.is_null's, never null"
_WIRE: Final = "malformed FlightData or IPC bytes (a request is sent by a conforming Flight client)"
JUDGED: Final[dict[str, tuple[str, str]]] = {
    "messages.SyncCommand.to_message": ("unreachable", _CLIENT),
    "messages.SyncCommand.encode": ("unreachable", _CLIENT),
    "messages.SyncCommand.to_descriptor_cmd": ("unreachable", _CLIENT),
    "messages.SyncResponse.encode: drop m.server_life": ("unreachable", "a server life: the reference target's "
                                                         "endpoint is made without one, so no response carries it"),
    "flight.message_batches": ("unreachable", "the client's splitting of a put into messages (spec.sync.client)"),
    "schema.check_table_fit: existing.keys is not None and put.keys is not None and (s...: drop operand": (
        "unreachable", "a shape without keys (None: a Delta table another writer made, whose storage does not say "
        "them); a put's shape always names its keys (storable_shape)"),
    "schema.check_table_fit: existing.keys or put.keys": (
        "equivalent", "whenever the fit passes, the table's keys and the put's are the same columns (it refuses "
        "others), and every later fit compares them sorted; None keys: a table another writer made"),
    "schema.check_table_fit: problems.append(f\"key columns": (
        "equivalent", "the key columns' problem is the first appended, to an empty list: at the front is the end"),
    "schema.check_table_fit: name not in existing.columns": ("unreachable", _FITTED),
    "schema.check_table_fit: swap arguments {**existing.columns, **added}": ("unreachable", _FITTED),
    "admission.fits_watermark": ("unreachable", "pending data: one request on a server holding none stays under "
                                 "the high-watermark (the sync walk corpus fills it)"),
    "admission.admit_put": ("unreachable", "a draining server (the target drains on a flush-control line; the sync "
                            "walk corpus)"),
    "confinement.table_name: swap checks '..' in segments / not segments": (
        "equivalent", "no list of segments both holds '..' and is empty or ['.']"),
    "admission._type_problem: swap checks": ("equivalent", "no Arrow type is both the null type and nested"),
    "schema.SyncSchema.check_keys: 2 -> 1": ("equivalent", "a one-column key is never null in some key columns only"),
    "schema.SyncSchema.check_keys: remove check if len(cols) < 2": (
        "equivalent", "of one key column x, partly is x and not x, false in every row (pc.is_null is never null); no "
        "role has none (SyncSchema.validate refuses a put without old and new key columns)"),
    "schema.SyncSchema.check_keys: swap arguments some / n": ("equivalent", _COMMUTES),
    "schema.SyncSchema.check_keys: swap arguments every / n": ("equivalent", _COMMUTES),
    "schema.SyncSchema.check_keys: swap arguments some / pc.invert(every)": ("equivalent", _COMMUTES),
    "schema.SyncSchema.check_keys: 1 -> 0": ("equivalent", "folding the first key column with itself again changes "
                                             "neither 'some null' nor 'every null' (x or x, x and x)"),
    "flight.decode_flight_data": ("unreachable", "FlightData fields other than length-delimited ones, or lengths "
                                  "past the message: pyarrow's client sends neither"),
    "flight._varint": ("unreachable", "a varint of ten bytes or one cut short (the client's lengths are short)"),
    "flight._flight_file: drop proto_field(data,": ("unreachable", _FLIGHT_DATA_CLASS),
    "flight._flight_file: swap arguments FlightField.": ("unreachable", _FLIGHT_DATA_CLASS),
    "flight._flight_file: drop proto_field(desc, 'path'": ("unreachable", "a PATH descriptor (a request is sent with "
                                                          "a CMD descriptor)"),
    "flight._flight_file: drop proto_field(result,": ("unreachable", "the PutResult wrapping the response: the "
                                                     "transport's (encode_put_result), which the runner leaves out"),
    "flight.descriptor_command: message.type == DescriptorType.CMD": (
        "unreachable", "a PATH or UNKNOWN descriptor, or a type past CMD (a request is sent with a CMD descriptor)"),
    "messages._sync_file: drop proto_field(resp, 'server_life'": (
        "unreachable", "a server life: the reference target's responses carry none"),
    "confinement.table_name: s != '': != -> >": ("equivalent", "a string is greater than '' exactly when it is not ''"),
    "admission._signed_max: int(2 ** (t.bit_width - 1) - 1): int -> round": (
        "equivalent", "2 ** (w - 1) - 1 of an int width is an int already: int and round return it unchanged"),
    "admission.admit_rows: pa.types.is_unsigned_integer(kind) and len(column) and (c...: drop operand len(column)": (
        "equivalent", "an empty column has no nulls: null_count < len is false whenever len is 0"),
    "admission.admit_rows: swap arguments column / pa.scalar(0.0, kind)": (
        "equivalent", "the addition commutes: 0.0 + -0.0 is 0.0 as -0.0 + 0.0 is, and every other value is kept"),
    "admission.name_problem: unicodedata.category(ch) == 'Cc': == -> <=": (
        "equivalent", "no Unicode general category sorts before 'Cc'"),
    "confinement.check_store_location: any(": ("unreachable", "an allow-list of two locations (the target allows "
                                               "one, where any and all agree)"),
}
"""Survivors judged by hand, by ``module.function`` (or a ``module.function: operator`` prefix), the longest match
wins: ``("equivalent", why)`` or ``("unreachable", the input the interface lacks)``; the rest are gaps."""


def _judged(survivor: str, decode_equivalent: dict[str, str]) -> tuple[str, str]:
    """A survivor's judgement: by :data:`JUDGED`, else equivalent when the decode corpus judged the same mutant
    equivalent (it changes no decoded value, so no request's answer either), else a gap."""
    kind, why = judgement(survivor, JUDGED)
    if kind == "gap" and survivor in decode_equivalent:
        return "equivalent", f"{decode_equivalent[survivor]} (judged in docs/walks/sync-decode.md)"
    return kind, why


def _equivalent_in_decode() -> dict[str, str]:
    """The rules of the decode corpus's survivors it judges equivalent, with why."""
    from conformance.mutant_report import judged
    from conformance.sync.decode import JUDGED as DECODE_JUDGED, VECTOR_FILE as DECODE_FILE

    verdicts = {rule_of(name): judged(name, DECODE_JUDGED)
                for name in json.loads(DECODE_FILE.read_text())["selection"]["survivors"]}
    return {rule: verdict[1] for rule, verdict in verdicts.items() if verdict is not None and verdict[0] == "equivalent"}


def told_apart_by_others() -> dict[str, Counter[Rule]]:
    """What each other corpus of the sync suite tells apart, by rule, as recorded: the walks (puts in turn), the
    decode corpus (bytes handed to one decoder), the machine walks (calls on one machine)."""
    from conformance.sync import decode, machine_walks, walks

    return {name: told_apart_in_file(path) for name, path in (
        ("walks", walks.VECTOR_FILE), ("decode", decode.VECTOR_FILE), ("machine walks", machine_walks.FILES.record))}


def _elsewhere(selection: dict[str, Any]) -> list[str | None]:
    """For each survivor of ``selection`` (module by module, in order), the other corpus of the sync suite that tells
    it apart, or None (:func:`conformance.corpus_record.told_apart_elsewhere`); a mutant broken here (its import
    fails) is broken in every corpus, so it is not among the rule's mutants another corpus may have told apart."""
    survivors = [(module, rule) for module, f in selection["modules"].items() for rule in f["survivors"]]
    broken = Counter((module, rule) for module, f in selection["modules"].items() for rule in f.get("brokenRules", ()))
    importable = []
    for mutant in _mutants():
        key = (mutant.module, rule_of(mutant.name))
        if broken[key] > 0:
            broken[key] -= 1
        else:
            importable.append(mutant)
    return told_apart_elsewhere(survivors, importable, told_apart_by_others())


def report(doc: dict[str, Any]) -> str:
    """``docs/walks/sync-inputs.md``: the figures per module and the survivors by function and operator, judged."""
    sel = doc["selection"]
    by_mutants = sum(1 for t in doc["testGroups"][0]["tests"] if t["killed"])
    lines = ["# Input corpus: sync", "",
             "Generated by `python -m conformance.sync.inputs` from `conformance/sync/vectors/inputs.json`; do not "
             "edit.", "",
             f"Seed {sel['seed']}, {sel['candidates']} candidate requests, every one tried on every mutant (of every "
             f"family, `operator_mutants.every_mutant`) whose lines it runs (no limit of tries; the sans-IO runner `conformance/sync/input_runner.py`, one put as "
             f"the reference server decides it); {doc['numberOfTests']} requests kept ({by_mutants} for the mutants they "
             "tell apart, the others each for a refusal no other request shows, or for what a put takes, drawn "
             f"together from the derived faults: {', '.join(TAKEN_FAULTS)}), each replayed through the "
             "target by the suite's `inputs/` cases. Of `spec.sync.admission` only the functions one request reaches "
             f"({', '.join(FUNCTIONS['spec.sync.admission'])}). Score: told apart / (mutants - broken - equivalent).",
             "A mutant that only ran past the time limit (twice, the second time doubled) is neither told apart nor "
             "a survivor: the last column counts them. A gap another corpus of the sync suite tells apart "
             "(`corpus_record.told_apart_elsewhere`, by rule) is no gap of the suite: the true gaps are the others.",
             "",
             "| module | mutants | told apart | broken | equivalent | unreachable | gap | score | timed out "
             "| gap told apart elsewhere | true gap |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total = [0] * 8
    equivalent = _equivalent_in_decode()
    timed_total = 0
    other = iter(_elsewhere(sel))
    marks: dict[str, list[tuple[str, str | None]]] = {}
    for module, f in sel["modules"].items():
        marks[module] = [(survivor, next(other)) for survivor in f["survivors"]]
        classes = [_judged(s, equivalent)[0] for s in f["survivors"]]
        elsewhere = sum(_judged(s, equivalent)[0] == "gap" and corpus is not None for s, corpus in marks[module])
        row = [f["mutants"], f["toldApart"], f["broken"], classes.count("equivalent"), classes.count("unreachable"),
               classes.count("gap"), elsewhere, classes.count("gap") - elsewhere]
        total = [a + b for a, b in zip(total, row)]
        timed_out = len(f.get("timedOut", []))
        timed_total += timed_out
        lines.append(f"| {module} | " + " | ".join(map(str, row[:6])) + f" | {score(*row[:4])} | {timed_out} | "
                     f"{row[6]} | {row[7]} |")
    lines.append("| **all** | " + " | ".join(map(str, total[:6])) + f" | {score(*total[:4])} | {timed_total} | "
                 f"{total[6]} | {total[7]} |")
    by_corpus = Counter(corpus for module in marks for s, corpus in marks[module]
                        if corpus is not None and _judged(s, equivalent)[0] == "gap")
    lines += ["", f"Of the {total[5]} gaps, {total[6]} are told apart by another corpus of the sync suite ("
              + (", ".join(f"{name} {n}" for name, n in sorted(by_corpus.items())) or "none") + "): the suite's true "
              f"gaps are the other {total[7]}, unmarked below.",
              "", "## Survivors", "", "Each with its judgement: equivalent (why), unreachable through one request "
              "(the input it lacks), or gap (no candidate tells it apart yet); marked with the other corpus of the "
              "sync suite that tells it apart, if one does: *decode* (bytes handed to one decoder, "
              "docs/walks/sync-decode.md), *walks* (puts in turn, docs/walks/sync.md), *machine walks* (calls on one "
              "machine, docs/walks/sync-machines.md).", ""]
    for module, survivors in marks.items():
        if survivors:
            lines += [f"### {module}", ""]
            for survivor, corpus in survivors:
                kind, why = _judged(survivor, equivalent)
                lines.append(f"- `{survivor}`: {kind}" + (f", {why}" if why else "")
                             + (f"; *{corpus}*" if corpus else ""))
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``select --out FILE``: run the selection (minutes, under nice); ``record FILE``: write the vectors and the
    report from it; without a command: regenerate both from the recorded selection (``--check``: exit 1 if stale)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["select"]:
        parser = argparse.ArgumentParser(prog="python -m conformance.sync.inputs select")
        parser.add_argument("--out", type=Path, required=True)
        opts = parser.parse_args(args[1:])
        opts.out.write_text(json.dumps(select(SEED)))
        return 0
    selection: dict[str, Any] | None
    if args[:1] == ["record"]:
        selection = json.loads(Path(args[1]).read_text())
        selection["candidates"] = len(candidates(selection["seed"]))
        args = args[2:]
    else:
        selection = None
    problems = record_problems(json.loads(VECTOR_FILE.read_text())["selection"]) if "--check" in args else []
    for problem in problems:
        print(f"{VECTOR_FILE}'s selection {problem}: select again (python -m conformance.sync.inputs select)",
              file=sys.stderr)
    return vectorgen.write_selected("conformance.sync.inputs", __doc__, (VECTOR_FILE, REPORT_FILE), selection, document,
                                    report, args) or (1 if problems else 0)


# -- the suite's cases --------------------------------------------------------------------------------------------

GROUP_SIZE: Final = 60
"""Requests one case replays: each case stays a few seconds (a request is a put, a taken one a flush and a read)."""


def recorded() -> list[dict[str, Any]]:
    """The recorded requests (none before the first selection)."""
    from conformance.sync.vector_suite import load_vectors

    return [t for g in load_vectors(VECTOR_FILE.name)["testGroups"] for t in g["tests"]] if VECTOR_FILE.exists() else []


def groups() -> list[tuple[str, list[int]]]:
    """``(case suffix, tcIds)``: the recorded requests in runs of :data:`GROUP_SIZE`."""
    ids = [t["tcId"] for t in recorded()]
    return [(f"requests-{n + 1}", ids[i:i + GROUP_SIZE]) for n, i in enumerate(range(0, len(ids), GROUP_SIZE))]


def replay_case(ids: Sequence[int]) -> Callable[[SyncTarget, CaseContext], Verdict]:
    """The check replaying requests ``ids`` on the target; the first answer that differs fails it."""

    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        tests = [test for test in recorded() if test["tcId"] in ids]
        ran = [test for test in tests if set(test["requires"]) <= t.capabilities]
        for test in ran:
            got = live_answer(t, test["request"], ctx.remaining())
            if got != test["expected"]:
                return Verdict(False, f"request tcId {test['tcId']} ({test['label']}, kept for {test['comment']}): "
                               f"{json.dumps(test['expected'])}", json.dumps(got))
        return Verdict(True, f"{len(ran)} requests answered as recorded", f"{len(ran)} of {len(tests)} replayed "
                       f"({len(tests) - len(ran)} need a capability the target does not declare)")

    return check


if __name__ == "__main__":
    sys.exit(main())
