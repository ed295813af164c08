"""Sync schema: column descriptors validated against an Arrow schema, with Seafowl's error texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from spec.sync.errors import PartlyNullKey, SyncSchemaError, TableSchemaMismatch
from spec.sync.messages import ColumnDescriptor, ColumnRole

_RUST_TYPE_NAMES = {
    pa.bool_(): "Boolean",
    pa.int8(): "Int8",
    pa.int16(): "Int16",
    pa.int32(): "Int32",
    pa.int64(): "Int64",
    pa.uint8(): "UInt8",
    pa.uint16(): "UInt16",
    pa.uint32(): "UInt32",
    pa.uint64(): "UInt64",
    pa.float16(): "Float16",
    pa.float32(): "Float32",
    pa.float64(): "Float64",
    pa.string(): "Utf8",
    pa.large_string(): "LargeUtf8",
    pa.binary(): "Binary",
    pa.large_binary(): "LargeBinary",
    pa.date32(): "Date32",
    pa.date64(): "Date64",
    pa.null(): "Null",
}


def rust_type_name(t: pa.DataType) -> str:
    """The arrow-rs ``Display`` of a type, as it appears in Seafowl's messages."""
    return _RUST_TYPE_NAMES.get(t, str(t))


def _flattened_count(fields: Sequence[pa.Field]) -> int:
    """Field count as arrow-rs ``flattened_fields`` (struct children included)."""
    n = 0
    for f in fields:
        n += 1
        if pa.types.is_struct(f.type):
            n += _flattened_count([f.type.field(i) for i in range(f.type.num_fields)])
    return n


def _nested_note(schema: pa.Schema) -> str:
    """Why a count of descriptors may be off: a struct's children count as columns (Seafowl's text
    alone would hide that the store refuses nested columns anyway)."""
    nested = next((f for f in schema if pa.types.is_struct(f.type)), None)
    if nested is None:
        return ""
    return (f" (column {nested.name!r} has the nested type {nested.type}: its children count as columns, "
            "and the sync store does not write nested types)")


@dataclass(frozen=True)
class SyncColumn:
    """A batch column: role, logical (descriptor) name and physical Arrow field."""

    role: ColumnRole
    name: str
    field: pa.Field


@dataclass(frozen=True)
class SyncSchema:
    """A validated pairing of column descriptors and a batch schema."""

    columns: tuple[SyncColumn, ...]
    arrow_schema: pa.Schema

    @classmethod
    def validate(cls, descriptors: Sequence[ColumnDescriptor], schema: pa.Schema) -> SyncSchema:
        """Check descriptors against ``schema`` in Seafowl's order; raise SyncSchemaError."""
        if len(descriptors) != _flattened_count(list(schema)):
            raise SyncSchemaError("Column descriptors do not match the schema" + _nested_note(schema))
        old_pks: set[tuple[str, pa.DataType]] = set()
        new_pks: set[tuple[str, pa.DataType]] = set()
        for desc, fld in zip(descriptors, schema):
            if desc.role not in ColumnRole._value2member_map_:
                raise SyncSchemaError(f"Failed parsing role: UnknownEnumValue({desc.role})")
            role = ColumnRole(desc.role)
            if role is ColumnRole.OLD_PK:
                old_pks.add((desc.name, fld.type))
            elif role is ColumnRole.NEW_PK:
                new_pks.add((desc.name, fld.type))
            elif role is ColumnRole.CHANGED:
                if fld.type != pa.bool_():
                    raise SyncSchemaError(
                        f"Field for column {fld.name} with `Changed` role must be of type boolean, "
                        f"got {rust_type_name(fld.type)}"
                    )
                if not any(o.name == desc.name and o.role == ColumnRole.VALUE for o in descriptors):
                    raise SyncSchemaError(
                        f"Column with `Changed` role must point to an existing column with `Value` role: {desc.name}"
                    )
        if not old_pks or not new_pks:
            raise SyncSchemaError("Change requested but batches do not contain old/new PK columns")
        if old_pks != new_pks:
            raise SyncSchemaError("Change requested but old and new PK columns are not the same")
        columns = tuple(SyncColumn(ColumnRole(d.role), d.name, f) for d, f in zip(descriptors, schema))
        return cls(columns, schema)

    def by_role(self, role: ColumnRole) -> list[SyncColumn]:
        """Columns with ``role``, in batch order."""
        return [c for c in self.columns if c.role is role]

    def column(self, name: str, role: ColumnRole) -> SyncColumn | None:
        """The column with logical ``name`` and ``role``, if any."""
        return next((c for c in self.columns if c.name == name and c.role is role), None)

    @property
    def pk_names(self) -> list[str]:
        """Logical primary-key column names, in NEW_PK batch order."""
        return [c.name for c in self.by_role(ColumnRole.NEW_PK)]

    def table_schema(self) -> pa.Schema:
        """Schema of the table this change creates: NEW_PK and VALUE columns under logical names."""
        return pa.schema(
            [c.field.with_name(c.name) for c in self.columns if c.role in (ColumnRole.NEW_PK, ColumnRole.VALUE)]
        )

    def check_keys(self, batch: pa.Table) -> None:
        """Raise PartlyNullKey for a row whose old or new key is null in some key columns only.

        All-null keys carry meaning (insert, delete, temporary row); a partly null one
        names no row and could not be located in the table.
        """
        for role, label in ((ColumnRole.OLD_PK, "old"), (ColumnRole.NEW_PK, "new")):
            cols = self.by_role(role)
            if len(cols) < 2:
                continue
            nulls = [pc.is_null(batch.column(c.field.name)) for c in cols]
            some, every = nulls[0], nulls[0]
            for n in nulls[1:]:
                some, every = pc.or_(some, n), pc.and_(every, n)
            partly = pc.and_(some, pc.invert(every))
            if pc.any(partly).as_py():
                raise PartlyNullKey(pc.index(partly, True).as_py(), label)

    def descriptors(self) -> tuple[ColumnDescriptor, ...]:
        """The column descriptors this schema was built from."""
        return tuple(ColumnDescriptor(role=int(c.role), name=c.name) for c in self.columns)


@dataclass(frozen=True)
class TableShape:
    """Columns of a table (logical name -> the type name its storage keeps) and its key columns.

    ``keys`` is None when the storage does not say which columns are keys.
    """

    columns: Mapping[str, str]
    keys: tuple[str, ...] | None


def check_table_fit(table: str, put: TableShape, existing: TableShape) -> TableShape:
    """The table's shape once a put shaped ``put`` is applied to ``existing``; raise TableSchemaMismatch
    if it cannot be.

    Key columns must be the same; every column the put writes that the table has must have the
    same type.  A put may leave value columns out (their stored values are kept), and it may
    bring value columns the table lacks (ours: Seafowl refuses them): the table gains them, after
    its own, and the rows it held have none (null), as a Postgres ``ADD COLUMN`` without a
    default leaves the rows it held.  A column named as one of the table's in another case is
    neither: a Delta table's column names are case-insensitive, so it could never be added (a put
    taken with it would never land).
    """
    problems: list[str] = []
    if existing.keys is not None and put.keys is not None and sorted(put.keys) != sorted(existing.keys):
        problems.append(f"key columns {list(put.keys)} differ from the table's {list(existing.keys)}")
    lowered = {name.lower(): name for name in existing.columns}
    for name, kind in put.columns.items():
        stored = existing.columns.get(name)
        if stored is not None and stored != kind:
            problems.append(f"column {name} is {kind} in the put but {stored} in the table")
        elif stored is None and name.lower() in lowered:
            problems.append(f"column {name} is the table's {lowered[name.lower()]} in another case "
                            "(a Delta table's column names are case-insensitive)")
    if problems:
        raise TableSchemaMismatch(table, problems)
    added = {name: kind for name, kind in put.columns.items() if name not in existing.columns}
    return TableShape({**existing.columns, **added}, existing.keys or put.keys)
