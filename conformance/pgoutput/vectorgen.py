"""The pgoutput golden vectors: ``python -m conformance.pgoutput.vectorgen [--capture] [--check]``.

``--capture`` records ``stream.json`` from a real Postgres (below); every run then derives
``transactions.json`` from it (``--check``: exit 1 when that file is stale): each captured
transaction, with the Relation messages before it, and what the spec's assembler makes of it.

Starts a throwaway Postgres (``wal_level=logical``), runs a fixed workload that makes every
message of pgoutput protocol version 1 (Begin, Commit, Origin, Relation, Type, Insert, Update with
no old tuple / an old key / an old tuple, Delete, Truncate, a logical decoding message; NULL,
unchanged-TOAST and text columns of every mapped type) and records the CopyData payloads of one
replication connection, keepalives included, with what the spec decodes them to. Status updates
and malformed payloads are written by hand below. LSNs and timestamps differ on every capture,
so the file is regenerated only when the workload changes; ``check_vectors`` holds the decoder to it.
"""

from __future__ import annotations

import struct
import sys
import time
from typing import Any, Final, Sequence

from conformance import vectorgen
from conformance.pgoutput.vector_suite import STREAM_FILE, TRANSACTIONS_FILE, decoded_json, load, transactions_json
from reference.cdc.pgwire import PgConnection
from conformance.pgoutput.postgres_server import PostgresServer
from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.messages import Commit, Insert, PrimaryKeepalive, StandbyStatusUpdate, XLogData, decode_pgoutput, decode_replication

WORKLOAD: Final = [
    "CREATE TYPE mood AS ENUM ('calm', 'cross')",
    "CREATE TABLE kinds (id bigint PRIMARY KEY, i2 smallint, i4 integer, n numeric(12,3), nu numeric, t text,"
    " vc varchar(20), b boolean, d date, ts timestamp, tstz timestamptz, u uuid, j jsonb, by bytea,"
    " f4 real, f8 double precision, ch char(3), js json)",
    "CREATE TABLE docs (id integer PRIMARY KEY, title text, body text)",
    "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",
    "CREATE TABLE pairs (a integer, b text, v integer, PRIMARY KEY (a, b))",
    "ALTER TABLE pairs REPLICA IDENTITY FULL",
    "CREATE TABLE moods (id integer PRIMARY KEY, m mood)",
    "CREATE PUBLICATION vectors FOR ALL TABLES",
    "SELECT pg_create_logical_replication_slot('vectors', 'pgoutput')",
    "INSERT INTO kinds VALUES (9007199254740993, -32768, 2147483647, 123456789.125, 0.1000000000000000000001,"
    " 'tab\there ''quoted'' é', 'short', true, '2024-02-29', '2024-02-29 23:59:59.999999',"
    " '1999-12-31 23:00:00+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"b\": [1, 2], \"a\": null}',"
    " '\\x00ff10', 1.5, -0.1, 'ab', '{\"b\": 1,  \"a\": 2}')",
    "INSERT INTO kinds (id) VALUES (1)",
    "INSERT INTO docs SELECT 1, 'first', string_agg(md5(i::text), '') FROM generate_series(1, 200) i",
    "UPDATE docs SET title = 'renamed' WHERE id = 1",
    "UPDATE docs SET id = 2 WHERE id = 1",
    "INSERT INTO pairs VALUES (1, 'x', 10), (1, 'y', 20)",
    "UPDATE pairs SET v = 11 WHERE a = 1 AND b = 'x'",
    "DELETE FROM pairs WHERE b = 'y'",
    "DELETE FROM docs",
    "INSERT INTO moods VALUES (1, 'calm')",
    "TRUNCATE pairs",
    "BEGIN; SELECT pg_logical_emit_message(true, 'streamwire', 'hello'); INSERT INTO kinds (id) VALUES (2); COMMIT",
    "SELECT pg_replication_origin_create('upstream')",
    "BEGIN; SELECT pg_replication_origin_session_setup('upstream');"
    " SELECT pg_replication_origin_xact_setup('0/1000', '2024-01-01 00:00:00+00');"
    " INSERT INTO kinds (id) VALUES (3); COMMIT",
    "SELECT pg_replication_origin_session_reset()",
]
END_MARKER_ID: Final = 4
HEADER: Final = [
    "CopyData payloads of a Postgres 15.x logical replication connection (pgoutput protocol version 1, "
    "publication_names 'vectors', messages 'true'), captured by conformance/pgoutput/vectorgen.py.",
    "decoded: the payload's message; an XLogData's data is its pgoutput message. Integers are decimal strings, "
    "bytes hex; a TupleData column is {kind: n|u|t|b} with text (t) or hex (b).",
]
NOTES: Final = {"Captured": "recorded from a real Postgres 15", "HandWritten": "bytes written by hand from the layouts"}


def _capture() -> list[bytes]:
    server = PostgresServer()
    try:
        server.start()
        session = server.connect()
        for statement in WORKLOAD:
            session.query(statement)
        session.query(f"INSERT INTO kinds (id) VALUES ({END_MARKER_ID})")
        stream = PgConnection(server.address(), replication=True)
        stream.start_copy_both("START_REPLICATION SLOT vectors LOGICAL 0/0 "
                               "(proto_version '1', publication_names 'vectors', messages 'true')")
        payloads: list[bytes] = []
        keepalives, marker_seen, ended = 0, False, False
        asked = False
        while not (ended and keepalives >= 2):
            payload = stream.read_copy_data()
            assert payload is not None
            message = decode_replication(payload)
            if isinstance(message, PrimaryKeepalive):
                keepalives += 1
                if keepalives > 3:
                    continue
                if not asked:
                    stream.send_copy_data(StandbyStatusUpdate(0, 0, 0, 0, reply_requested=True).encode())
                    asked = True
            elif isinstance(message, XLogData):
                inner = decode_pgoutput(message.data)
                ended = ended or marker_seen and isinstance(inner, Commit)
                marker_seen = marker_seen or isinstance(inner, Insert) and inner.new[0].value == str(END_MARKER_ID).encode()
            payloads.append(payload)
        stream.close()
        session.close()
        return payloads
    finally:
        server.remove()


def _comment(decoded: dict[str, Any]) -> str:
    if decoded["type"] != "XLogData":
        return str(decoded["type"])
    inner = decoded["data"]
    detail = {"Update": lambda m: f" with old {m['old_kind']}" if m["old_kind"] else " (no old tuple)",
              "Delete": lambda m: f" with old {m['old_kind']}",
              "Relation": lambda m: f" {m['namespace']}.{m['name']} identity {m['replica_identity']}"}
    extra = detail.get(inner["type"], lambda m: "")(inner)
    kinds = {c["kind"] for key in ("new", "old") for c in (inner.get(key) or [])}
    if "u" in kinds:
        extra += ", an unchanged TOAST column"
    if "n" in kinds:
        extra += ", NULL columns"
    return f"XLogData: {inner['type']}{extra}"


def _malformed() -> list[tuple[str, bytes]]:
    begin = struct.pack(">QqI", 0x16B3748, 1000, 730)
    tuple_one = struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + b"7"
    relation = struct.pack(">I", 16384) + b"public\0t\0d" + struct.pack(">h", 1) + b"\1id\0" + struct.pack(">Ii", 23, -1)
    return [
        ("empty pgoutput message", b"w" + bytes(24)),
        ("Begin cut short", b"w" + bytes(24) + b"B" + begin[:-1]),
        ("Begin with a trailing byte", b"w" + bytes(24) + b"B" + begin + b"\0"),
        ("unknown pgoutput tag (protocol 2's Stream Start)", b"w" + bytes(24) + b"S" + struct.pack(">Ib", 730, 1)),
        ("Insert without its N tag", b"w" + bytes(24) + b"I" + struct.pack(">I", 16384) + b"X" + tuple_one),
        ("Insert with an unknown column kind", b"w" + bytes(24) + b"I" + struct.pack(">I", 16384) + b"N"
         + struct.pack(">h", 1) + b"q"),
        ("Insert with a negative value length", b"w" + bytes(24) + b"I" + struct.pack(">I", 16384) + b"N"
         + struct.pack(">h", 1) + b"t" + struct.pack(">i", -2)),
        ("Insert whose value is longer than the message", b"w" + bytes(24) + b"I" + struct.pack(">I", 16384)
         + b"N" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 9) + b"7"),
        ("Delete with old tag N", b"w" + bytes(24) + b"D" + struct.pack(">I", 16384) + b"N" + tuple_one),
        ("Relation with replica identity x", b"w" + bytes(24) + b"R" + relation.replace(b"\0d", b"\0x", 1)),
        ("Relation whose name is not UTF-8", b"w" + bytes(24) + b"R" + relation.replace(b"t\0", b"\xff\0", 1)),
        ("Update whose new tuple has no column count", b"w" + bytes(24) + b"U" + struct.pack(">I", 16384) + b"N"),
        ("Truncate with a negative relation count", b"w" + bytes(24) + b"T" + struct.pack(">ib", -1, 0)),
        ("empty CopyData", b""),
        ("unknown replication tag", b"x" + bytes(8)),
        ("keepalive cut short", b"k" + bytes(16)),
        ("keepalive with a trailing byte", b"k" + bytes(18)),
        ("XLogData header cut short", b"w" + bytes(23)),
    ]


def document() -> dict[str, Any]:
    captured = _capture()
    tests: dict[str, list[dict[str, Any]]] = {"Captured": [], "StandbyStatusUpdate": [], "Malformed": []}
    for payload in captured:
        decoded = decoded_json(payload)
        tests["Captured"].append({"comment": _comment(decoded), "flags": ["Captured"], "hex": payload.hex(),
                                  "decoded": decoded})
    for comment, update in (
            ("flush confirmed at a commit LSN", StandbyStatusUpdate(0x16B3750, 0x16B3700, 0x16B3700, 817000000000000)),
            ("nothing confirmed yet, reply requested", StandbyStatusUpdate(0, 0, 0, 0, reply_requested=True)),
            ("LSNs above 2^63", StandbyStatusUpdate(2**64 - 1, 2**63, 2**63, -1))):
        payload = update.encode()
        tests["StandbyStatusUpdate"].append({"comment": comment, "flags": ["HandWritten"], "hex": payload.hex(),
                                             "decoded": decoded_json(payload)})
    for comment, payload in _malformed():
        try:
            decoded_json(payload)
        except PgOutputError as exc:
            tests["Malformed"].append({"comment": comment, "flags": ["HandWritten"], "hex": payload.hex(),
                                       "error": exc.condition, "message": exc.message})
            continue
        raise AssertionError(f"malformed vector {comment!r} decoded")
    groups = []
    tc = 0
    for kind, items in tests.items():
        for item in items:
            tc += 1
            item_with_id = {"tcId": tc, **item}
            item.clear()
            item.update(item_with_id)
        groups.append({"type": kind, "tests": items})
    return {"algorithm": "postgres-pgoutput-v1", "schema": "stream.schema.json", "numberOfTests": tc,
            "header": HEADER, "notes": NOTES, "testGroups": groups}


PRIMARY_KEYS: Final = {"public/pairs": ["a", "b"]}
"""What the catalog says of the captured REPLICA IDENTITY FULL table (a source reads it from pg_index)."""


def transactions_document() -> dict[str, Any]:
    """One vector per captured transaction, derived from stream.json; plus the FULL table without its key."""
    captured = next(g for g in load()["testGroups"] if g["type"] == "Captured")["tests"]
    relations: dict[str, str] = {}
    current: list[str] = []
    tests: list[dict[str, Any]] = []
    for test in captured:
        decoded = test["decoded"]
        if decoded["type"] != "XLogData":
            continue
        kind, data = decoded["data"]["type"], decoded["data"]
        if kind == "Relation" and not current:
            relations[data["relation_id"]] = bytes.fromhex(test["hex"])[25:].hex()
            continue
        current.append(bytes.fromhex(test["hex"])[25:].hex())
        if kind == "Relation":
            relations[data["relation_id"]] = current[-1]
        if kind != "Commit":
            continue
        messages = [*(h for h in relations.values() if h not in current), *current]
        current = []
        expected = transactions_json([bytes.fromhex(h) for h in messages], PRIMARY_KEYS)
        tables = sorted({p for tx in expected["transactions"] for p in tx["tables"]})
        variants = [(PRIMARY_KEYS, ["Captured"], expected)]
        if "public/pairs" in tables:  # the same transaction when the caller names no primary key
            variants.append(({}, ["Captured", "NoPrimaryKey"], transactions_json([bytes.fromhex(h) for h in messages], {})))
        for primary_keys, flags, outcome in variants:
            error = outcome.get("error", {}).get("condition")
            tests.append({"tcId": len(tests) + 1, "comment": error or f"changes of {', '.join(tables)}", "flags": flags,
                          "primaryKeys": primary_keys, "messages": messages, "expected": outcome})
    return {"algorithm": "postgres-pgoutput-v1/transactions", "schema": "transactions.schema.json",
            "numberOfTests": len(tests),
            "header": ["Each captured transaction of stream.json as pgoutput messages (the Relation messages it needs "
                       "first) and what they become: per transaction its commit LSN (the sync sequence number) and, "
                       "per table, the sync column descriptors [role, name] and the batch's rows in column order.",
                       "Values: null, booleans, or text: decimal integers and numerics, ISO dates and timestamps, "
                       "\\x-hex bytes, floats as Python's repr. An error stops the stream after the transactions "
                       "listed before it."],
            "notes": {"Captured": "messages recorded from a real Postgres 15",
                      "NoPrimaryKey": "the REPLICA IDENTITY FULL table without the primary key the catalog names"},
            "testGroups": [{"type": "Transactions", "tests": tests}]}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--capture" in args:
        args.remove("--capture")
        started = time.monotonic()
        STREAM_FILE.parent.mkdir(parents=True, exist_ok=True)
        STREAM_FILE.write_text(vectorgen.render(document()))
        print(f"wrote {STREAM_FILE} in {time.monotonic() - started:.1f} s")
    return vectorgen.write_or_check("conformance.pgoutput.vectorgen", __doc__, TRANSACTIONS_FILE,
                                    lambda: vectorgen.render(transactions_document()), args)

if __name__ == "__main__":
    sys.exit(main())
