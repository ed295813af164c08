"""Inserts read per column (``TransactionAssembler.feed_data``: ``split_insert``, ``InsertRows``,
spec/pgoutput/columnar.py) make what the per-row path makes of the same messages: the same sync batch,
the same row changes, or the same error, on generated tables, values and a fault in them."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.pgoutput.changes import TablePut
from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.messages import (
    Begin,
    Commit,
    Insert,
    Relation,
    RelationColumn,
    decode_pgoutput,
    split_insert,
)
from spec.pgoutput.transactions import TransactionAssembler

NUMERIC_12_2 = ((12 << 16) | 2) + 4
NUMERIC_4_1 = ((4 << 16) | 1) + 4

_TEXTS = {  # per (type oid, type modifier): texts Postgres prints for a value of the column
    (20, -1): st.integers(-2**63, 2**63 - 1).map(str),
    (23, -1): st.integers(-2**31, 2**31 - 1).map(str),
    (21, -1): st.integers(-2**15, 2**15 - 1).map(str),
    (25, -1): st.text(max_size=12),
    (1043, 20): st.text(max_size=12),
    (3802, -1): st.sampled_from(['{"a": 1}', "[]", "null"]),
    (1700, NUMERIC_12_2): st.decimals(-10**10 + 1, 10**10 - 1, places=2).map(str),
    (1700, NUMERIC_4_1): st.decimals(-999, 999, places=1).map(str),
    (1700, -1): st.sampled_from(["0", "-1.50", "NaN", "12345678901234567890.123", "Infinity"]),
    (16, -1): st.sampled_from(["t", "f"]),
    (701, -1): st.one_of(st.floats(allow_nan=False).map(repr), st.sampled_from(["Infinity", "-Infinity"])),
    (700, -1): st.floats(allow_nan=False, width=32).map(repr),
    (1082, -1): st.dates().map(str),
    (1114, -1): st.datetimes().map(str),
    (1184, -1): st.datetimes().map(lambda d: f"{d}+00"),
    (2950, -1): st.uuids().map(str),
}
_FAULTY = st.one_of(st.binary(max_size=6), st.sampled_from(  # a value the per-row path or pa.array refuses
    [b"NaN", b"Infinity", b"99999999999", b"99999999999999999999", b"1.505", b"+5", b"0x10", b"1e3", b"", b"\xed\xa0\x80",
     b"infinity", b"12345.6"]))
_column_types = st.lists(st.sampled_from(sorted(_TEXTS)), min_size=1, max_size=4)


def _insert(relation_id: int, values: list[bytes | None]) -> bytes:
    body = b"".join(b"n" if v is None else b"t" + len(v).to_bytes(4, "big") + v for v in values)
    return b"I" + relation_id.to_bytes(4, "big") + b"N" + len(values).to_bytes(2, "big") + body


@st.composite
def _streams(draw: st.DrawFn) -> tuple[Relation, list[bytes]]:
    """A table's inserts with at most one fault: a value that does not read or does not fit, or an insert
    that does not split plainly (an unchanged TOAST value, or cut short). With two faults the two paths
    may name different ones (a run's values are read when its put is built)."""
    types = draw(_column_types)
    columns = tuple(RelationColumn(i == 0, f"c{i}", oid, modifier) for i, (oid, modifier) in enumerate(types))
    relation = Relation(7, "public", "t", "d", columns)
    rows = draw(st.lists(st.tuples(*(st.one_of(st.none(), _TEXTS[t].map(str.encode)) for t in types)),
                         min_size=1, max_size=12))
    inserts = [list(row) for row in rows]
    fault = draw(st.sampled_from(["none", "value", "message"]))
    at = draw(st.integers(0, len(inserts) - 1))
    if fault == "value":
        inserts[at][draw(st.integers(0, len(types) - 1))] = draw(_FAULTY)
    messages = [_insert(7, row) for row in inserts]
    if fault == "message":
        messages[at] = draw(st.sampled_from([messages[at][:-1], messages[at][:8] + b"u" + messages[at][8:]]))
    return relation, messages


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return bytes(sink.getvalue())


def _outcome(relation: Relation, inserts: list[bytes], *, per_column: bool) -> object:
    machine = TransactionAssembler()
    try:
        machine.feed(relation)
        machine.feed(Begin(100, 0, 1))
        for data in inserts:
            if per_column:
                machine.feed_data(data)
            else:
                machine.feed(decode_pgoutput(data))
        tx = machine.feed(Commit(0, 100, 101, 0))
        assert tx is not None
        changes = tx.changes["public/t"]
        return _ipc(TablePut.of(changes).batch()), repr(list(changes))  # to the byte, NaN included
    except (PgOutputError, ValueError, ArithmeticError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=80, deadline=None)
@given(_streams())
def test_inserts_read_per_column_are_what_the_per_row_path_makes(stream: tuple[Relation, list[bytes]]) -> None:
    relation, inserts = stream
    assert _outcome(relation, inserts, per_column=True) == _outcome(relation, inserts, per_column=False)


_tuples = st.lists(st.one_of(st.just(b"n"), st.just(b"u"), st.just(b"b\x00\x00\x00\x01x"),
                             st.binary(max_size=8).map(lambda v: b"t" + len(v).to_bytes(4, "big") + v)), max_size=4)


@given(_tuples, st.integers(0, 4), st.integers(0, 60), st.binary(max_size=2), st.sampled_from([b"I", b"U"]),
       st.sampled_from([b"N", b"K"]))
def test_split_insert_agrees_with_the_decoder(values: list[bytes], width: int, cut: int, junk: bytes, tag: bytes,
                                              new: bytes) -> None:
    message = tag + b"\x00\x00\x00\x07" + new + len(values).to_bytes(2, "big") + b"".join(values)
    for data in (message, message[:cut], message + junk):
        try:
            decoded = decode_pgoutput(data)
        except PgOutputError:
            decoded = None
        plain = (isinstance(decoded, Insert) and len(decoded.new) == width
                 and all(v.kind.value in (b"t", b"n") for v in decoded.new))
        expected = [v.value for v in decoded.new] if plain and isinstance(decoded, Insert) else None
        assert split_insert(data, width) == expected
