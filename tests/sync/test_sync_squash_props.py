"""Squashing, keyed application and the size policy's merge against a naive row-by-row applier.

Change streams are generated from a simulated database so they are ones a real
source could emit (a key is inserted only when free, updated, moved or deleted only
when present, two keys swapped through a free one); CHANGED=false rows carry a NULL
value, as TOASTed columns do.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange, apply_squashed, squash, squash_pending
from spec.sync.writer import PendingItem

ARROW = pa.schema([("old_id", pa.int64()), ("new_id", pa.int64()), ("v", pa.string()),
                   ("changed_v", pa.bool_()), ("w", pa.string())])
SCHEMA = SyncSchema.validate(
    [ColumnDescriptor(role=int(r), name=n) for r, n in ((ColumnRole.OLD_PK, "id"), (ColumnRole.NEW_PK, "id"),
     (ColumnRole.VALUE, "v"), (ColumnRole.CHANGED, "v"), (ColumnRole.VALUE, "w"))],
    ARROW,
)
TABLE = SCHEMA.table_schema()
Row = tuple[Any, ...]
# Swaps weigh double: simultaneous key trades are what a wrong merge of squashed batches gets wrong.
KINDS = ("insert", "update", "move", "delete", "swap", "swap")


@st.composite
def scenario(
    draw: st.DrawFn, full_values: bool = False, max_steps: int = 12, keys: int = 8
) -> tuple[dict[int, dict[str, Any]], list[Row]]:
    initial = draw(st.sets(st.integers(0, keys - 1), max_size=5))
    db = {k: {"id": k, "v": f"s{k}", "w": f"s{k}"} for k in initial}
    stored = {k: dict(r) for k, r in db.items()}
    rows: list[Row] = []
    for step in range(draw(st.integers(0, max_steps))):
        free = [k for k in range(keys) if k not in db]
        kind = draw(st.sampled_from(KINDS))
        if kind == "insert" and free:
            k = draw(st.sampled_from(free))
            db[k] = {"id": k, "v": f"i{step}", "w": f"i{step}"}
            rows.append((None, k, f"i{step}", True, f"i{step}"))
        elif kind in ("update", "move") and db and (kind == "update" or free):
            k = draw(st.sampled_from(sorted(db)))
            j = draw(st.sampled_from(free)) if kind == "move" else k
            changed = full_values or draw(st.booleans())
            row = db.pop(k)
            v = f"u{step}" if changed else row["v"]
            db[j] = {"id": j, "v": v, "w": f"u{step}"}
            rows.append((k, j, v if changed else None, changed, f"u{step}"))
        elif kind == "swap" and len(db) > 1 and free:
            # Two rows trade keys through a free one, as a unique-key swap does in SQL.
            a, b = draw(st.permutations(sorted(db)))[:2]
            t = draw(st.sampled_from(free))
            changed = full_values or draw(st.booleans())
            va, vb = (db[a]["v"], db[b]["v"]) if changed else (None, None)
            w = f"u{step}"
            db[a], db[b] = {**db[b], "id": a, "w": w}, {**db[a], "id": b, "w": w}
            rows += [(a, t, va, changed, w), (b, a, vb, changed, w), (t, b, va, changed, w)]
        elif kind == "delete" and db:
            k = draw(st.sampled_from(sorted(db)))
            del db[k]
            rows.append((k, None, None, False, None))
    return stored, rows


def naive_apply(stored: dict[int, dict[str, Any]], rows: list[Row]) -> dict[int, dict[str, Any]]:
    state = {k: dict(r) for k, r in stored.items()}
    for old, new, v, changed, w in rows:
        base = state.pop(old) if old is not None else None
        if new is not None:
            state[new] = {"id": new, "v": v if changed else (base or {}).get("v"), "w": w}
    return state


def batch(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ARROW.names, r)) for r in rows], schema=ARROW)


def stored_table(stored: dict[int, dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(stored.values()), schema=TABLE)


def as_state(t: pa.Table) -> dict[int, dict[str, Any]]:
    rows = t.to_pylist()
    assert len({r["id"] for r in rows}) == len(rows), "duplicate keys"
    return {r["id"]: r for r in rows}


@given(scenario())
def test_squashed_application_equals_row_by_row(s: tuple[dict[int, dict[str, Any]], list[Row]]) -> None:
    stored, rows = s
    got = as_state(apply_squashed(stored_table(stored), squash(batch(rows), SCHEMA), SCHEMA))
    assert got == naive_apply(stored, rows)


@given(scenario(), st.integers(0, 12))
def test_squashing_two_halves_equals_squashing_all(s: tuple[dict[int, dict[str, Any]], list[Row]], cut: int) -> None:
    stored, rows = s
    first = apply_squashed(stored_table(stored), squash(batch(rows[:cut]), SCHEMA), SCHEMA)
    both = apply_squashed(first, squash(batch(rows[cut:]), SCHEMA), SCHEMA)
    assert as_state(both) == naive_apply(stored, rows)


@given(scenario())
def test_squash_leaves_at_most_one_live_row_per_key(s: tuple[dict[int, dict[str, Any]], list[Row]]) -> None:
    _, rows = s
    squashed = squash(batch(rows), SCHEMA)
    new_keys = [k for k in squashed.column("new_id").to_pylist() if k is not None]
    assert len(new_keys) == len(set(new_keys))
    assert squashed.num_rows <= len(rows)


@given(scenario(full_values=True))
def test_replaying_full_value_changes_is_idempotent(s: tuple[dict[int, dict[str, Any]], list[Row]]) -> None:
    stored, rows = s
    changes = squash(batch(rows), SCHEMA)
    once = apply_squashed(stored_table(stored), changes, SCHEMA)
    twice = apply_squashed(once, changes, SCHEMA)
    assert as_state(twice) == as_state(once) == naive_apply(stored, rows)


@st.composite
def split_into_puts(draw: st.DrawFn) -> tuple[dict[int, dict[str, Any]], list[Row], list[list[Row]]]:
    """A scenario and its rows cut into puts (a cut before a row one time in four)."""
    stored, rows = draw(scenario(max_steps=24, keys=5))
    puts: list[list[Row]] = []
    for row in rows:
        if not puts or draw(st.integers(0, 3)) == 0:
            puts.append([])
        puts[-1].append(row)
    return stored, rows, puts


@given(split_into_puts())
def test_merging_pending_puts_equals_row_by_row(
    s: tuple[dict[int, dict[str, Any]], list[Row], list[list[Row]]]
) -> None:
    """The size policy merges pending puts; the merged items must land what the raw rows say.

    Each put's squashed batch is simultaneous, so a merge that relinks its rows as a sequence
    can join a chain to another chain's key (a key swap, a move into a key the put freed).
    """
    stored, rows, put_rows = s
    puts = [SquashedChange.of_put(SCHEMA, [batch(p)]) for p in put_rows]
    items = [PendingItem((tx,), c, c.batch.num_rows, c.batch.nbytes) for tx, c in enumerate(puts)]
    merged = squash_pending(items)
    assert [t for i in merged for t in i.tx_ids] == list(range(len(puts)))
    assert all(i.size == i.payload.batch.nbytes for i in merged)
    assert sum(i.rows for i in merged) <= sum(i.rows for i in items)
    in_order, via_merge = stored_table(stored), stored_table(stored)
    for c in puts:
        in_order = apply_squashed(in_order, c.batch, SCHEMA)
    for i in merged:
        via_merge = apply_squashed(via_merge, i.payload.batch, SCHEMA)
    expected = naive_apply(stored, rows)
    assert as_state(in_order) == expected
    assert as_state(via_merge) == expected


FULL = SyncSchema.validate(
    [ColumnDescriptor(role=int(r), name=n) for r, n in ((ColumnRole.OLD_PK, "a"), (ColumnRole.OLD_PK, "b"),
     (ColumnRole.NEW_PK, "a"), (ColumnRole.NEW_PK, "b"), (ColumnRole.VALUE, "v"))],
    pa.schema([("old_a", pa.int64()), ("old_b", pa.string()), ("new_a", pa.int64()), ("new_b", pa.string()),
               ("v", pa.int64())]),
)
_KEY = st.one_of(st.none(), st.tuples(st.integers(0, 6), st.sampled_from("xy")))


@given(st.lists(st.tuples(_KEY, _KEY, st.integers(0, 99)), max_size=10),
       st.dictionaries(st.tuples(st.integers(0, 6), st.sampled_from("xy")), st.integers(0, 99), max_size=8),
       st.lists(st.integers(1, 3), max_size=10))
def test_arrow_paths_equal_the_row_by_row_paths(
    rows: list[tuple[Any, Any, int]], stored_rows: dict[tuple[int, str], int], segment_sizes: list[int]
) -> None:
    """Squashing and application take Arrow kernels when no row continues another's chain and no
    stored value is needed; whatever the rows, they must give what the row-by-row paths give."""
    from spec.sync.squash import _apply_by_rows, _squash, _squash_by_rows

    def key(k: Any) -> tuple[Any, Any]:
        return k if k is not None else (None, None)

    changes = pa.Table.from_pylist(
        [{"old_a": key(o)[0], "old_b": key(o)[1], "new_a": key(n)[0], "new_b": key(n)[1], "v": v} for o, n, v in rows],
        schema=FULL.arrow_schema,
    )
    segments: list[int] = []
    for size in segment_sizes + [1] * len(rows):
        if sum(segments) + size <= len(rows):
            segments.append(size)
    assert _squash(changes, FULL, segments).equals(_squash_by_rows(changes, FULL, segments))
    squashed = squash(changes, FULL)
    stored = pa.Table.from_pylist([{"a": a, "b": b, "v": v} for (a, b), v in stored_rows.items()],
                                  schema=FULL.table_schema())
    assert apply_squashed(stored, squashed, FULL).equals(_apply_by_rows(stored, squashed, FULL))
