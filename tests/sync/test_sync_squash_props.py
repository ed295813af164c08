"""Squashing and keyed application against a naive row-by-row applier.

Change streams are generated from a simulated database so they are ones a real
source could emit (a key is inserted only when free, updated or deleted only when
present); CHANGED=false rows carry a NULL value, as TOASTed columns do.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.schema import SyncSchema
from spec.sync.squash import apply_squashed, squash

ARROW = pa.schema([("old_id", pa.int64()), ("new_id", pa.int64()), ("v", pa.string()),
                   ("changed_v", pa.bool_()), ("w", pa.string())])
SCHEMA = SyncSchema.validate(
    [ColumnDescriptor(int(r), n) for r, n in ((ColumnRole.OLD_PK, "id"), (ColumnRole.NEW_PK, "id"),
     (ColumnRole.VALUE, "v"), (ColumnRole.CHANGED, "v"), (ColumnRole.VALUE, "w"))],
    ARROW,
)
TABLE = SCHEMA.table_schema()
KEYS = st.integers(0, 7)
Row = tuple[Any, ...]


@st.composite
def scenario(draw: st.DrawFn, full_values: bool = False) -> tuple[dict[int, dict[str, Any]], list[Row]]:
    db = {k: {"id": k, "v": f"s{k}", "w": f"s{k}"} for k in draw(st.sets(KEYS, max_size=5))}
    stored = {k: dict(r) for k, r in db.items()}
    rows: list[Row] = []
    for step in range(draw(st.integers(0, 12))):
        free = [k for k in range(8) if k not in db]
        kind = draw(st.sampled_from(["insert", "update", "delete"]))
        if kind == "insert" and free:
            k = draw(st.sampled_from(free))
            db[k] = {"id": k, "v": f"i{step}", "w": f"i{step}"}
            rows.append((None, k, f"i{step}", True, f"i{step}"))
        elif kind == "update" and db:
            k = draw(st.sampled_from(sorted(db)))
            j = draw(st.sampled_from([k] + free))
            changed = full_values or draw(st.booleans())
            row = db.pop(k)
            v = f"u{step}" if changed else row["v"]
            db[j] = {"id": j, "v": v, "w": f"u{step}"}
            rows.append((k, j, v if changed else None, changed, f"u{step}"))
        elif kind == "delete" and db:
            k = draw(st.sampled_from(sorted(db)))
            del db[k]
            rows.append((k, None, None, False, None))
        elif kind == "insert" or not db:
            continue
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
