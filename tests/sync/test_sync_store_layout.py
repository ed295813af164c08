"""The store's key-range layout and maintenance, checked on the Delta log's add and remove actions.

This is the copy-on-write path (object-store roots, or ``deletion_vectors=False``); the path by
deletion vectors is ``test_sync_store_dvs.py``.  A flush must rewrite only the files whose key ranges hold the keys it changes; maintenance must
merge small and overlapping files, vacuum what was removed and checkpoint the log, and none of it
may change the table's rows or lose the sync metadata.
"""

from __future__ import annotations

import datetime
import json
import random
import threading
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from conformance.sync.suite import DESCS, _cmd, rows_batch
from reference.sync.layout import DataFile, touched_files
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore, StoreSettings, TableState, UnsupportedTable
from spec.sync.schema import SyncSchema
from spec.sync.server import recorded_durable
from spec.sync.squash import SquashedChange
from spec.sync.writer import SyncSettings

TARGET = 100
COPY_ON_WRITE = StoreSettings(target_file_rows=TARGET, vacuum_retention_hours=0, deletion_vectors=False)


class LogFile(NamedTuple):
    path: str
    rows: int
    lo: Any
    hi: Any


class LogCommit(NamedTuple):
    added: list[LogFile]
    removed: list[str]


def change(rows: list[tuple[Any, ...]]) -> SquashedChange:
    batch = rows_batch(rows)
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


def read_commit(table: Path, version: int) -> LogCommit:
    """The add and remove actions of one commit, straight from its JSON file."""
    added: list[LogFile] = []
    removed: list[str] = []
    for line in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            added.append(LogFile(action["add"]["path"], stats["numRecords"],
                                 stats["minValues"]["id"], stats["maxValues"]["id"]))
        elif "remove" in action:
            removed.append(action["remove"]["path"])
    return LogCommit(sorted(added, key=lambda f: f.lo), removed)


def live_files(table: Path) -> dict[str, LogFile]:
    """The table's files after replaying every commit's actions."""
    files: dict[str, LogFile] = {}
    for version in range(DeltaTable(str(table)).version() + 1):
        commit = read_commit(table, version)
        for path in commit.removed:
            del files[path]
        files.update((f.path, f) for f in commit.added)
    return files


def rows_of(store: DeltaStore, table: Path) -> list[dict[str, Any]]:
    return sorted(store.read_table(str(table)).to_pylist(), key=lambda r: r["id"])


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[DeltaStore, Path]:
    """A table of ids 0, 2, .., 1998 laid out in files of at most 100 rows."""
    store = DeltaStore(str(tmp_path), settings=COPY_ON_WRITE)
    table = tmp_path / "t"
    store.write(str(table), [change([(None, k, "v0") for k in range(0, 2000, 2)])], {"A": 1}, {"A": 1})
    return store, table


def test_files_cover_disjoint_key_ranges_of_at_most_the_target(seeded: tuple[DeltaStore, Path]) -> None:
    _, table = seeded
    files = sorted(live_files(table).values(), key=lambda f: f.lo)
    assert len(files) == 10
    assert all(f.rows == TARGET for f in files)
    assert all(a.hi < b.lo for a, b in zip(files, files[1:]))


def test_a_flush_rewrites_only_the_files_holding_its_keys(seeded: tuple[DeltaStore, Path]) -> None:
    store, table = seeded
    before = live_files(table)
    holder = next(f for f in before.values() if f.lo <= 500 <= f.hi)
    updates = [(k, k, "v1") for k in range(500, 520, 2)] + [(None, 501, "new"), (510, None, None)]
    changes = store.write(str(table), [change(updates)], {"A": 2}, {"A": 2})
    commit = read_commit(table, DeltaTable(str(table)).version())
    assert commit.removed == [holder.path]
    assert sum(f.rows for f in commit.added) == TARGET  # 9 updated, 1 inserted, 1 deleted, 90 kept
    assert (changes.files_removed, changes.rows_removed, changes.rows_added) == (1, TARGET, TARGET)
    assert min(f.lo for f in commit.added) >= holder.lo and max(f.hi for f in commit.added) <= holder.hi
    rows = {r["id"]: r["v"] for r in rows_of(store, table)}
    assert (rows[500], rows[501], rows[502], 510 in rows, rows[520]) == ("v1", "new", "v1", False, "v0")
    assert len(rows) == 1000


def test_a_flush_of_changes_in_two_column_orders_applies_both(seeded: tuple[DeltaStore, Path]) -> None:
    """Puts whose columns come in another order are not merged into one change: each is applied, in order."""
    store, table = seeded
    swapped = (DESCS[1], DESCS[0], DESCS[2])  # new key first
    batch = rows_batch([(500, 500, "second"), (None, 1, "new")]).select(["new_id", "old_id", "v"])
    later = SquashedChange.of_put(SyncSchema.validate(swapped, batch.schema), [batch])
    store.write(str(table), [change([(500, 500, "first"), (502, 502, "first")]), later], {"A": 2}, {"A": 2})
    rows = {r["id"]: r["v"] for r in rows_of(store, table)}
    assert (rows[500], rows[502], rows[1]) == ("second", "first", "new")


def test_new_keys_join_the_file_below_them(seeded: tuple[DeltaStore, Path]) -> None:
    store, table = seeded
    last = max(live_files(table).values(), key=lambda f: f.lo)
    store.write(str(table), [change([(None, k, "tail") for k in range(2000, 2020)])], {"A": 2}, {"A": 2})
    commit = read_commit(table, DeltaTable(str(table)).version())
    assert commit.removed == [last.path]
    assert [f.rows for f in commit.added] == [60, 60]  # 120 rows cut into two balanced files
    assert len(rows_of(store, table)) == 1020


def test_a_key_move_touches_the_two_ranges_it_joins(seeded: tuple[DeltaStore, Path]) -> None:
    store, table = seeded
    files = live_files(table)
    holders = {f.path for f in files.values() if f.lo <= 4 <= f.hi or f.lo <= 1501 <= f.hi}
    store.write(str(table), [change([(4, 1501, "moved")])], {"A": 2}, {"A": 2})
    assert set(read_commit(table, DeltaTable(str(table)).version()).removed) == holders
    rows = {r["id"]: r["v"] for r in rows_of(store, table)}
    assert 4 not in rows and rows[1501] == "moved" and len(rows) == 1000


def test_a_file_overlapping_the_layout_is_read_for_its_keys(seeded: tuple[DeltaStore, Path]) -> None:
    store, table = seeded
    write_deltalake(str(table), pa.table({"id": pa.array([151, 951], pa.int64()), "v": ["x", "y"]}), mode="append")
    store.write(str(table), [change([(951, 951, "z")])], {"A": 2}, {"A": 2})
    rows = rows_of(store, table)
    assert [r for r in rows if r["id"] in (151, 951)] == [{"id": 151, "v": "x"}, {"id": 951, "v": "z"}]
    assert len(rows) == 1002


def test_maintenance_merges_small_files_vacuums_and_checkpoints(seeded: tuple[DeltaStore, Path]) -> None:
    store, table = seeded
    store.write(str(table), [change([(k, None, None) for k in range(200, 390, 2)])], {"A": 2}, {"A": 5})
    write_deltalake(str(table), pa.table({"id": pa.array([3001, 3003], pa.int64()), "v": ["x", "y"]}), mode="append")
    rows = rows_of(store, table)
    small = [f for f in live_files(table).values() if f.rows < TARGET / 2]
    assert len(small) == 2

    report = store.maintain(str(table))

    files = sorted(live_files(table).values(), key=lambda f: f.lo)
    assert report.compaction.files_removed == 4  # each small file and its neighbour
    assert all(f.rows >= TARGET / 2 for f in files) and all(a.hi < b.lo for a, b in zip(files, files[1:]))
    assert rows_of(store, table) == rows
    on_disk = {p.name for p in table.glob("*.parquet")}
    assert on_disk == set(live_files(table)) and report.vacuumed_files > 0
    assert report.checkpoint_version == DeltaTable(str(table)).version()
    assert json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"] == report.checkpoint_version
    state = store.read_state(str(table))
    assert (state.marks, state.durable, state.keys) == ({"A": 2}, {"A": 5}, ("id",))

    again = store.maintain(str(table))
    assert (again.compaction.files_removed, again.vacuumed_files, again.checkpoint_version) == (0, 0, None)


def test_the_server_maintains_the_tables_under_its_store(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path), settings=COPY_ON_WRITE)
    store.write(str(tmp_path / "old"), [change([(None, 1, "a")])], {"A": 1}, {"A": 1})
    server = SyncServer(store, settings=SyncSettings(max_replication_lag_s=0), maintenance_interval_s=0)
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        batch = rows_batch([(None, 7, "b")])
        server.handle(_cmd("new", "A", 2), SyncSchema.validate(DESCS, batch.schema), batch.to_batches())
        assert len(server.stats()["flush_seconds"]) == 1  # flushed at the put: a lag of 0
        reports = server.maintain()
    finally:
        server.shutdown()
    assert sorted(reports) == sorted([str(tmp_path / "old"), store.table_uri("new")])
    assert all(r.checkpoint_version == DeltaTable(uri).version() for uri, r in reports.items())
    assert rows_of(store, tmp_path / "new") == [{"id": 7, "v": "b"}]


def test_a_table_the_store_cannot_write_is_refused_and_left_alone(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path))
    table = tmp_path / "parted"
    write_deltalake(str(table), pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}), partition_by=["v"])
    with pytest.raises(UnsupportedTable, match="^the table uses Delta features the sync store does not write: partitions$"):
        store.write(str(table), [change([(None, 2, "b")])], {"A": 1}, {"A": 1})
    assert DeltaTable(str(table)).version() == 0


def test_maintenance_lays_out_a_table_another_writer_wrote(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path), settings=COPY_ON_WRITE)
    table = tmp_path / "t"
    ids = list(range(1000))
    random.Random(3).shuffle(ids)
    write_deltalake(str(table), pa.table({"id": pa.array(ids, pa.int64()), "v": [str(i) for i in ids]}),
                    commit_properties=store.commit_properties(TableState({"A": 1}, {"A": 1}, ("id",))))
    assert len(live_files(table)) == 1

    report = store.maintain(str(table))

    files = sorted(live_files(table).values(), key=lambda f: f.lo)
    assert (report.compaction.files_removed, report.compaction.files_added) == (1, 10)
    assert [(f.rows, f.lo, f.hi) for f in files] == [(TARGET, lo, lo + TARGET - 1) for lo in range(0, 1000, TARGET)]
    assert rows_of(store, table) == [{"id": i, "v": str(i)} for i in range(1000)]


def test_string_keys_are_laid_out_by_range_too(tmp_path: Path) -> None:
    def put(rows: list[tuple[str | None, str | None, str | None]]) -> SquashedChange:
        batch = pa.table({name: pa.array(column, pa.string())
                          for name, column in zip(("old_id", "new_id", "v"), zip(*rows))})
        return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])

    store = DeltaStore(str(tmp_path), settings=StoreSettings(target_file_rows=TARGET, deletion_vectors=False))
    table = tmp_path / "t"
    store.write(str(table), [put([(None, f"k{i:03}", "a") for i in range(300)])], {"A": 1}, {"A": 1})
    holder = next(p for p, f in live_files(table).items() if f.lo <= "k150" <= f.hi)
    store.write(str(table), [put([("k150", "k150", "b")])], {"A": 2}, {"A": 2})
    assert read_commit(table, DeltaTable(str(table)).version()).removed == [holder]
    assert {r["id"]: r["v"] for r in store.read_table(str(table)).to_pylist()}["k150"] == "b"


def test_a_table_nested_in_another_is_found_and_survives_its_maintenance(seeded: tuple[DeltaStore, Path]) -> None:
    store, table = seeded
    nested = table / "inner"
    store.write(str(nested), [change([(None, 1, "a")])], {"B": 1}, {"B": 1})
    store.write(str(table), [change([(0, None, None)])], {"A": 2}, {"A": 2})

    report = store.maintain(str(table))

    assert report.vacuumed_files == 1  # the file the delete replaced, and nothing of the nested table
    assert rows_of(store, nested) == [{"id": 1, "v": "a"}]
    assert sorted(store.tables()) == [str(table), str(nested)]
    assert recorded_durable(store.recorded_durable()) == {"A": 2, "B": 1}


def test_keys_the_statistics_cannot_order_touch_every_file() -> None:
    aware = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    files = [DataFile("a", 1, 1, datetime.datetime(2025, 1, 1), datetime.datetime(2025, 6, 1)),
             DataFile("b", 1, 1, datetime.datetime(2025, 7, 1), datetime.datetime(2025, 12, 1))]
    assert {f.path for f in touched_files(files, [aware])} == {"a", "b"}
    assert {f.path for f in touched_files([DataFile("c", 1, 1, 0, 9), DataFile("d", 1, 1, 10, 19)], [3])} == {"c"}
