"""Sync cases derived from the store's limits and the table's schema rules (issue 43), each answer computed by the
spec as it is:

- **Row groups** (``spec.sync.writer.RowGroupLimits``, capability ``row-groups``): a flush's rows, in key order,
  cut into row groups at most ``max_rows`` rows and ``max_bytes`` bytes (``spec.sync.writer.row_ends``), never empty.
  Each limit at exactly its bound, one under and one over; a row of exactly ``max_bytes`` and one a byte over it; both
  limits at once, each the one reached first. The answer is what a reader of the Delta table sees: its files' row
  groups, the keys of each in order.
- **A table's schema** (``spec.sync.schema.check_table_fit``): a table written, then a put with a column added,
  left out, in another order, of another type (wider, narrower), renamed in case, with its nullability changed, a
  key added, left out or in another order: the refusal (its problems as the spec words them) or the table's
  columns in order and its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from conformance.framework import CaseContext, Verdict
from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.writer import RowGroupLimits, row_ends

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

FIXED_BYTES: Final = 12
"""What ``row_ends`` counts for a row of a table ``id int64, v string`` besides the value's characters (8 + 4)."""


@dataclass(frozen=True)
class RowGroupScenario:
    """One flush into a fresh table under row-group limits: the lengths of its rows' values, in key order."""

    label: str
    max_rows: int
    max_bytes: int
    lengths: tuple[int, ...]


def _bytes(*lengths: int) -> int:
    return sum(FIXED_BYTES + n for n in lengths)


ROWS: Final = 3
"""The row bound the row-count scenarios set (the byte bound far above them)."""
WIDE: Final = 1 << 20

ROW_GROUP_SCENARIOS: Final = (
    RowGroupScenario("one row under max_rows", ROWS, WIDE, (1,) * (ROWS - 1)),
    RowGroupScenario("exactly max_rows", ROWS, WIDE, (1,) * ROWS),
    RowGroupScenario("one row over max_rows", ROWS, WIDE, (1,) * (ROWS + 1)),
    RowGroupScenario("twice max_rows and one", ROWS, WIDE, (1,) * (2 * ROWS + 1)),
    RowGroupScenario("max_rows of one", 1, WIDE, (1, 2, 3)),
    RowGroupScenario("two rows at exactly max_bytes", 100, _bytes(3, 5), (3, 5, 3, 5, 3)),
    RowGroupScenario("two rows a byte under max_bytes", 100, _bytes(3, 5) + 1, (3, 5, 3, 5, 3)),
    RowGroupScenario("two rows a byte over max_bytes", 100, _bytes(3, 5) - 1, (3, 5, 3, 5, 3)),
    RowGroupScenario("a row of exactly max_bytes between pairs", 100, _bytes(1, 1), (1, 1, 14, 1, 1)),
    RowGroupScenario("a row a byte over max_bytes between pairs", 100, _bytes(1, 1), (1, 1, 15, 1, 1)),
    RowGroupScenario("a row over max_bytes first and last", 100, _bytes(1, 1), (15, 1, 1, 15)),
    RowGroupScenario("max_rows reached before max_bytes", 2, _bytes(1, 1, 1), (1, 1, 1, 1, 1)),
    RowGroupScenario("max_bytes reached before max_rows", 4, _bytes(1, 1), (1, 1, 1, 1, 1)),
    RowGroupScenario("both at once", 2, _bytes(1, 1), (1, 1, 1, 1, 1)),
)


def expected_row_groups(scenario: RowGroupScenario) -> list[list[int]]:
    """The keys of each row group the spec cuts the scenario's rows into (keys 0, 1, ... in key order)."""
    rows = pa.table({"id": pa.array(range(len(scenario.lengths)), pa.int64()),
                     "v": pa.array(["v" * n for n in scenario.lengths], pa.string())})
    order = pa.array(range(rows.num_rows), pa.int64())
    limits = RowGroupLimits(scenario.max_rows, scenario.max_bytes)
    return [list(range(start, end)) for start, end in limits.cut(row_ends(rows, order))]


def stored_row_groups(t: SyncTarget, path: str) -> list[list[list[Any]]]:
    """The keys of each row group of each live data file of the table, files in the order of their first key."""
    from deltalake import DeltaTable

    files = []
    for uri in DeltaTable(f"{t.store}/{path}").file_uris():
        parquet = pq.ParquetFile(uri.removeprefix("file://"))
        files.append([parquet.read_row_group(i, columns=["id"]).column("id").to_pylist()
                      for i in range(parquet.num_row_groups)])
    return sorted(files, key=lambda groups: (groups[0][:1] if groups else [], len(groups)))


def row_groups_at_their_limits(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Each scenario's rows in one put to a fresh table, flushed under its limits (``SETTINGS row_group_max_rows=R
    row_group_max_bytes=B``): the table holds one file whose row groups are the spec's cut, keys in order."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    want, got = [], []
    try:
        for scenario in ROW_GROUP_SCENARIOS:
            t.command(f"SETTINGS row_group_max_rows={scenario.max_rows} row_group_max_bytes={scenario.max_bytes}")
            origin, path = _ids()
            batch = pa.table({"old_id": pa.nulls(len(scenario.lengths), pa.int64()),
                              "new_id": pa.array(range(len(scenario.lengths)), pa.int64()),
                              "v": pa.array(["v" * n for n in scenario.lengths], pa.string())})
            out = t.put(ctx, _cmd(path, origin, 1), batch)
            want.append(f"{scenario.label}: {[expected_row_groups(scenario)]}")
            got.append(f"{scenario.label}: {stored_row_groups(t, path) if out.error is None else _numbers(out)}")
    finally:
        t.command("SETTINGS")
    return Verdict(want == got, "; ".join(want), "; ".join(got))


Column = tuple[int, str, pa.Field]
"""One column of a put: its role (``spec.sync.messages.ColumnRole`` by number), its descriptor name, its Arrow field."""


OLD, NEW, VALUE = int(ColumnRole.OLD_PK), int(ColumnRole.NEW_PK), int(ColumnRole.VALUE)


def _key(name: str, kind: pa.DataType = pa.int64()) -> tuple[Column, Column]:
    return (OLD, name, pa.field(f"old_{name}", kind)), (NEW, name, pa.field(f"new_{name}", kind))


def _value(name: str, kind: pa.DataType = pa.string(), nullable: bool = True) -> Column:
    return VALUE, name, pa.field(name, kind, nullable)


TABLE_COLUMNS: Final[tuple[Column, ...]] = (*_key("id"), _value("v"), _value("n", pa.int32()))
"""The table every schema scenario writes first: key ``id``, values ``v`` (a string) and ``n`` (a 32-bit integer)."""
TWO_KEY_TABLE: Final[tuple[Column, ...]] = (*_key("id"), *_key("k"), _value("v"))


@dataclass(frozen=True)
class SchemaScenario:
    """A put's columns against the table written first by ``table``'s columns."""

    label: str
    put: tuple[Column, ...]
    table: tuple[Column, ...] = TABLE_COLUMNS


def _reordered(columns: Sequence[Column]) -> tuple[Column, ...]:
    return tuple(reversed(columns))


SCHEMA_SCENARIOS: Final = (
    SchemaScenario("the same columns", TABLE_COLUMNS),
    SchemaScenario("a value column added", (*TABLE_COLUMNS, _value("w"))),
    SchemaScenario("two value columns added", (_value("x"), *TABLE_COLUMNS, _value("w"))),
    SchemaScenario("a value column left out", (*_key("id"), _value("v"))),
    SchemaScenario("every value column left out", _key("id")),
    SchemaScenario("the columns in another order", _reordered(TABLE_COLUMNS)),
    SchemaScenario("one left out, one added, in another order", (_value("w"), _value("n", pa.int32()), *_key("id"))),
    SchemaScenario("a value column widened", (*_key("id"), _value("v"), _value("n", pa.int64()))),
    SchemaScenario("a value column narrowed", (*_key("id"), _value("v"), _value("n", pa.int16()))),
    SchemaScenario("a value column of another kind", (*_key("id"), _value("v", pa.int32()), _value("n", pa.int32()))),
    SchemaScenario("two value columns of other types", (*_key("id"), _value("v", pa.int32()), _value("n", pa.string()))),
    SchemaScenario("a value column renamed in case", (*_key("id"), _value("V"), _value("n", pa.int32()))),
    SchemaScenario("a value column not nullable", (*_key("id"), _value("v", nullable=False), _value("n", pa.int32()))),
    SchemaScenario("the key widened", (*_key("id", pa.int32()), _value("v"), _value("n", pa.int32()))),
    SchemaScenario("a key column added", (*_key("id"), *_key("k"), _value("v"), _value("n", pa.int32()))),
    SchemaScenario("the key renamed", (*_key("jd"), _value("v"), _value("n", pa.int32()))),
    SchemaScenario("the key renamed and a value of another type", (*_key("jd"), _value("v", pa.int64()))),
    SchemaScenario("two keys in another order", (*_key("k"), *_key("id"), _value("v")), TWO_KEY_TABLE),
    SchemaScenario("a key column left out", (*_key("id"), _value("v")), TWO_KEY_TABLE),
)


def _put_parts(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> tuple[tuple[Any, ...], pa.Table]:
    """The descriptors and the batch of a put of ``rows`` (each: old and new key values, then value columns, by
    descriptor name; ``old_``/``new_`` prefixed for keys)."""
    descriptors = tuple(ColumnDescriptor(role=ColumnRole(role), name=name) for role, name, _ in columns)
    arrays = []
    for role, name, fld in columns:
        prefix = "" if fld.name == name else ("old_" if role == OLD else "new_")
        arrays.append(pa.array([row.get(prefix + name) for row in rows], fld.type))
    return descriptors, pa.Table.from_arrays(arrays, schema=pa.schema([f for _, _, f in columns]))


def _values(columns: Sequence[Column], key: int, tag: str) -> dict[str, Any]:
    """A row's value of every value column: ``tag`` and the key as text, or the key as a number."""
    return {name: (f"{tag}{key}" if pa.types.is_string(fld.type) else key)
            for role, name, fld in columns if role == VALUE}


def _keys(columns: Sequence[Column], key: int, old: bool) -> dict[str, Any]:
    names = [name for role, name, _ in columns if role == NEW]
    return ({f"old_{n}": key for n in names} if old else {}) | {f"new_{n}": key for n in names}


def expected_fit(path: str, scenario: SchemaScenario) -> tuple[str | None, list[str], list[dict[str, Any]]]:
    """The spec's answer to the scenario: the refusal's text (None: fits), the table's columns in order and its rows
    (key 1 written first, then updated by the put, which also inserts key 2; a column a put leaves out keeps its
    stored value, or none)."""
    from reference.sync.store import storable_shape
    from spec.sync.errors import TableSchemaMismatch
    from spec.sync.schema import SyncSchema, check_table_fit

    first_desc, first = _put_parts(scenario.table, [_keys(scenario.table, 1, False) | _values(scenario.table, 1, "a")])
    put_desc, put = _put_parts(scenario.put, [])
    existing = storable_shape(SyncSchema.validate(first_desc, first.schema))
    stored = {name: value for name, value in first.to_pylist()[0].items()}
    stored_row = {name: stored[f"new_{name}" if f"new_{name}" in stored else name] for name in existing.columns}
    try:
        shape = check_table_fit(path, storable_shape(SyncSchema.validate(put_desc, put.schema)), existing)
    except TableSchemaMismatch as refusal:
        return refusal.message, list(existing.columns), [stored_row]
    written = _values(scenario.put, 1, "b"), _values(scenario.put, 2, "b")
    keys = [name for role, name, _ in scenario.put if role == NEW]
    rows = [{c: stored_row.get(c) for c in shape.columns} | written[0],
            {c: None for c in shape.columns} | {k: 2 for k in keys} | written[1]]
    return None, list(shape.columns), rows


def table_schema_fit(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Each scenario: a table written (and flushed), then the put: refused with the spec's problems and the table as
    it was, or the table's columns in the spec's order and its rows as the put leaves them."""
    return _schema_fit(t, ctx, pending=False)


def pending_table_schema_fit(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """The same scenarios against a table whose first put is still pending (its shape the pending one), both flushed
    together after: the same answers."""
    return _schema_fit(t, ctx, pending=True)


def _schema_fit(t: SyncTarget, ctx: CaseContext, pending: bool) -> Verdict:
    from contextlib import nullcontext

    from deltalake import DeltaTable

    from conformance.sync.suite import _cmd, _ids, _numbers, _policy

    want, got = [], []
    for scenario in SCHEMA_SCENARIOS:
        origin, path = _ids()
        refusal, columns, rows = expected_fit(path, scenario)
        with _policy(t) if pending else nullcontext():
            desc, batch = _put_parts(scenario.table, [_keys(scenario.table, 1, False) | _values(scenario.table, 1, "a")])
            first = t.put(ctx, _cmd(path, origin, 1, desc), batch)
            desc, batch = _put_parts(scenario.put, [_keys(scenario.put, 1, True) | _values(scenario.put, 1, "b"),
                                                    _keys(scenario.put, 2, False) | _values(scenario.put, 2, "b")])
            second = t.put(ctx, _cmd(path, origin, 2, desc), batch)
        answer = "taken" if second.error is None else _numbers(second)
        if refusal is not None and second.error is not None and refusal in second.error_text:
            answer = f"refused: {refusal}"
        have = DeltaTable(f"{t.store}/{path}").schema().to_arrow().names if first.error is None else []
        stored = sorted(t.table(path), key=lambda r: [r.get(c) for c in columns]) if first.error is None else []
        want.append(f"{scenario.label}: {'taken' if refusal is None else f'refused: {refusal}'}, columns {columns}, "
                    f"rows {rows}")
        got.append(f"{scenario.label}: {answer}, columns {list(have)}, rows {stored}")
    return Verdict(want == got, "; ".join(want), "; ".join(got))
