"""Sync schema: column descriptors validated against an Arrow schema, with Seafowl's error texts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from spec.sync.errors import SyncSchemaError
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
            raise SyncSchemaError("Column descriptors do not match the schema")
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

    def descriptors(self) -> tuple[ColumnDescriptor, ...]:
        """The column descriptors this schema was built from."""
        return tuple(ColumnDescriptor(int(c.role), c.name) for c in self.columns)
