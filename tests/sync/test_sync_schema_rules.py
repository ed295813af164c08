"""Schema rules a put must meet before any of its rows is looked at: matching key columns on both sides,
boolean CHANGED flags, struct children counted, keys that are wholly null or wholly set, and a put that
fits the stored table."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spec.sync.errors import PartlyNullKey, SyncSchemaError, TableSchemaMismatch
from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.schema import SyncSchema, TableShape, check_table_fit

OLD, NEW, CHANGED, VALUE = ColumnRole.OLD_PK, ColumnRole.NEW_PK, ColumnRole.CHANGED, ColumnRole.VALUE


def validate(columns: list[tuple[ColumnRole, str, pa.DataType]]) -> SyncSchema:
    descriptors = [ColumnDescriptor(role=int(role), name=name) for role, name, _ in columns]
    schema = pa.schema([pa.field(f"c{i}", t) for i, (_, _, t) in enumerate(columns)])
    return SyncSchema.validate(descriptors, schema)


@pytest.mark.parametrize("columns", [
    [(OLD, "id", pa.int64()), (NEW, "key", pa.int64())],
    [(OLD, "id", pa.int32()), (NEW, "id", pa.int64())],
    [(NEW, "id", pa.int64()), (VALUE, "v", pa.int64())],
    [(OLD, "id", pa.int64()), (VALUE, "v", pa.int64())],
], ids=["other name", "other type", "no old key", "no new key"])
def test_old_and_new_keys_must_name_the_same_columns(columns: list[tuple[ColumnRole, str, pa.DataType]]) -> None:
    with pytest.raises(SyncSchemaError):
        validate(columns)


def test_a_changed_flag_must_be_boolean() -> None:
    with pytest.raises(SyncSchemaError, match="must be of type boolean"):
        validate([(OLD, "id", pa.int64()), (NEW, "id", pa.int64()), (VALUE, "v", pa.int64()),
                  (CHANGED, "v", pa.int8())])


def test_struct_children_count_as_columns() -> None:
    struct = pa.struct([pa.field("a", pa.int64())])
    with pytest.raises(SyncSchemaError, match="do not match the schema"):
        validate([(OLD, "id", pa.int64()), (NEW, "id", pa.int64()), (VALUE, "s", struct)])


def test_a_two_column_key_may_not_be_partly_null() -> None:
    schema = validate([(OLD, "a", pa.int64()), (OLD, "b", pa.int64()), (NEW, "a", pa.int64()),
                       (NEW, "b", pa.int64())])
    batch = pa.table({"c0": [None], "c1": [None], "c2": [1], "c3": [None]}, schema=schema.arrow_schema)
    with pytest.raises(PartlyNullKey):
        schema.check_keys(batch)


def test_a_put_must_be_keyed_like_the_table() -> None:
    existing = TableShape(columns={"a": "Int64", "b": "Int64", "v": "Utf8"}, keys=("a", "b"))
    check_table_fit("t", TableShape(columns={"b": "Int64", "a": "Int64"}, keys=("b", "a")), existing)
    with pytest.raises(TableSchemaMismatch):
        check_table_fit("t", TableShape(columns={"a": "Int64", "v": "Utf8"}, keys=("a",)), existing)


def test_a_put_may_bring_value_columns_the_table_gains() -> None:
    existing = TableShape(columns={"a": "Int64", "v": "Utf8"}, keys=("a",))
    assert check_table_fit("t", TableShape(columns={"a": "Int64", "w": "Int32"}, keys=("a",)), existing) == TableShape(
        columns={"a": "Int64", "v": "Utf8", "w": "Int32"}, keys=("a",))
    with pytest.raises(TableSchemaMismatch, match="column v is Int64 in the put but Utf8 in the table"):
        check_table_fit("t", TableShape(columns={"a": "Int64", "v": "Int64"}, keys=("a",)), existing)
