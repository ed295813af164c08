"""The transaction assembler on the stream captured from Postgres 15 (the golden vectors) and on
hand-made messages: what a user of the change source relies on about keys, types and TOAST."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator

import pyarrow as pa
import pytest

from conformance.pgoutput.vector_suite import load
from spec.pgoutput.changes import CHUNK_ROWS, Op, RowChange, TableImage, TablePut
from spec.pgoutput.errors import (
    NoReplicaIdentity,
    OutOfOrder,
    PgOutputError,
    UnappliableSchemaChange,
    UnknownRelation,
    UnmappedType,
    UnresolvedToast,
)
from spec.pgoutput.layouts import ColumnKind
from spec.pgoutput.messages import (
    Begin,
    Commit,
    Insert,
    PgOutputMessage,
    Relation,
    RelationColumn,
    Truncate,
    TupleValue,
    XLogData,
    decode_pgoutput,
    decode_replication,
)
from spec.pgoutput.spill import SpillBudget
from spec.pgoutput.transactions import SourceTransaction, TransactionAssembler
from spec.sync.messages import ColumnDescriptor
from spec.sync.schema import SyncSchema


def captured() -> Iterator[PgOutputMessage]:
    for group in load()["testGroups"]:
        for test in group["tests"] if group["type"] == "Captured" else ():
            message = decode_replication(bytes.fromhex(test["hex"]))
            if isinstance(message, XLogData):
                yield decode_pgoutput(message.data)


def replay(stop_at: type = type(None)) -> tuple[list[SourceTransaction], PgOutputError | None]:
    """The captured stream's transactions up to the first error (then the error)."""
    machine = TransactionAssembler(primary_key=lambda rel: ("a", "b") if rel.name == "pairs" else ())
    out: list[SourceTransaction] = []
    for message in captured():
        try:
            tx = machine.feed(message)
        except PgOutputError as exc:
            return out, exc
        if tx is not None:
            out.append(tx)
    return out, None


def test_every_mapped_type_arrives_with_its_exact_value() -> None:
    txs, _ = replay()
    (row, nulls) = [c for tx in txs[:2] for c in tx.changes["public/kinds"]]
    names = [n for n, _ in row.table.values]
    assert row.op is Op.INSERT and row.old_key is None and row.new_key == (9007199254740993,)
    values = dict(zip(names, row.values or ()))
    assert values == {
        "i2": -32768, "i4": 2147483647, "n": decimal.Decimal("123456789.125"), "nu": "0.1000000000000000000001",
        "t": "tab\there 'quoted' é", "vc": "short", "b": True, "d": dt.date(2024, 2, 29),
        "ts": dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
        "tstz": dt.datetime(1999, 12, 31, 23, 0, tzinfo=dt.timezone.utc),
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": '{"a": null, "b": [1, 2]}', "by": b"\x00\xff\x10",
        "f4": 1.5, "f8": -0.1, "ch": "ab ", "js": '{"b": 1,  "a": 2}'}
    assert nulls.values == (None,) * len(names)
    batch = row.table.batch([row, nulls])
    assert batch.column("n").type.precision == 12 and str(batch.column("tstz").type) == "timestamp[us, tz=UTC]"
    SyncSchema.validate(list(row.table.descriptors()), batch.schema)


def test_each_transaction_is_numbered_by_its_commit_lsn_and_grouped_by_table() -> None:
    txs, _ = replay()
    begins = [m for m in captured() if isinstance(m, Begin)]
    assert [tx.commit_lsn for tx in txs] == [b.final_lsn for b in begins[:len(txs)]]
    assert [tx.commit_lsn for tx in txs] == sorted(tx.commit_lsn for tx in txs)
    assert {path for tx in txs for path in tx.changes} >= {"public/kinds", "public/docs", "public/pairs"}


def test_an_unchanged_toast_value_is_kept_by_the_table_not_overwritten() -> None:
    txs, _ = replay()
    docs = [c for tx in txs for c in tx.changes.get("public/docs", [])]
    insert, rename, move, delete = docs
    assert [n for n, _ in insert.table.values] == ["title", "body"]
    assert rename.op is Op.UPDATE and rename.old_key == rename.new_key == (1,)
    assert rename.values == ("renamed", None) and rename.changed == (True, False)
    assert move.changes_key and (move.old_key, move.new_key) == ((1,), (2,)) and move.changed == (True, False)
    assert delete.op is Op.DELETE and delete.old_key == (2,) and delete.new_key is None


def test_a_key_change_that_must_travel_apart_needs_the_whole_row() -> None:
    txs, _ = replay()
    move = [c for tx in txs for c in tx.changes.get("public/docs", []) if c.changes_key][0]
    with pytest.raises(UnresolvedToast, match="public/docs: column body .* REPLICA IDENTITY FULL"):
        move.split()
    full = type(move)(move.table, move.op, move.old_key, move.new_key, ("t", "b"), (True, True))
    delete, insert = full.split()
    assert (delete.op, delete.old_key, delete.new_key) == (Op.DELETE, (1,), None)
    assert (insert.op, insert.old_key, insert.new_key, insert.values) == (Op.INSERT, None, (2,), ("t", "b"))


def test_replica_identity_full_keys_by_the_primary_key_the_caller_names() -> None:
    txs, _ = replay()
    pairs = [c for tx in txs for c in tx.changes.get("public/pairs", [])]
    assert [(c.op, c.old_key, c.new_key, c.values) for c in pairs] == [
        (Op.INSERT, None, (1, "x"), (10,)), (Op.INSERT, None, (1, "y"), (20,)),
        (Op.UPDATE, (1, "x"), (1, "x"), (11,)), (Op.DELETE, (1, "y"), None, None)]
    machine = TransactionAssembler()
    with pytest.raises(NoReplicaIdentity, match="public/pairs"):
        for message in captured():
            machine.feed(message)


def test_the_stream_stops_at_an_unmapped_type_naming_table_and_column() -> None:
    _, error = replay()
    assert isinstance(error, UnmappedType) and "public/moods: column m: type oid" in error.message


def _relation() -> Relation:
    return Relation(7, "public", "t", "d", (RelationColumn(True, "id", 23, -1), RelationColumn(False, "v", 25, -1)))


def _insert(key: bytes, value: TupleValue) -> Insert:
    return Insert(7, (TupleValue(ColumnKind.TEXT, key), value))


def test_structure_rules() -> None:
    machine = TransactionAssembler()
    machine.feed(_relation())
    with pytest.raises(OutOfOrder, match="outside a transaction"):
        machine.feed(_insert(b"1", TupleValue(ColumnKind.NULL)))
    with pytest.raises(OutOfOrder, match="without a Begin"):
        machine.feed(Commit(0, 10, 20, 0))
    machine.feed(Begin(10, 0, 1))
    with pytest.raises(OutOfOrder, match="inside the transaction"):
        machine.feed(Begin(30, 0, 2))
    with pytest.raises(UnresolvedToast, match="in an insert"):
        machine.feed(_insert(b"1", TupleValue(ColumnKind.UNCHANGED_TOAST)))
    with pytest.raises(UnknownRelation):
        machine.feed(Insert(8, ()))
    with pytest.raises(OutOfOrder, match="closes a Begin announcing 10"):
        machine.feed(Commit(0, 11, 20, 0))
    tx = machine.feed(Commit(0, 10, 20, 0))
    assert tx is not None and tx.commit_lsn == 10 and tx.row_count == 0


def test_truncate_is_a_change_of_each_table_in_order_and_its_put_carries_what_followed() -> None:
    machine = TransactionAssembler()
    machine.feed(_relation())
    machine.feed(Begin(10, 0, 1))
    machine.feed(_insert(b"1", TupleValue(ColumnKind.TEXT, b"x")))
    machine.feed(Truncate(False, False, (7,)))
    machine.feed(_insert(b"2", TupleValue(ColumnKind.TEXT, b"y")))
    tx = machine.feed(Commit(0, 10, 20, 0))
    assert tx is not None
    assert [c.op for c in tx.changes["public/t"]] == [Op.INSERT, Op.TRUNCATE, Op.INSERT]
    put = TablePut.of(tx.changes["public/t"])
    assert put.truncate and put.changes == 3 and put.batch().column("new.id").to_pylist() == [2]
    assert not TablePut.of(tx.changes["public/t"][:1]).truncate


def test_descriptors_pair_old_and_new_keys_and_flag_every_value() -> None:
    machine = TransactionAssembler()
    machine.feed(_relation())
    machine.feed(Begin(10, 0, 1))
    machine.feed(_insert(b"1", TupleValue(ColumnKind.TEXT, b"x")))
    tx = machine.feed(Commit(0, 10, 20, 0))
    assert tx is not None
    image = tx.tables["public/t"]
    assert image.descriptors() == (ColumnDescriptor(role=0, name="id"), ColumnDescriptor(role=1, name="id"),
                                   ColumnDescriptor(role=3, name="v"), ColumnDescriptor(role=2, name="v"))
    assert image.batch(tx.changes["public/t"]).to_pylist() == [
        {"old.id": None, "new.id": 1, "v": "x", "changed.v": True}]


def test_a_column_whose_arrow_type_changed_or_a_changed_key_stops_the_stream() -> None:
    machine = TransactionAssembler()
    old = Relation(7, "public", "t", "d", (RelationColumn(True, "id", 20, -1), RelationColumn(False, "v", 23, -1)))
    machine.feed(old)
    machine.feed(Relation(7, "public", "t", "d", (*old.columns, RelationColumn(False, "w", 25, -1))))  # ADD COLUMN
    machine.feed(Relation(7, "public", "t", "d", old.columns[:1]))  # DROP COLUMN
    machine.feed(old)
    varchar = Relation(7, "public", "t", "d", (old.columns[0], RelationColumn(False, "s", 1043, 44)))
    machine.feed(varchar)
    machine.feed(Relation(7, "public", "t", "d", (old.columns[0], RelationColumn(False, "s", 1043, 84))))  # same Arrow type
    machine.feed(old)
    with pytest.raises(UnappliableSchemaChange, match=r"^\[PGOUTPUT_UNAPPLIABLE_SCHEMA_CHANGE\] table public/t: column v "
                       "changed from int32 to int64, which its Delta table cannot follow; start the table over"):
        machine.feed(Relation(7, "public", "t", "d", (old.columns[0], RelationColumn(False, "v", 20, -1))))
    with pytest.raises(UnappliableSchemaChange, match=r"the replica identity key changed from \['id'\] to \['v'\]"):
        machine.feed(Relation(7, "public", "t", "i", (RelationColumn(False, "id", 20, -1), RelationColumn(True, "v", 23, -1))))


def test_a_put_is_held_as_arrow_in_the_tables_latest_image() -> None:
    a = TableImage("public/t", (("id", pa.int64()),), (("v", pa.string()),))
    b = TableImage("public/t", (("id", pa.int64()),), (("v", pa.string()), ("w", pa.int32())))
    put = TablePut()
    for k in range(CHUNK_ROWS + 10):  # more than one chunk in the first image
        put.add(RowChange(a, Op.INSERT, None, (k,), ("x",), (True,)))
    put.add(RowChange(a, Op.UPDATE, (1,), (1,), (None,), (False,)))
    put.add(RowChange(b, Op.INSERT, None, (-1,), ("y", 7), (True, True)))  # after ADD COLUMN w
    batch = put.batch()
    assert batch.schema == b.schema() and batch.num_rows == CHUNK_ROWS + 12 and put.changes == CHUNK_ROWS + 12
    rows = batch.slice(CHUNK_ROWS + 9).to_pylist()
    assert [(r["new.id"], r["w"], r["changed.w"], r["changed.v"]) for r in rows] == [
        (CHUNK_ROWS + 9, None, True, True), (1, None, False, False), (-1, 7, True, True)]
    put.add(RowChange.truncate(b))
    assert put.truncate and put.batch().num_rows == 0


def test_an_open_transactions_changes_are_handed_over_and_its_commit_counts_them() -> None:
    machine = TransactionAssembler()
    machine.feed(_relation())
    assert not machine.open
    machine.feed(Begin(10, 0, 1))
    for key in (b"1", b"2", b"3"):
        machine.feed(_insert(key, TupleValue(ColumnKind.NULL)))
    assert machine.open
    taken = machine.take_open()
    assert [c.new_key for c in taken["public/t"]] == [(1,), (2,), (3,)]
    machine.feed(_insert(b"4", TupleValue(ColumnKind.NULL)))
    tx = machine.feed(Commit(0, 10, 20, 0))
    assert tx is not None and tx.spilled_rows == 3 and tx.row_count == 4
    assert [c.new_key for c in tx.changes["public/t"]] == [(4,)] and "public/t" in tx.tables
    machine.feed(Begin(30, 0, 2))
    after = machine.feed(Commit(0, 30, 40, 0))
    assert after is not None and after.spilled_rows == 0


def test_the_spill_budget_counts_bytes_until_released() -> None:
    budget = SpillBudget(100)
    assert not budget.note(60) and budget.note(40)
    budget.released()
    assert not budget.note(99)
    with pytest.raises(ValueError, match="positive"):
        SpillBudget(0)
