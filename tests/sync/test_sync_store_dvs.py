"""The store's flushes by deletion vectors, judged by deltalake's reader and the Delta log itself.

deltalake (delta-rs, an independent reader of DVs) must return exactly a model's rows after any
mix of scattered updates, deletes, key changes, restarts, compactions and vacuums; each flush
must leave every existing data file in place (its old rows marked in its DV) and add only the
changed rows; commits are created only if their version is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.sync.suite import DESCS, rows_batch
from reference.sync.delta_log import CommitConflict, write_commit
from reference.sync.store import DeltaStore, StoreSettings, TableState, read_delta
from spec.delta.deletion_vectors import FEATURE, MIN_READER_VERSION, MIN_WRITER_VERSION
from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.schema import SyncSchema
from spec.sync.server import recorded_durable
from spec.sync.squash import SquashedChange, apply_squashed

SETTINGS = StoreSettings(target_file_rows=8, vacuum_retention_hours=0, dv_purge_fraction=0.25)
KEYS = 40


def change(rows: list[tuple[Any, ...]]) -> SquashedChange:
    batch = rows_batch(rows)
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


def rows_of(table: Path) -> dict[int, str]:
    return {r["id"]: r["v"] for r in read_delta(str(table)).to_pylist()}


def actions(table: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


# One put: distinct keys, each an upsert (old = new), a delete (new NULL) or a key change (old -> new).
puts = st.lists(
    st.tuples(st.sampled_from(["upsert", "delete", "move"]), st.integers(0, KEYS - 1), st.integers(0, KEYS - 1)),
    min_size=1, max_size=12,
)
steps = st.lists(st.one_of(puts, st.sampled_from(["restart", "maintain"])), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps)
def test_deltalake_reads_exactly_the_models_rows_after_any_mix_of_flushes_and_maintenance(
        tmp_path_factory: pytest.TempPathFactory, script: list[Any]) -> None:
    root = tmp_path_factory.mktemp("dvs")
    table = root / "t"
    store = DeltaStore(str(root), settings=SETTINGS)
    store.write(str(table), [change([(None, k, f"seed{k}") for k in range(0, KEYS, 2)])], {"o": 1}, {"o": 1})
    model = {k: f"seed{k}" for k in range(0, KEYS, 2)}
    seq = 1
    for step in script:
        if step == "restart":
            store = DeltaStore(str(root), settings=SETTINGS)
        elif step == "maintain":
            store.maintain(str(table))
        else:
            used: set[int] = set()
            rows = []
            for kind, key, other in step:
                if key in used or other in used or (kind == "move" and key == other):
                    continue
                used |= {key, other} if kind == "move" else {key}
                seq_value = f"s{seq}k{key}"
                if kind == "upsert":
                    rows.append((key, key, seq_value))
                    model[key] = seq_value
                elif kind == "delete":
                    rows.append((key, None, None))
                    model.pop(key, None)
                else:
                    rows.append((key, other, seq_value))
                    model.pop(key, None)
                    model[other] = seq_value
            seq += 1
            store.write(str(table), [change(rows)], {"o": seq}, {"o": seq})
        assert rows_of(table) == model, step
    assert DeltaStore(str(root), settings=SETTINGS).read_state(str(table)).marks == {"o": seq}


def test_scattered_updates_mark_dvs_and_add_only_the_changed_rows(tmp_path: Path) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path), settings=StoreSettings(target_file_rows=100))
    store.write(str(table), [change([(None, k, "a") for k in range(1000)])], {"o": 1}, {"o": 1})
    before = {a["path"]: a["size_bytes"] for a in pa.table(DeltaTable(str(table)).get_add_actions(flatten=True))
              .to_pylist()}
    assert len(before) == 10
    files = store.write(str(table), [change([(k, k, "b") for k in range(5, 1000, 100)] + [(7, None, None)])],
                        {"o": 2}, {"o": 2})
    assert (files.rows_added, files.rows_deleted, files.files_added, files.files_removed) == (10, 11, 1, 0)
    commit = actions(table, DeltaTable(str(table)).version())
    readds = [a["add"] for a in commit if "add" in a and a["add"].get("deletionVector")]
    new = [a["add"] for a in commit if "add" in a and not a["add"].get("deletionVector")]
    removes = [a["remove"] for a in commit if "remove" in a]
    assert sorted(a["path"] for a in readds) == sorted(r["path"] for r in removes) == sorted(before)
    assert sum(a["deletionVector"]["cardinality"] for a in readds) == 11
    assert all(json.loads(a["stats"])["numRecords"] == 100 and a["size"] == before[a["path"]] for a in readds)
    assert len(new) == 1 and json.loads(new[0]["stats"])["numRecords"] == 10
    info = json.loads(next(a["commitInfo"] for a in commit if "commitInfo" in a)["streamwire.sync"])
    assert info["marks"] == {"o": 2}
    rows = rows_of(table)
    assert len(rows) == 999 and rows[105] == "b" and rows[106] == "a" and 7 not in rows
    protocol = DeltaTable(str(table)).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (MIN_READER_VERSION, MIN_WRITER_VERSION)
    assert FEATURE in (protocol.reader_features or ()) and FEATURE in (protocol.writer_features or ())


def test_a_commit_never_overwrites_a_version_another_writer_created(tmp_path: Path) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path))
    store.write(str(table), [change([(None, k, "a") for k in range(10)])], {"o": 1}, {"o": 1})
    version = DeltaTable(str(table)).version() + 1
    theirs = {"commitInfo": {"timestamp": 1, "operation": "OTHER WRITER"}}
    write_commit(table, version, [theirs])
    with pytest.raises(CommitConflict):
        write_commit(table, version, [{"commitInfo": {"timestamp": 2, "operation": "MERGE"}}])
    assert actions(table, version) == [theirs]
    store.write(str(table), [change([(3, 3, "b")])], {"o": 2}, {"o": 2})  # after the other writer's version
    assert DeltaTable(str(table)).version() == version + 1
    assert rows_of(table) == {**{k: "a" for k in range(10)}, 3: "b"}


def test_maintenance_purges_dvs_and_vacuum_keeps_the_dv_files_live_files_use(tmp_path: Path) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path), settings=StoreSettings(target_file_rows=10, vacuum_retention_hours=0,
                                                             dv_purge_fraction=0.5))
    store.write(str(table), [change([(None, k, "a") for k in range(40)])], {"o": 1}, {"o": 1})
    store.write(str(table), [change([(k, None, None) for k in range(0, 6)])], {"o": 2}, {"o": 2})  # 60% of a file
    store.write(str(table), [change([(15, 15, "b")])], {"o": 3}, {"o": 3})  # 10% of another
    expected = rows_of(table)
    report = store.maintain(str(table))
    assert report.compaction.files_removed >= 2 and report.checkpoint_version is not None
    assert rows_of(table) == expected
    dv_files = {p.name for p in table.glob("deletion_vector_*.bin")}
    live = DeltaTable(str(table)).deletion_vectors().read_all()
    assert pa.table(live).num_rows == len(dv_files) == 1  # the 10% file keeps its DV; the others are gone
    store2 = DeltaStore(str(tmp_path), settings=StoreSettings(target_file_rows=10))
    assert store2.read_state(str(table)).marks == {"o": 3}
    store2.write(str(table), [change([(16, 16, "c")])], {"o": 4}, {"o": 4})  # the index rebuilt from the checkpoint
    assert rows_of(table) == {**expected, 16: "c"}


TWO_KEY_DESCS = [ColumnDescriptor(role=int(r), name=n) for r, n in [
    (ColumnRole.OLD_PK, "a"), (ColumnRole.OLD_PK, "b"), (ColumnRole.NEW_PK, "a"), (ColumnRole.NEW_PK, "b"),
    (ColumnRole.VALUE, "v"), (ColumnRole.CHANGED, "v"), (ColumnRole.VALUE, "w")]]
TWO_KEY_FIELDS = pa.schema([("old_a", pa.int64()), ("old_b", pa.string()), ("new_a", pa.int64()),
                            ("new_b", pa.string()), ("v", pa.string()), ("changed_v", pa.bool_()), ("w", pa.string())])
two_key = st.tuples(st.integers(0, 4), st.sampled_from(["x", "y"]))
two_key_puts = st.lists(st.lists(st.tuples(st.none() | two_key, st.none() | two_key, st.booleans()),
                                 min_size=1, max_size=6), min_size=1, max_size=6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(two_key_puts)
def test_a_two_column_key_with_unchanged_columns_reads_back_as_the_spec_applies_it(
        tmp_path_factory: pytest.TempPathFactory, puts: list[list[tuple[Any, Any, bool]]]) -> None:
    """Stored values are read back (CHANGED=false keeps ``v``), and many rows share a cluster value."""
    root = tmp_path_factory.mktemp("twokey")
    table = root / "t"
    store = DeltaStore(str(root), settings=StoreSettings(target_file_rows=3, vacuum_retention_hours=0))
    schema = SyncSchema.validate(TWO_KEY_DESCS, TWO_KEY_FIELDS)
    model = schema.table_schema().empty_table()
    for i, put in enumerate(puts):
        rows = [{"old_a": old and old[0], "old_b": old and old[1], "new_a": new and new[0], "new_b": new and new[1],
                 "v": f"v{i}", "changed_v": changed, "w": f"w{i}"} for old, new, changed in put if old or new]
        if not rows:
            continue
        batch = pa.Table.from_pylist(rows, schema=TWO_KEY_FIELDS)
        squashed = SquashedChange.of_put(schema, [batch])
        model = apply_squashed(model, squashed.batch, schema)
        store.write(str(table), [squashed], {"o": i + 1}, {"o": i + 1})
        if i % 2:
            store.maintain(str(table))
        got = sorted(tuple(r.values()) for r in read_delta(str(table)).to_pylist())
        assert got == sorted(tuple(r.values()) for r in model.to_pylist())


def test_a_table_written_before_dvs_is_raised_to_them_with_its_old_marks_until_the_data_lands(
        tmp_path: Path) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path), settings=StoreSettings(deletion_vectors=False))
    store.write(str(table), [change([(None, k, "a") for k in range(20)])], {"o": 1}, {"o": 1})
    assert FEATURE not in (DeltaTable(str(table)).protocol().reader_features or ())
    store = DeltaStore(str(tmp_path))
    store.write(str(table), [change([(4, 4, "b")])], {"o": 2}, {"o": 2})
    history = DeltaTable(str(table)).history(3)  # newest first: the data commit, then the two that raised it
    assert [h["operation"] for h in history] == ["MERGE", "SET TBLPROPERTIES", "ADD FEATURE"]
    assert [json.loads(h["streamwire.sync"])["marks"] for h in history] == [{"o": 2}, {"o": 1}, {"o": 1}]
    assert FEATURE in (DeltaTable(str(table)).protocol().reader_features or ())
    assert rows_of(table) == {**{k: "a" for k in range(20)}, 4: "b"}


def test_the_store_checkpoints_its_own_commits_every_checkpoint_interval(tmp_path: Path) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path))
    store.write(str(table), [change([(None, k, "a") for k in range(10)])], {"o": 1}, {"o": 1})
    DeltaTable(str(table)).alter.set_table_properties({"delta.checkpointInterval": "3"})  # version 2
    for seq in range(2, 6):  # versions 3 to 6, the store's own
        store.write(str(table), [change([(seq, seq, "b")])], {"o": seq}, {"o": seq})
    checkpoints = sorted(int(p.name.split(".")[0]) for p in (table / "_delta_log").glob("*.checkpoint.parquet"))
    assert [v for v in checkpoints if v > 2] == [3, 6]
    assert DeltaStore(str(tmp_path)).read_state(str(table)).marks == {"o": 5}
    assert rows_of(table) == {**{k: "a" for k in range(10)}, **{k: "b" for k in range(2, 6)}}


def test_the_sync_state_is_found_under_another_writers_commit(tmp_path: Path) -> None:
    """A commit without the sync metadata on top (another writer's) hides nothing: a restarted store
    still knows which transactions the table holds, so a replay is skipped, not applied again."""
    table = tmp_path / "t"
    DeltaStore(str(tmp_path)).write(str(table), [change([(None, 1, "a")])], {"o": 7}, {"o": 7})
    write_commit(table, DeltaTable(str(table)).version() + 1, [{"commitInfo": {"timestamp": 1, "operation": "OTHER"}}])
    restarted = DeltaStore(str(tmp_path))
    assert restarted.read_state(str(table)).marks == {"o": 7} and recorded_durable(restarted.recorded_durable()) == {"o": 7}


def test_a_restart_reads_the_latest_commit_and_never_a_commit_half_written(tmp_path: Path) -> None:
    """A restart reads each table's latest log entry (the older ones cleaned up after a checkpoint); a commit a
    killed writer left as its temporary file is no log entry, so its numbers are never reported durable."""
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path))
    for seq in (1, 2):
        store.write(str(table), [change([(None, seq, "a")])], {"o": seq}, {"o": seq})
    DeltaTable(str(table)).create_checkpoint()
    log, latest = table / "_delta_log", DeltaTable(str(table)).version()
    for older in sorted(log.glob("*.json"))[:-1]:  # what a cleanup after the checkpoint removes
        older.unlink()
    meta = DeltaStore.commit_metadata(TableState({"o": 3}, {"o": 3}))
    (log / f".{latest + 1:020d}.json.leftover.tmp").write_text(
        json.dumps({"commitInfo": {"timestamp": 1, **meta}}) + "\n")
    assert recorded_durable(DeltaStore(str(tmp_path)).recorded_durable()) == {"o": 2}


def test_a_restart_reports_each_origins_highest_durable_number_over_its_tables(tmp_path: Path) -> None:
    """Each table records the durable numbers of its last commit; the origin's is the highest of them,
    whichever table the walk of the store meets last."""
    for high in ("a", "b"):
        root = tmp_path / high
        store = DeltaStore(str(root))
        for name in ("a", "b"):
            number = 9 if name == high else 4
            store.write(str(root / name), [change([(None, number, "x")])], {"o": number}, {"o": number})
        assert recorded_durable(DeltaStore(str(root)).recorded_durable()) == {"o": 9}


def test_a_flush_with_nothing_to_write_still_records_its_numbers(tmp_path: Path) -> None:
    """Every item of a flush may be a replay the table holds: the commit still carries the numbers, or a
    restart would report less durable than was acknowledged."""
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path))
    store.write(str(table), [change([(None, 1, "a")])], {"o": 1}, {"o": 1})
    store.write(str(table), [], {"o": 2}, {"o": 2})
    restarted = DeltaStore(str(tmp_path))
    assert restarted.read_state(str(table)).marks == {"o": 2} and recorded_durable(restarted.recorded_durable()) == {"o": 2}
    assert rows_of(table) == {1: "a"}


def test_a_wall_clock_stepped_back_between_two_flushes_never_stamps_a_commit_before_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spec.sync.commit_time: a commit is stamped max(now, previous + 1 ms), as Delta's in-commit timestamps
    are; the nemesis saw version 8 stamped before version 3 after an NTP step back."""
    from reference.sync import dv_commit

    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path))
    store.write(str(table), [change([(None, k, "a") for k in range(10)])], {"o": 1}, {"o": 1})
    wall = {"s": 2_000_000_000.0}
    monkeypatch.setattr(dv_commit, "time", type("Wall", (), {"time": staticmethod(lambda: wall["s"])}))
    stamps = []
    for seq, step_s in ((2, 0.0), (3, -60.0), (4, -60.0), (5, 3600.0)):
        wall["s"] += step_s
        store.write(str(table), [change([(seq, seq, "b")])], {"o": seq}, {"o": seq})
        version = DeltaTable(str(table)).version()
        commit = actions(table, version)
        (info,) = [a["commitInfo"] for a in commit if "commitInfo" in a]
        assert {a["remove"]["deletionTimestamp"] for a in commit if "remove" in a} == {info["timestamp"]}
        entry = table / "_delta_log" / f"{version:020d}.json"
        assert entry.stat().st_mtime_ns == info["timestamp"] * 1_000_000
        stamps.append(info["timestamp"])
    first = 2_000_000_000_000
    assert stamps == [first, first + 1, first + 2, first + 3_600_000 - 120_000]
