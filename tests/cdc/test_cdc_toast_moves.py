"""Key changes of rows with unchanged TOAST values under the default replica identity, with any
number of sinks: the property (any workload, any number of sinks, any order in which the sinks'
parts land, the values read back at any moment after the change) and the pipeline's tasks against
a real Postgres and sync server."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reference.pipeline.postgres import routed, whole_rows
from reference.cdc.verify import verify
from reference.pipeline.syncserver import SyncServerProcess
from spec.pgoutput.changes import Op, RowChange, TableImage
from spec.pgoutput.lookup import RowLookup
from spec.pgoutput.transactions import SourceTransaction
from spec.sync.schema import SyncSchema
from spec.sync.squash import apply_squashed, squash
from tests.cdc.conftest import Database
from tests.cdc.tasks import run_pipeline, sql

IMAGE = TableImage("public/t", (("id", pa.int64()),), (("x", pa.int64()), ("big", pa.string())))
SCHEMA = SyncSchema.validate(IMAGE.descriptors(), IMAGE.schema())
STORED = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("big", pa.string())])
Rows = dict[int, tuple[int, str]]

KEYS = 8
OPS = st.tuples(st.sampled_from(["insert", "set_x", "set_big", "move", "delete"]), st.integers(0, KEYS - 1),
                st.integers(0, KEYS - 1), st.integers(0, 99))


def _changes(state: Rows, ops: list[tuple[str, int, int, int]]) -> list[RowChange]:
    """The row changes pgoutput sends for ``ops``, applied to ``state``: ``a`` picks a present key (an absent
    one for an insert), ``b`` an absent one, among :data:`KEYS`."""
    out: list[RowChange] = []
    for kind, a, b, v in ops:
        present, absent = sorted(state), [k for k in range(KEYS) if k not in state]
        if kind == "insert" or not present:
            if absent:
                key = absent[a % len(absent)]
                state[key] = (v, f"big{v}")
                out.append(RowChange(IMAGE, Op.INSERT, None, (key,), state[key], (True, True)))
            continue
        key = present[a % len(present)]
        if kind == "set_x":
            state[key] = (v, state[key][1])
            out.append(RowChange(IMAGE, Op.UPDATE, (key,), (key,), (v, None), (True, False)))
        elif kind == "set_big":
            state[key] = (state[key][0], f"big{v}")
            out.append(RowChange(IMAGE, Op.UPDATE, (key,), (key,), state[key], (True, True)))
        elif kind == "move" and absent:
            moved = absent[b % len(absent)]
            state[moved] = (v, state.pop(key)[1])
            out.append(RowChange(IMAGE, Op.UPDATE, (key,), (moved,), (v, None), (True, False)))
        elif kind == "delete":
            del state[key]
            out.append(RowChange(IMAGE, Op.DELETE, (key,), None, None, (False, False)))
    return out


def _apply(stored: pa.Table, part: list[RowChange]) -> pa.Table:
    """What the sync server does with one put: squash it, apply it to the stored rows."""
    return apply_squashed(stored, squash(IMAGE.batch(part), SCHEMA), SCHEMA)


class Choices:
    """The test's free choices (when a value is read back, whose part lands next) from drawn numbers, cyclically."""

    def __init__(self, numbers: list[int]) -> None:
        self.numbers, self.at = numbers or [0], 0

    def pick(self, low: int, high: int) -> int:
        self.at += 1
        return low + self.numbers[self.at % len(self.numbers)] % (high - low + 1)


@settings(max_examples=200)
@example(transactions=[[("insert", 0, 0, 1)], [("move", 0, 0, 2), ("move", 0, 0, 3)]], readers=2,
         numbers=[0]).via("a move across sinks, then one within a sink that carries its value on")
@given(transactions=st.lists(st.lists(OPS, min_size=1, max_size=4), min_size=1, max_size=14),
       readers=st.integers(1, 4), numbers=st.lists(st.integers(0, 1 << 16), max_size=64))
def test_key_changes_with_unchanged_toast_land_with_any_sinks(transactions: list[list[tuple[str, int, int, int]]],
                                                               readers: int, numbers: list[int]) -> None:
    choices = Choices(numbers)
    state: Rows = {}
    history: list[Rows] = []
    source: list[SourceTransaction] = []
    for i, ops in enumerate(transactions):
        changes = _changes(state, ops)
        history.append(dict(state))
        source.append(SourceTransaction(i + 1, i + 1, 0, i + 1, {IMAGE.path: changes} if changes else {}, {}))

    def read_back_after(tx: int):  # type: ignore[no-untyped-def]
        def read_back(lookup: RowLookup) -> dict[tuple[object, ...], dict[str, object]]:
            seen = history[choices.pick(tx, len(history) - 1)]
            assert lookup.columns == ("big",) and lookup.xid == tx + 1
            return {key: {"big": seen[key[0]][1]} for key in lookup.keys if key[0] in seen}  # type: ignore[index]
        return read_back

    parts: list[list[list[RowChange]]] = [[] for _ in range(readers)]  # per sink, its parts in order
    for i, tx in enumerate(source):
        by_sink: dict[int, list[RowChange]] = {}
        for changes in whole_rows(tx.xid, tx.changes, readers, read_back_after(i)).values():
            for change in changes:
                assert readers == 1 or not change.changes_key or all(change.changed)
                for reader, piece in routed(change, readers):
                    by_sink.setdefault(reader, []).append(piece)
        for reader, part in by_sink.items():
            parts[reader].append(part)

    stored = STORED.empty_table()
    while any(parts):
        ready = [r for r in range(readers) if parts[r]]
        reader = ready[choices.pick(0, len(ready) - 1)]
        stored = _apply(stored, parts[reader].pop(0))
    assert {r["id"]: (r["x"], r["big"]) for r in stored.to_pylist()} == state
    assert stored.num_rows == len(state)


def test_key_changes_across_sinks_keep_their_toasted_values(database: Database, sync_server: SyncServerProcess,
                                                           tmp_path: Path) -> None:
    """Default replica identity, 3 sinks: 24 rows with TOASTed bodies change key (some twice in one
    transaction, some then updated or deleted), a key swap; the Delta table equals Postgres."""
    big = "(SELECT string_agg(md5(g::text || {k}::text), '') FROM generate_series(1, 80) g)"
    sql(database, "BEGIN; " + "; ".join(
        f"INSERT INTO items (id, name, qty, big) VALUES ({k}, 'n{k}', {k}, {big.format(k=k)})" for k in range(1, 25)
    ) + "; COMMIT")
    sql(database,
         *(f"UPDATE items SET id = {k + 100}, qty = qty + 1 WHERE id = {k}" for k in range(1, 9)),
         "BEGIN; " + "; ".join(f"UPDATE items SET id = {k + 200} WHERE id = {k}; "
                               f"UPDATE items SET id = {k + 300} WHERE id = {k + 200}" for k in range(9, 17)) + "; COMMIT",
         "BEGIN; UPDATE items SET id = 0 WHERE id = 17; UPDATE items SET id = 17 WHERE id = 18; "
         "UPDATE items SET id = 18 WHERE id = 0; COMMIT",
         "UPDATE items SET id = 1000 + id WHERE id > 18 AND id < 25",
         "UPDATE items SET big = 'small' WHERE id = 1101",
         "DELETE FROM items WHERE id = 1102")
    stopped = run_pipeline(database, sync_server, 3)
    assert stopped == [None] * 3
    assert verify(database.address, database.name, Path(sync_server.store)) == []


def test_a_change_that_cannot_be_applied_stops_every_sink_with_one_line(database: Database,
                                                                        sync_server: SyncServerProcess) -> None:
    """A NaN in a numeric(12,2): no task fails (no Spark retry, no trace), every sink ends with the whole line."""
    sql(database, "INSERT INTO items (id, price) VALUES (1, 'NaN')")
    stopped = run_pipeline(database, sync_server, 2)
    assert stopped[0] == stopped[1] and stopped[0] is not None
    assert stopped[0] == ("[PGOUTPUT_UNMAPPED_TYPE] table public/items: column price: numeric value NaN "
                          "has no decimal form")
