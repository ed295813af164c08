"""Change squashing and application as pure functions over Arrow tables.

``squash`` collapses every key chain of a change batch into one row, exactly as
Seafowl's ``squash_batches``: old key from the chain's first row, new key and
plain VALUE columns from its last row, each CHANGED/VALUE pair from the last row
where it changed; a chain that starts as an insert and ends as a delete vanishes.

``apply_squashed`` applies a squashed batch to stored rows *simultaneously* (every
chain reads the stored rows as they were, as Seafowl's join does), keyed by
primary key so that re-applying a change overwrites instead of duplicating.
Because of that, squashed batches are merged with ``merge_squashed``, never by
squashing them again as a stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spec.sync.messages import ColumnRole
from spec.sync.schema import SyncSchema
from spec.sync.writer import PendingItem

Key = tuple[Any, ...]
T = TypeVar("T")


def _keys(table: pa.Table, schema: SyncSchema, role: ColumnRole) -> list[Key | None]:
    """Per-row key tuples for the OLD_PK or NEW_PK columns (in logical-name order); all-NULL is None."""
    cols = [schema.column(name, role) for name in schema.pk_names]
    values = [table.column(c.field.name).to_pylist() for c in cols if c is not None]
    out: list[Key | None] = []
    for row in zip(*values):
        out.append(None if all(v is None for v in row) else tuple(row))
    return out


def _key_columns(table: pa.Table, schema: SyncSchema, role: ColumnRole) -> list[pa.ChunkedArray]:
    cols = [schema.column(name, role) for name in schema.pk_names]
    return [table.column(c.field.name) for c in cols if c is not None]


def _all_null(columns: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray | pa.Array:
    """Per row: every key column is null (no key); raises _PartlyNull for a mixed row."""
    nulls = [pc.is_null(c) for c in columns]
    every, some = nulls[0], nulls[0]
    for n in nulls[1:]:
        every, some = pc.and_(every, n), pc.or_(some, n)
    if pc.any(pc.xor(every, some)).as_py():
        raise _PartlyNull()
    return every


class _PartlyNull(Exception):
    """A key with some null columns: only the row-by-row path handles it."""


def _keyed(columns: Sequence[pa.ChunkedArray], present: pa.ChunkedArray | pa.Array, names: Sequence[str]) -> pa.Table:
    """Rows (with their index) whose key is present, key columns renamed to ``names``."""
    index = pa.array(range(len(present)), pa.int64())
    table = pa.table({**{n: c for n, c in zip(names, columns)}, "__row": index})
    return table.filter(present)


def _chainless(changes: pa.Table, schema: SyncSchema) -> pa.ChunkedArray | pa.Array | None:
    """The temporary-row mask when no row continues another's chain; None when some may.

    Row r continues a chain only if an earlier row produced r's old key, so without such
    a pair every row is a chain of its own and squashing only drops temporary rows.
    """
    old_cols = _key_columns(changes, schema, ColumnRole.OLD_PK)
    new_cols = _key_columns(changes, schema, ColumnRole.NEW_PK)
    try:
        no_old, no_new = _all_null(old_cols), _all_null(new_cols)
    except _PartlyNull:
        return None
    names = [f"k{i}" for i in range(len(old_cols))]
    consumed = _keyed(old_cols, pc.invert(no_old), names)
    produced = _keyed(new_cols, pc.invert(no_new), names) if consumed.num_rows else consumed
    if produced.num_rows and consumed.num_rows:
        try:
            pairs = produced.join(consumed, keys=names, right_suffix="_old")
        except pa.ArrowException:
            return None
        if pc.any(pc.less(pairs["__row"], pairs["__row_old"])).as_py():
            return None
    return pc.and_(no_old, no_new)


def _squash(changes: pa.Table, schema: SyncSchema, segments: Sequence[int]) -> pa.Table:
    """Collapse key chains of ``changes``, read as consecutive segments of simultaneous rows.

    A row continues the chain whose latest row, in an *earlier* segment, produced its old
    key: keys a segment produces become linkable only once the segment ends, because its
    rows all read the rows as they were before it.  One-row segments are a plain stream.
    A batch in which no row continues another is squashed with Arrow kernels alone.
    """
    if changes.num_rows and (temporary_rows := _chainless(changes, schema)) is not None:
        return _without(changes, temporary_rows)
    return _squash_by_rows(changes, schema, segments)


def _without(table: pa.Table, mask: pa.ChunkedArray | pa.Array) -> pa.Table:
    """``table`` without the rows ``mask`` marks; ``table`` itself (no copy) when it marks none."""
    return table.filter(pc.invert(mask)) if pc.any(mask).as_py() else table


def _squash_by_rows(changes: pa.Table, schema: SyncSchema, segments: Sequence[int]) -> pa.Table:
    """``_squash`` row by row: chains are followed in Python."""
    old_keys = _keys(changes, schema, ColumnRole.OLD_PK)
    new_keys = _keys(changes, schema, ColumnRole.NEW_PK)
    changed_cols = schema.by_role(ColumnRole.CHANGED)
    changed = [changes.column(c.field.name).to_pylist() for c in changed_cols]

    # Per chain: [first row, last row, last-changed row per CHANGED column].
    chains: list[list[Any]] = []
    temporary: set[int] = set()
    open_chains: dict[Key, int] = {}
    start = 0
    for length in segments:
        opened: list[tuple[Key, int]] = []
        for row in range(start, start + length):
            old, new = old_keys[row], new_keys[row]
            chain_id = open_chains.pop(old, None) if old is not None else None
            if chain_id is None:
                chain_id = len(chains)
                chains.append([row, row, [row] * len(changed)])
                if new is None and old is None:
                    temporary.add(chain_id)
            else:
                chain = chains[chain_id]
                chain[1] = row
                for i, flags in enumerate(changed):
                    if flags[row]:
                        chain[2][i] = row
                if new is None and old_keys[chain[0]] is None:
                    temporary.add(chain_id)
            if new is not None:
                opened.append((new, chain_id))
        open_chains.update(opened)
        start += length

    live = [c for i, c in enumerate(chains) if i not in temporary]
    first_rows = pa.array([c[0] for c in live], pa.int64())
    last_rows = pa.array([c[1] for c in live], pa.int64())
    changed_rows = {
        col.name: pa.array([c[2][i] for c in live], pa.int64()) for i, col in enumerate(changed_cols)
    }
    arrays = []
    for col in schema.columns:
        if col.role is ColumnRole.OLD_PK:
            idx = first_rows
        elif col.role in (ColumnRole.CHANGED, ColumnRole.VALUE) and col.name in changed_rows:
            idx = changed_rows[col.name]
        else:
            idx = last_rows
        arrays.append(changes.column(col.field.name).take(idx))
    return pa.Table.from_arrays(arrays, schema=changes.schema)


def squash(changes: pa.Table, schema: SyncSchema) -> pa.Table:
    """Collapse key chains of ``changes`` (one batch, in arrival order) into one row per chain."""
    return _squash(changes, schema, [1] * changes.num_rows)


def squash_all(batches: Sequence[pa.Table], schema: SyncSchema) -> pa.Table:
    """Squash several batches sharing ``schema`` as one stream."""
    return squash(pa.concat_tables([b.cast(schema.arrow_schema) for b in batches]), schema)


def merge_squashed(batches: Sequence[pa.Table], schema: SyncSchema) -> pa.Table:
    """One squashed batch with the effect of applying the squashed ``batches`` in order.

    Squashing their concatenation as a stream would be wrong: a squashed batch's rows are
    simultaneous, so a row may name a key that another row of the *same* batch produces
    (a key swap, a delete and a move into the freed key) and must not continue that chain.
    """
    table = pa.concat_tables([b.cast(schema.arrow_schema) for b in batches])
    return _squash(table, schema, [b.num_rows for b in batches])


def _full_value_sources(schema: SyncSchema) -> dict[str, str]:
    """Table column -> the change column that writes its whole value (new keys and values)."""
    return {c.name: c.field.name for c in schema.columns if c.role in (ColumnRole.NEW_PK, ColumnRole.VALUE)}


def needs_stored_values(schema: SyncSchema, table_columns: Sequence[str]) -> bool:
    """Whether applying changes of ``schema`` reads stored values other than the keys.

    They do not when they carry every column of the table and have no CHANGED column: every
    row they touch is then replaced or deleted whole, so only which keys are stored matters.
    """
    return bool(schema.by_role(ColumnRole.CHANGED)) or not set(table_columns) <= _full_value_sources(schema).keys()


def _apply_full_values(stored: pa.Table, changes: pa.Table, schema: SyncSchema) -> pa.Table | None:
    """``apply_squashed`` with Arrow kernels when no stored value is needed; None otherwise.

    That holds when ``needs_stored_values`` is false and the stored keys are unique: the result
    is the stored rows under no old or new key of the changes, then the changes' rows that have a
    new key, one per key (``_last_per_key``).  Rows are copied only where some are left out.
    """
    if needs_stored_values(schema, stored.schema.names):
        return None
    source = _full_value_sources(schema)
    pk = schema.pk_names
    old_cols = _key_columns(changes, schema, ColumnRole.OLD_PK)
    new_cols = _key_columns(changes, schema, ColumnRole.NEW_PK)
    try:
        no_old, no_new = _all_null(old_cols), _all_null(new_cols)
        _all_null([stored.column(n) for n in pk])
        with_new_key = _without(changes, no_new)
        written = _last_per_key(with_new_key, _key_columns(with_new_key, schema, ColumnRole.NEW_PK))
        rows = pa.table({n: written.column(source[n]) for n in stored.schema.names}).cast(stored.schema)
        touched = [
            pa.chunked_array([*old.filter(pc.invert(no_old)).chunks, *new.filter(pc.invert(no_new)).chunks],
                             old.type).cast(stored.schema.field(name).type)
            for old, new, name in zip(old_cols, new_cols, pk)
        ]
        kept = _untouched(stored, pk, touched)
    except (_PartlyNull, pa.ArrowException):
        return None
    if kept is None:
        return None
    return pa.concat_tables([stored.take(kept), rows]) if stored.num_rows else rows


def _sorted(columns: Sequence[pa.ChunkedArray], then: pa.Array | None = None) -> pa.Array:
    """The stable sort order of rows by ``columns`` (NULLs last), then by ``then``: a sort, not a hash
    table, which with Arrow's kernels costs several times the keys' bytes."""
    table = pa.table({**{f"k{i}": c for i, c in enumerate(columns)}, **({"then": then} if then is not None else {})})
    order: pa.Array = pc.sort_indices(table, sort_keys=[(name, "ascending", "at_end") for name in table.column_names])
    return order


def _same_as_next(columns: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row but the last, whether the next row holds the same key (NULL the same as NULL)."""
    same = np.ones(max(len(columns[0]) - 1, 0), dtype=bool)
    for column in columns:
        after, before = column.slice(1), column.slice(0, len(column) - 1)
        equal = pc.or_(pc.fill_null(pc.equal(after, before), False), pc.and_(pc.is_null(after), pc.is_null(before)))
        same &= np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)
    return same


def sorted_distinct(values: pa.ChunkedArray) -> pa.Array:
    """The distinct ``values``, sorted, NULL last (once), found by a sort."""
    if not len(values):
        return values.combine_chunks()
    ordered = values.take(_sorted([values]))
    distinct: pa.Array = ordered.filter(pa.array(np.insert(~_same_as_next([ordered]), 0, True))).combine_chunks()
    return distinct


def _last_per_key(rows: pa.Table, keys: Sequence[pa.ChunkedArray]) -> pa.Table:
    """One row per key, as ``_apply_by_rows`` writes them: at the place of the key's first row, with
    the values of its last (a key written twice, by a replayed insert, is overwritten); ``rows``
    itself when its keys are distinct."""
    if rows.num_rows < 2:
        return rows
    order = _sorted(keys)
    same = _same_as_next([k.take(order) for k in keys])
    if not same.any():
        return rows
    positions = order.to_numpy()
    last = positions[np.append(~same, True)]
    first = positions[np.insert(~same, 0, True)]
    return rows.take(pa.array(last[np.argsort(first, kind="stable")]))


def _untouched(stored: pa.Table, pk: Sequence[str], touched: Sequence[pa.ChunkedArray]) -> pa.Array | None:
    """The stored rows (ascending) under none of the ``touched`` keys (one column per name of ``pk``, no
    NULL); None when two stored rows share a key (only ``_apply_by_rows`` keeps one of them)."""
    if not stored.num_rows:
        return pa.array([], pa.int64())
    tags = np.concatenate([np.zeros(stored.num_rows, np.int8), np.ones(len(touched[0]), np.int8)])
    columns = [pa.chunked_array([*stored.column(name).chunks, *keys.chunks], stored.schema.field(name).type)
               for name, keys in zip(pk, touched)]
    order = _sorted(columns, pa.array(tags))
    positions = order.to_numpy()
    same = _same_as_next([c.take(order) for c in columns])
    is_stored = tags[positions] == 0
    if np.any(same & is_stored[:-1] & is_stored[1:]):
        return None
    # A stored key sorts first among equal keys, so a touched one follows it at once.
    kept = is_stored & ~np.append(same & is_stored[:-1], False)
    return pa.array(np.sort(positions[kept]))


def apply_squashed(stored: pa.Table, changes: pa.Table, schema: SyncSchema) -> pa.Table:
    """Apply squashed ``changes`` to ``stored`` rows (table schema, logical column names).

    Rows whose key is any chain's old key are replaced by the chain's outcome; rows
    whose key is any chain's new key are overwritten (idempotent replay).  A CHANGED
    flag of false keeps the stored value of the chain's old row (or, when that row is
    gone, of the stored row under the new key, which is what a replay finds).
    """
    fast = _apply_full_values(stored, changes, schema)
    return fast if fast is not None else _apply_by_rows(stored, changes, schema)


def _apply_by_rows(stored: pa.Table, changes: pa.Table, schema: SyncSchema) -> pa.Table:
    """``apply_squashed`` row by row in Python."""
    pk_names = schema.pk_names
    stored_rows = stored.to_pylist()
    by_key: dict[Key, dict[str, Any]] = {tuple(r[n] for n in pk_names): r for r in stored_rows}
    old_keys = _keys(changes, schema, ColumnRole.OLD_PK)
    new_keys = _keys(changes, schema, ColumnRole.NEW_PK)
    consumed = {k for k in old_keys if k is not None}
    value_cols = {c.name: changes.column(c.field.name).to_pylist() for c in schema.by_role(ColumnRole.VALUE)}
    new_pk_cols = {
        c.name: changes.column(c.field.name).to_pylist() for c in schema.by_role(ColumnRole.NEW_PK)
    }
    flags = {c.name: changes.column(c.field.name).to_pylist() for c in schema.by_role(ColumnRole.CHANGED)}

    written: dict[Key, dict[str, Any]] = {}
    for row, (old, new) in enumerate(zip(old_keys, new_keys)):
        if new is None:
            continue
        base: dict[str, Any] | None
        if old is not None and old in by_key:
            base = by_key[old]
        elif new not in consumed:
            base = by_key.get(new)
        else:
            base = None
        out: dict[str, Any] = {}
        for name in stored.schema.names:
            if name in new_pk_cols:
                out[name] = new_pk_cols[name][row]
            elif name in value_cols and (name not in flags or flags[name][row]):
                out[name] = value_cols[name][row]
            else:
                out[name] = base[name] if base is not None else None
        written[new] = out
    removed = consumed | written.keys()
    kept = [r for k, r in by_key.items() if k not in removed]
    return pa.Table.from_pylist(kept + list(written.values()), schema=stored.schema)


@dataclass(frozen=True)
class SquashedChange:
    """The squashed change batch of one put (or of several squashed puts) and its schema.

    ``truncate``: the table is emptied before ``batch`` is applied (the truncate extension,
    ``spec.sync.messages.TRUNCATE_FIELD``); a run of changes merges into one only from a
    truncating change on, never across one (what came before it is gone)."""

    schema: SyncSchema
    batch: pa.Table
    truncate: bool = False

    @classmethod
    def of_put(cls, schema: SyncSchema, batches: Sequence[pa.Table], truncate: bool = False) -> SquashedChange:
        """A put's batches squashed into one, as Seafowl does on arrival."""
        rows = squash_all(batches, schema) if batches else schema.arrow_schema.empty_table()
        return cls(schema, rows, truncate)


def runs_by_schema(values: Sequence[T], schema_of: Callable[[T], SyncSchema],
                   starts_run: Callable[[T], bool] = lambda _: False) -> list[list[T]]:
    """Split ``values`` into maximal runs of consecutive values sharing a schema; a value
    ``starts_run`` says so of begins a new one."""
    runs: list[list[T]] = []
    for value in values:
        if runs and schema_of(runs[-1][0]) == schema_of(value) and not starts_run(value):
            runs[-1].append(value)
        else:
            runs.append([value])
    return runs


def merge_changes(changes: Sequence[SquashedChange]) -> list[SquashedChange]:
    """Runs of consecutive changes sharing a schema merged into one change each (order kept)."""
    return [
        SquashedChange(run[0].schema, merge_squashed([c.batch for c in run], run[0].schema), run[0].truncate)
        if len(run) > 1 else run[0]
        for run in runs_by_schema(changes, lambda c: c.schema, lambda c: c.truncate)
    ]


def after_last_truncate(changes: Sequence[SquashedChange]) -> tuple[bool, Sequence[SquashedChange]]:
    """Whether ``changes`` (in order) empty the table, and the changes left to apply: those from the
    last truncating one on (everything before it is gone)."""
    last = max((i for i, c in enumerate(changes) if c.truncate), default=None)
    return (False, changes) if last is None else (True, changes[last:])


def squash_pending(items: Sequence[PendingItem[SquashedChange]]) -> list[PendingItem[SquashedChange]]:
    """Merge runs of consecutive pending items sharing a schema into one squashed item each."""
    out: list[PendingItem[SquashedChange]] = []
    for run in runs_by_schema(items, lambda i: i.payload.schema, lambda i: i.payload.truncate):
        if len(run) == 1:
            out.append(run[0])
            continue
        (merged,) = merge_changes([i.payload for i in run])
        tx_ids = tuple(t for i in run for t in i.tx_ids)
        out.append(PendingItem(tx_ids, merged, merged.batch.num_rows, merged.batch.nbytes))
    return out
