"""The sync decoders and encoders byte for byte: a corpus of raw inputs, selected by mutants of every family.

A put's bytes reach ``spec.sync.flight``, ``spec.sync.messages`` and ``spec.sync.schema`` only as pyarrow's
client makes them, so their handling of bytes no client sends (overlong or cut varints, unknown field numbers
and wire types, absent, empty and repeated fields, truncated IPC messages) is tried by no request
(docs/walks/sync-inputs.md). Here a target is handed the bytes for one decoder (or the value for one encoder)
and answers the decoded value or the typed error as plain JSON: :func:`answer` is the spec's answer, sans-IO.
Bytes are in the compact form of conformance/compact_bytes.py: hex, ``{"repeat": hex, "times": n}`` for a long run,
or a list of those one after another.
"""

from __future__ import annotations

import importlib
import json
import logging
import random
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Sequence, cast

import pyarrow as pa

from conformance import vectorgen
from conformance.compact_bytes import CompactFormError, expand_bytes
from conformance.framework import CaseContext, Verdict
from conformance.mutant_report import Judgement, render_report

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

Item = dict[str, Any]

SEED: Final = 4343
MODULES: Final = ("spec.sync.flight", "spec.sync.messages", "spec.sync.schema")
"""The modules whose decoders and encoders an item reaches; of ``spec.sync.schema`` the rules of one put's schema."""
PREFIXES: Final = ("spec.", "conformance.sync.decode")
VECTOR_FILE: Final = Path(__file__).resolve().parent / "vectors" / "decode.json"
REPORT_FILE: Final = Path(__file__).resolve().parents[2] / "docs" / "walks" / "sync-decode.md"

DECODERS: Final = ("flight_data", "descriptor", "command", "response", "ipc", "schema",
                   "encode_command", "encode_response", "put_result")
"""What an item names: a decoder of raw bytes, or an encoder of a plain value."""


def _command_json(command: Any) -> dict[str, Any]:
    store = command.store
    return {"path": command.path, "origin": command.origin,
            "columnDescriptors": [[cd.role, cd.name] for cd in command.column_descriptors],
            "sequenceNumber": command.sequence_number, "format": command.format, "truncate": command.truncate,
            "serverLife": command.server_life,
            "store": None if store is None else {"location": store.location, "options": dict(sorted(store.options.items())),
                                                  "name": store.name}}


def _command(value: dict[str, Any]) -> Any:
    from spec.sync.messages import ColumnDescriptor, StorageLocation, SyncCommand

    store = value.get("store")
    return SyncCommand(path=value["path"], origin=value["origin"],
                       column_descriptors=tuple(ColumnDescriptor(role=r, name=n) for r, n in value["columnDescriptors"]),
                       sequence_number=value.get("sequenceNumber"), format=value.get("format", 0),
                       truncate=value.get("truncate", False), server_life=value.get("serverLife"),
                       store=None if store is None else StorageLocation(**store))


def _schema(item: Item) -> dict[str, Any]:
    from spec.sync.flight import ipc_message
    from spec.sync.messages import ColumnDescriptor, ColumnRole
    from spec.sync.schema import SyncSchema

    schema = pa.ipc.read_schema(ipc_message(memoryview(expand_bytes(item["header"])), memoryview(b"")))
    descriptors = [ColumnDescriptor(role=r, name=n) for r, n in item["descriptors"]]
    validated = SyncSchema.validate(descriptors, schema)
    lookups = [[name, int(role), None if (c := validated.column(name, role)) is None else c.field.name]
               for name in sorted({d.name for d in descriptors} | {"", "~"}) for role in ColumnRole]
    return {"columns": [[int(c.role), c.name, c.field.name, str(c.field.type)] for c in validated.columns],
            "pkNames": validated.pk_names, "table": [[f.name, str(f.type)] for f in validated.table_schema()],
            "lookups": lookups}


def _decode(item: Item) -> Any:
    from spec.sync import flight, messages

    kind = item["decoder"]
    if kind == "flight_data":
        data = flight.decode_flight_data(expand_bytes(item["hex"]))
        return {"descriptor": None if data.descriptor is None else data.descriptor.hex(),
                "header": bytes(data.header).hex(), "body": bytes(data.body).hex()}
    if kind == "descriptor":
        return flight.descriptor_command(expand_bytes(item["hex"])).hex()
    if kind == "command":
        return _command_json(messages.decode_descriptor_cmd(expand_bytes(item["hex"])))
    if kind == "response":
        r = messages.decode_response(expand_bytes(item["hex"]))
        return [r.accepted, r.memory_sequence_number, r.durable_sequence_number, r.first, r.server_life]
    if kind == "ipc":
        message = flight.ipc_message(memoryview(expand_bytes(item["header"])), memoryview(expand_bytes(item["body"])))
        return {"type": message.type, "metadata": message.metadata.to_pybytes().hex(),
                "body": None if message.body is None else message.body.to_pybytes().hex()}
    if kind == "schema":
        return _schema(item)
    if kind == "encode_command":
        command = _command(item["value"])
        return [command.encode().hex(), command.to_descriptor_cmd().hex()]
    if kind == "encode_response":
        accepted, memory, durable, first, life = item["value"]
        return messages.SyncResponse(accepted=accepted, memory_sequence_number=memory,
                                     durable_sequence_number=durable, first=first, server_life=life).encode().hex()
    if kind == "put_result":
        return flight.encode_put_result(expand_bytes(item["hex"])).hex()
    raise ValueError(f"unknown decoder {kind!r}")


def answer(item: Item) -> dict[str, Any]:
    """The spec's answer to ``item``: ``{"value": ...}`` the typed error ``{"error": condition, "message": text}``,
    or ``{"raised": exception type, ...}`` for an error the spec leaves untyped (a finding, not a contract)."""
    from spec.sync.errors import SyncError, one_line

    try:
        return {"value": _decode(item)}
    except SyncError as error:
        return {"error": error.condition, "message": one_line(str(error))}
    except CompactFormError:
        raise  # a broken input, not an answer of the spec's
    except Exception as error:  # noqa: BLE001 - an error the spec does not type is an answer too, recorded as such
        return {"raised": type(error).__name__, "message": one_line(str(error))}


# -- candidates ----------------------------------------------------------------------------------------------------

def varint(n: int, width: int = 0) -> bytes:
    """``n`` as a protobuf varint, padded with continuation bytes to ``width`` bytes (an overlong encoding)."""
    out = bytearray()
    while True:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
        if not n and len(out) >= width:
            break
    out[-1] &= 0x7F
    return bytes(out)


def field(number: int, data: bytes, wire: int = 2) -> bytes:
    """One protobuf field: tag, then (length-delimited) length and ``data``, or ``data`` as it is."""
    tag = varint(number << 3 | wire)
    return tag + varint(len(data)) + data if wire == 2 else tag + data


def _schema_header(fields: list[pa.Field]) -> bytes:
    """The flatbuffer metadata of the IPC schema message of ``fields`` (what a FlightData header carries)."""
    buffer: bytes = pa.schema(fields).serialize().to_pybytes()
    size: int = struct.unpack("<i", buffer[4:8])[0]
    return buffer[8:8 + size]


_TYPES: Final = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
                 pa.float16(), pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(), pa.binary(),
                 pa.large_binary(),
                 pa.date32(), pa.date64(), pa.timestamp("us"), pa.timestamp("ns", "UTC"), pa.time32("s"),
                 pa.time64("ns"), pa.decimal128(10, 2), pa.decimal256(40, 3), pa.duration("ms"), pa.null(),
                 pa.list_(pa.int32()), pa.struct([("x", pa.int8())]), pa.map_(pa.string(), pa.int32()),
                 pa.dictionary(pa.int8(), pa.string()), pa.binary(4), pa.month_day_nano_interval())
"""Arrow types a put's schema may name: every kind the schema rules and admission name, nested and dictionary."""


def _flight_items(rng: random.Random) -> list[Item]:
    desc = field(1, varint(2), 0) + field(2, b"cmd")
    valid = field(1, desc) + field(2, b"\x01\x02") + field(3, b"meta") + field(1000, b"body")
    out: list[Item] = [{"decoder": "flight_data", "hex": valid.hex()}, {"decoder": "flight_data", "hex": ""}]
    for number in (0, 1, 2, 3, 4, 999, 1000, 1001, 2**29 - 1):
        for wire in range(8):
            payload = {0: varint(300), 1: bytes(8), 2: varint(2) + b"ab", 5: bytes(4)}.get(wire, b"")
            for cut in (0, 1):
                data = field(number, b"", wire)[:] + payload
                out.append({"decoder": "flight_data", "hex": (data[:len(data) - cut] + field(2, b"h")).hex()})
                out.append({"decoder": "flight_data", "hex": (field(2, b"h") + data[:len(data) - cut]).hex()})
    for width in range(1, 13):
        out.append({"decoder": "flight_data", "hex": (b"\x12" + varint(1, width) + b"x").hex()})
        out.append({"decoder": "flight_data", "hex": (varint(2 << 3 | 2, width) + b"\x01x").hex()})
        out.append({"decoder": "flight_data", "hex": (b"\x08" + varint(5, width) + field(2, b"y")).hex()})
        out.append({"decoder": "flight_data", "hex": bytes([0x12] + [0x80] * width).hex()})
    for length in (127, 128, 16383, 16384):  # a length whose varint's last byte is 0x7f, or that needs one more byte
        out.append({"decoder": "flight_data", "hex": [(b"\x12" + varint(length)).hex(), {"repeat": "00", "times": length}]})
    for extra in (-1, 0, 1, 2):
        out.append({"decoder": "flight_data", "hex": (b"\x12" + varint(3 + extra) + b"abc").hex()})
    for cut in range(len(valid)):
        out.append({"decoder": "flight_data", "hex": valid[:cut].hex()})
    out.append({"decoder": "flight_data", "hex": (field(2, b"one") + field(2, b"two") + field(1, b"") + field(1000, b"")).hex()})
    out.append({"decoder": "flight_data", "hex": {"repeat": field(3, b"m").hex(), "times": 1000}})
    for _ in range(60):
        mutated = bytearray(valid)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        out.append({"decoder": "flight_data", "hex": bytes(mutated).hex()})
    return out


def _descriptor_items(rng: random.Random) -> list[Item]:
    out: list[Item] = []
    for kind in (None, 0, 1, 2, 3, -1, 2**31 - 1):
        for cmd in (None, b"", b"c"):
            for path in ((), ("p",), ("a", "b")):
                data = (b"" if kind is None else field(1, varint(kind & (2**64 - 1)), 0)) \
                    + (b"" if cmd is None else field(2, cmd)) + b"".join(field(3, p.encode()) for p in path)
                out.append({"decoder": "descriptor", "hex": data.hex()})
    for bad in (b"\x08", b"\x12\x05ab", b"\x0f", b"\x08\x02\x08\x01", b"\x08\x01\x08\x02", b"\x1a\x01\xff"):
        out.append({"decoder": "descriptor", "hex": (bad + field(2, b"c")).hex()})
    return out


def _message_items(rng: random.Random) -> list[Item]:
    from spec.sync.messages import COMMAND_TYPE_URL

    cmd = (field(1, b"t") + field(2, field(1, b"s3://b") + field(2, field(1, b"k") + field(2, b"v")) + field(3, b"n"))
           + field(3, field(1, varint(1), 0) + field(2, b"id")) + field(4, b"o") + field(5, varint(7), 0)
           + field(6, varint(1), 0) + field(100, varint(1), 0) + field(101, varint(9), 0))
    parts = [field(1, b"t"), field(3, b""), field(4, b""), field(5, varint(0), 0), field(5, varint(2**64 - 1), 0),
             field(101, varint(0), 0), field(6, varint(5), 0), field(3, field(1, varint(7), 0)), field(2, b""),
             field(7, b"x"), field(5, b"\x01", 2), field(1, b"\xff"), field(4, varint(1), 0)]
    out: list[Item] = []

    def wrap(value: bytes, url: bytes = COMMAND_TYPE_URL.encode()) -> bytes:
        return field(1, url) + field(2, value)

    out.append({"decoder": "command", "hex": wrap(cmd).hex()})
    for part in parts:
        out.append({"decoder": "command", "hex": wrap(part).hex()})
        out.append({"decoder": "command", "hex": wrap(cmd + part).hex()})
    for url in (b"", b"type.googleapis.com/clade.sync.DataSyncCommand", b"datasynccommand"):
        out.append({"decoder": "command", "hex": wrap(cmd, url).hex()})
    for cut in range(0, len(wrap(cmd)), 3):
        out.append({"decoder": "command", "hex": wrap(cmd)[:cut].hex()})
    resp_parts = [field(1, varint(1), 0), field(2, varint(0), 0), field(2, varint(5), 0), field(3, varint(0), 0),
                  field(3, varint(2**64 - 1), 0), field(4, varint(1), 0), field(101, varint(3), 0), field(9, b"z"),
                  field(1, b"x", 2), b"\x10"]
    for i, part in enumerate(resp_parts):
        out.append({"decoder": "response", "hex": part.hex()})
        out.append({"decoder": "response", "hex": (part + resp_parts[(i + 1) % len(resp_parts)]).hex()})
    for value in ([True, None, None, False, None], [False, 0, 0, True, 0], [True, 5, 3, False, 2**64 - 1]):
        out.append({"decoder": "encode_response", "value": value})
    base: dict[str, Any] = {"path": "t", "origin": "o", "columnDescriptors": [], "format": 0, "truncate": False}
    for change in ({}, {"sequenceNumber": 0}, {"sequenceNumber": 7}, {"serverLife": 0}, {"serverLife": 4},
                   {"store": {"location": "s3://b", "options": {"k": "v"}, "name": "n"}},
                   {"store": {"location": "", "options": {}, "name": ""}}, {"truncate": True}, {"format": 1},
                   {"columnDescriptors": [[0, "id"], [1, "id"], [3, "v"]]}, {"path": "", "origin": ""}):
        out.append({"decoder": "encode_command", "value": dict(base, **change)})
    for meta in ("", "00", "0801"):
        out.append({"decoder": "put_result", "hex": meta})
    return out


def _ipc_items(rng: random.Random) -> list[Item]:
    batch = pa.record_batch([pa.array([1, 2], pa.int64())], names=["a"])
    serialized: bytes = batch.serialize().to_pybytes()
    size = struct.unpack("<i", serialized[4:8])[0]
    header, body = serialized[8:8 + size], serialized[8 + size:]
    out: list[Item] = []
    for fields in ([pa.field("a", pa.int64())], [pa.field("a", pa.int64()), pa.field("bb", pa.string())], []):
        schema_header = _schema_header(fields)
        for trim in (0, 1, 2, 3, 4, 5, 6, 7, 8):
            out.append({"decoder": "ipc", "header": schema_header[:len(schema_header) - trim].hex(), "body": ""})
    for body_cut in (0, 8, len(body) - 1, len(body)):
        for header_trim in (0, 4):
            out.append({"decoder": "ipc", "header": header[:len(header) - header_trim].hex(), "body": body[:body_cut].hex()})
    out.append({"decoder": "ipc", "header": "", "body": ""})
    out.append({"decoder": "ipc", "header": header.hex(), "body": (body + bytes(9)).hex()})
    return out


def _schema_items(rng: random.Random) -> list[Item]:
    out: list[Item] = []
    pk = [[0, "id"], [1, "id"]]
    for kind in _TYPES:
        fields = [pa.field("o", pa.int64()), pa.field("n", pa.int64()), pa.field("v", kind)]
        out.append({"decoder": "schema", "header": _schema_header(fields).hex(), "descriptors": pk + [[3, "v"]]})
        fields = [pa.field("o", kind), pa.field("n", kind), pa.field("c", pa.bool_()), pa.field("v", kind)]
        out.append({"decoder": "schema", "header": _schema_header(fields).hex(),
                    "descriptors": pk + [[2, "v"], [3, "v"]]})
        # a CHANGED column of the type: its refusal names the type as arrow-rs spells it (Seafowl's text)
        fields = [pa.field("o", pa.int64()), pa.field("n", pa.int64()), pa.field("c", kind), pa.field("v", pa.int64())]
        out.append({"decoder": "schema", "header": _schema_header(fields).hex(),
                    "descriptors": pk + [[2, "v"], [3, "v"]]})
    mixed = [pa.field("o", pa.int64()), pa.field("n", pa.int64()), pa.field("c", pa.bool_()), pa.field("a", pa.int64()),
             pa.field("b", pa.int64())]
    for descriptors in (pk + [[2, "b"], [3, "a"], [3, "b"]], pk + [[2, "a"], [3, "b"], [3, "c"]],
                        pk + [[2, "id"], [3, "a"], [3, "b"]], pk + [[2, "zz"], [3, "a"], [3, "b"]],
                        pk + [[2, "b"], [0, "b"], [3, "a"]], pk + [[2, "a"], [3, "a"], [3, "b"], [3, "x"]],
                        [[0, "id"], [0, "k"], [2, "a"], [3, "a"], [3, "b"]], [[1, "id"], [1, "k"], [2, "a"], [3, "a"],
                                                                             [3, "b"]],
                        [[0, "a"], [1, "b"], [2, "a"], [3, "a"], [3, "b"]], [[0, "a"], [1, "a"], [1, "b"], [3, "a"],
                                                                             [3, "b"]],
                        [[0, "a"], [0, "b"], [1, "a"], [3, "a"], [3, "b"]], pk + [[2, "a"], [3, "a"]]):
        out.append({"decoder": "schema", "header": _schema_header(mixed).hex(), "descriptors": descriptors})
    for descriptors in (pk + [[3, "c"], [2, "zz"], [3, "b"]], pk + [[2, "a"], [4, "a"], [3, "b"]]):
        out.append({"decoder": "schema", "header": _schema_header(mixed).hex(), "descriptors": descriptors})
    two = [pa.field(n, pa.int64()) for n in ("o", "n", "a", "b", "c")]
    for descriptors in (pk + [[3, "b"], [3, "a"], [2, "a"]], pk + [[3, "a"], [3, "b"], [2, "b"]],
                        pk + [[3, "a"], [3, "a"], [3, "b"]], [[0, "a"], [1, "b"], [3, "a"], [3, "b"], [4, "c"]],
                        [[1, "id"], [0, "id"], [3, "a"], [3, "b"], [3, "c"]], pk + [[3, "a"], [3, "b"]]):
        out.append({"decoder": "schema", "header": _schema_header(two).hex(), "descriptors": descriptors})
    return out


_FAMILIES: Final[tuple[Callable[[random.Random], list[Item]], ...]] = (
    _flight_items, _descriptor_items, _message_items, _ipc_items, _schema_items)


def candidates(seed: int) -> list[Item]:
    """Every candidate input of seed ``seed``: structured ones at each edge, then seeded byte mutations."""
    rng = random.Random(seed)
    return [item for family in _FAMILIES for item in family(rng)]


# -- selection, vectors, report ------------------------------------------------------------------------------------

def _mutants() -> list[Any]:
    from conformance.operator_mutants import every_mutant

    return [m for module in MODULES for m in every_mutant(module)]


def _load_answer() -> Callable[[Item], dict[str, Any]]:
    """The runner of the selection, with :data:`MODULES` imported first: a mutant that breaks one's import is
    counted broken, not told apart by every input."""
    for module in MODULES:
        importlib.import_module(module)
    return cast(Callable[[Item], dict[str, Any]], importlib.import_module("conformance.sync.decode").answer)


def select(seed: int) -> dict[str, Any]:
    """Every candidate on every mutant of :data:`MODULES` whose lines it runs (then on those it runs at import):
    the raw outcome, with each mutant's module so the report can count them."""
    from conformance.operator_mutants import select_all

    logging.disable(logging.CRITICAL)
    found = _mutants()
    result = select_all(candidates(seed), _load_answer, PREFIXES, found,
                        progress=lambda line: print(line, file=sys.stderr, flush=True),
                        carried=[(t["input"], None) for t in vectorgen.recorded_tests([VECTOR_FILE])])
    return {"seed": seed, "candidates": len(candidates(seed)),
            "mutants": [{"module": m.module, "name": m.name} for m in found],
            "killedBy": dict(result.killed_by), "broken": result.broken, "survivors": result.survivors,
            "timedOut": result.timed_out}


def record_problems(selection: dict[str, Any]) -> list[str]:
    """What makes a recorded selection stale (:func:`conformance.operator_mutants.record_problems`): it judges every
    mutant of :data:`MODULES` now, each by rule."""
    from conformance.operator_mutants import record_problems as problems, rule_of

    return problems(_mutants(), selection["killedBy"].keys(),
                    [rule_of(name) for key in ("survivors", "broken", "timedOut") for name in selection[key]])


def document(selection: dict[str, Any]) -> dict[str, Any]:
    """The vector file: each kept input once, with the first mutant it was kept for and the spec's answer now."""
    from conformance.operator_mutants import rule_of

    pool = candidates(selection["seed"])
    rules: dict[int, list[str]] = {}
    for name, index in sorted(selection["killedBy"].items()):
        rules.setdefault(index, []).append(rule_of(name))
    tests = [{"tcId": n, "comment": rules[index][0], "candidate": index, "killed": len(rules[index]),
              "input": pool[index], "expected": answer(pool[index])} for n, index in enumerate(sorted(rules), 1)]
    return {
        "algorithm": "seafowl-data-sync/decode",
        "schema": "sync_decode_schema.json",
        "numberOfTests": len(tests),
        "header": [
            "Raw inputs for one decoder (or encoder) of spec/sync/flight.py, messages.py and schema.py, each kept "
            "because it tells the spec apart from one of their mutants of any family "
            "(conformance/operator_mutants.every_mutant); the answer is the decoded value or the typed error.",
            "Regenerate: nice -n 10 python -m conformance.sync.decode select (a minute or two), then python -m "
            "conformance.sync.decode --check.",
        ],
        "notes": {"input": "decoder and its bytes (hex, {repeat: hex, times: n}, or a list of those) or an encoder and its value",
                  "raised": "an error the spec leaves untyped: recorded, not a contract"},
        "selection": selection,
        "testGroups": [{"type": "SyncDecode", "tests": tests}],
    }


_FLIGHT_DATA_CLASS: Final = ("the FlightData message class: the server decodes FlightData by hand (decode_flight_data); "
                             "only a test client encodes with it")
_CLIENT_ONLY: Final = "the client's splitting of a put into messages (spec.sync.client): a table, not bytes"
_STORED: Final = ("a table stored by an earlier put: the sync walk corpus's and the suite's "
                  "apply/derived-table-schema-fit, not one decoder's")
_RESIZED: Final = ("the frame's last assignment (frame[meta_end:] = body) sets its length, and the bytes a mutant "
                   "shifts are the zero fill, so the frame is the same")
_AFTER_LEN_AND_VARINT: Final = "a wire type is 0 to 7, and 0 and 2 are taken by the branches before"
_PAST_THE_END: Final = "a length past the end then takes pos past it, and the loop's end refuses it with the same error"
_UNREAD_NAME: Final = ("a name in a descriptor the spec never reads by it (protobuf's bytes carry field numbers; a "
                       "map entry is read by position, a file named by no dependency): the same bytes decode the same")
JUDGED: Final[tuple[Judgement, ...]] = (
    ("flight.ipc_message", "", "equivalent", _RESIZED),
    ("flight.decode_flight_data", "pos + length: + -> -", "equivalent", _PAST_THE_END),
    ("flight.decode_flight_data", "remove check if pos + length > len(data)", "equivalent", _PAST_THE_END),
    ("flight.decode_flight_data", "wire == _WIRE_VARINT: == -> <=", "equivalent", "no wire type is below 0"),
    ("flight.decode_flight_data", "wire == _WIRE_I64: == -> <=", "equivalent", _AFTER_LEN_AND_VARINT),
    ("flight.decode_flight_data", "pos != len(data): != -> >", "equivalent", "the loop ends with pos at or past the "
     "end, never before it"),
    ("messages._schema_file", "2 -> 3", "equivalent", "a map entry's key and value are fields 1 and 2 by the "
     "map_entry rule: protobuf's runtime reads and writes them so whatever number the descriptor names"),
    ("messages.proto_field", "drop f.proto3_optional", "equivalent", "the field keeps its one-field oneof "
     "(oneof_index), so presence is tracked as by proto3 optional: the same bytes, the same HasField"),
    ("flight._flight_file", "' -> '", "equivalent", _UNREAD_NAME),
    ("messages._schema_file", "' -> '", "equivalent", _UNREAD_NAME),
    ("messages._sync_file", "' -> '", "equivalent", _UNREAD_NAME),
    *(("schema._RUST_TYPE_NAMES", part, "equivalent", "a CHANGED column of type boolean is taken: no refusal "
       "names the type Boolean (nor bool, its name without the table's entry)")
      for part in ("'Boolean' -> ", "drop entry pa.bool_()")),
    ("schema.rust_type_name", "swap arguments t / str(t)", "equivalent", "pyarrow's types hash and compare equal to "
     "their names (pa.int8() == 'int8'): looked up by its name a type finds its own entry, and one not in the table "
     "prints as its name either way"),
    ("flight._flight_file", "drop proto_field(data,", "unreachable", _FLIGHT_DATA_CLASS),
    ("flight._flight_file", "swap arguments FlightField.", "unreachable", _FLIGHT_DATA_CLASS),
    ("flight.message_batches", "", "unreachable", _CLIENT_ONLY),
    ("schema.check_table_fit", "", "unreachable", _STORED),
    ("schema.SyncSchema.check_keys", "", "unreachable", "a put's rows (admission's, after the schema): the sync "
                                                        "input corpus's"),
)
"""Survivors judged by hand: (``module.function``, part of the operator, verdict, why); the rest are gaps."""


def report(doc: dict[str, Any]) -> str:
    """``docs/walks/sync-decode.md``: the figures per module and the survivors, judged."""
    selection = doc["selection"]
    intro = ["# Decode corpus: sync", "",
             "Generated by `python -m conformance.sync.decode` from `conformance/sync/vectors/decode.json`; do not "
             "edit.", "",
             f"Seed {selection['seed']}, {selection['candidates']} candidate inputs (each for one decoder or encoder: "
             "structured ones at every field number, wire type, varint length and cut, then seeded byte mutations), "
             "every one tried on every mutant (of every family, `operator_mutants.every_mutant`) whose lines it runs, "
             "then those the modules run at import on every one; "
             f"{doc['numberOfTests']} inputs kept.", ""]
    return render_report(selection, intro, JUDGED, "one decoder's bytes")


def main(argv: Sequence[str] | None = None) -> int:
    """``select``: run the selection (a minute or two, under nice) and write the vectors and the report; without a
    command: rebuild both from the recorded selection (``--check``: exit 1 if stale)."""
    args = list(sys.argv[1:] if argv is None else argv)
    selection = select(SEED) if args[:1] == ["select"] else None
    problems = record_problems(json.loads(VECTOR_FILE.read_text())["selection"]) if "--check" in args else []
    for problem in problems:
        print(f"{VECTOR_FILE}'s selection {problem}: select again (python -m conformance.sync.decode select)",
              file=sys.stderr)
    return vectorgen.write_selected("conformance.sync.decode", __doc__, (VECTOR_FILE, REPORT_FILE), selection,
                                    document, report, [a for a in args if a != "select"]) or (1 if problems else 0)


# -- the suite's case ----------------------------------------------------------------------------------------------

def replay(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """``decode/recorded``: every recorded input handed to the target's ``DECODE`` line; the first answer that differs
    fails the case."""
    from conformance.sync.vector_suite import load_vectors

    tests = load_vectors(VECTOR_FILE.name)["testGroups"][0]["tests"]
    for test in tests:
        line = t.control("DECODE " + json.dumps(test["input"]), ctx.remaining())
        got = json.loads(line.split(None, 1)[1]) if line.startswith("DECODE ") else line
        if got != test["expected"]:
            return Verdict(False, f"input tcId {test['tcId']} (kept for {test['comment']}): "
                           f"{json.dumps(test['expected'])}", json.dumps(got))
    return Verdict(True, f"{len(tests)} inputs decoded as recorded", f"{len(tests)} inputs decoded as recorded")


if __name__ == "__main__":
    sys.exit(main())
