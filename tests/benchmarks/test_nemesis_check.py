"""The nemesis checker reads tables with deletion vectors as the store's own reader does, and fails a run whose
table or durable numbers disagree with the history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.nemesis_check import check, read_versions
from conformance.sync.suite import DESCS, rows_batch
from reference.sync.store import DeltaStore, StoreSettings, read_delta
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange


def _change(rows: list[tuple[Any, ...]]) -> SquashedChange:
    batch = rows_batch(rows)
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


def _tx(ops: list[tuple[str, int, int | None, str | None]], lsn: int, committed: bool = True) -> dict[str, Any]:
    return {"committed": committed, "ops": ops, "lsn_before": lsn - 1, "lsn_after": lsn, "t": lsn / 10}


HISTORY = [
    _tx([("insert", k, None, f"t0k{k}") for k in range(30)], 10),
    _tx([("update", 3, None, "t1"), ("delete", 4, None, None)], 20),
    _tx([("update", 5, None, "rolled")], 25, committed=False),
    _tx([("move", 6, 40, "t2")], 30),
]
FINAL = {k: f"t0k{k}" for k in range(30) if k not in (3, 4, 6)} | {3: "t1", 40: "t2"}


def _table(root: Path, wrong_last: bool = False) -> Path:
    """The history's three committed transactions as three commits (small files, so updates become DVs)."""
    store = DeltaStore(str(root), settings=StoreSettings(target_file_rows=8))
    table = root / "t"
    store.write(str(table), [_change([(None, k, f"t0k{k}") for k in range(30)])], {"n": 10}, {"n": 10})
    store.write(str(table), [_change([(3, 3, "t1"), (4, None, None)])], {"n": 20}, {"n": 20})
    last = [(6, 40, "t2")] if not wrong_last else [(6, 40, "t2"), (3, 3, "rolled")]
    store.write(str(table), [_change(last)], {"n": 30}, {"n": 30})
    return table


def _history(observations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"origin": "n", "transactions": HISTORY, "observations": observations}


def test_replayed_versions_equal_the_store_reader_with_deletion_vectors(tmp_path: Path) -> None:
    table = _table(tmp_path)
    versions = read_versions(table, "n")
    assert versions.states[-1] == {int(r["id"]): r["v"] for r in read_delta(str(table)).to_pylist()} == FINAL
    assert versions.durable[-3:] == [10, 20, 30]
    assert any("deletionVector" in line for line in (table / "_delta_log" / f"{versions.numbers[-2]:020}.json")
               .read_text().splitlines())
    last = versions.numbers[-1]
    verdict = check(_history([{"t": 1.0, "reported": 30, "confirmed": 20, "version": last}]), table, FINAL, 1.0, 60.0)
    assert verdict["passed"], verdict


def test_a_rolled_back_value_a_durable_number_ahead_and_a_late_catch_up_fail_the_run(tmp_path: Path) -> None:
    table = _table(tmp_path, wrong_last=True)
    first = read_versions(table, "n").numbers[-3]  # records durable 10
    ahead = [{"t": 1.0, "reported": 30, "confirmed": 20, "version": first}]
    verdict = check(_history(ahead), table, FINAL, 61.0, 60.0)
    failed = {name for name, p in verdict["properties"].items() if not p["passed"]}
    assert failed == {"nothing uncommitted, every key in commit order, each change once",
                      "durable numbers never ahead of the table", "final table equals Postgres",
                      "caught up within 60 s of the last heal"}, verdict


def _two_sinks(root: Path, middle_durable: dict[str, int]) -> Path:
    """The history with tx 1 landing in two steps, as two sinks' parts: sink ``a``'s update, then sink ``b``'s
    delete with tx 2; the middle commit records ``middle_durable``."""
    store = DeltaStore(str(root), settings=StoreSettings(target_file_rows=8))
    table = root / "t"
    store.write(str(table), [_change([(None, k, f"t0k{k}") for k in range(30)])], {}, {"a": 10, "b": 10})
    store.write(str(table), [_change([(3, 3, "t1")])], {}, middle_durable)
    store.write(str(table), [_change([(4, None, None), (6, 40, "t2")])], {}, {"a": 30, "b": 30})
    return table


def test_with_several_origins_a_version_is_held_to_the_smallest_and_a_confirmed_slot_to_its_rows(tmp_path: Path) -> None:
    history = {"origin": "a", "origins": ["a", "b"], "transactions": HISTORY}
    good = _two_sinks(tmp_path / "good", {"a": 20, "b": 10})  # sink a ahead of sink b: no alarm
    middle = read_versions(good, ("a", "b")).numbers[-2]
    fine = [{"t": 1.0, "reported": {"a": 20, "b": 10}, "confirmed": 10, "version": middle}]
    assert check(history | {"observations": fine}, good, FINAL, 1.0, 60.0)["passed"]

    confirmed_early = [{"t": 1.0, "reported": {"a": 20, "b": 10}, "confirmed": 20, "version": middle}]
    verdict = check(history | {"observations": confirmed_early}, good, FINAL, 1.0, 60.0)
    assert verdict["properties"]["durable numbers never ahead of the table"]["problems"] == [
        f"at 1.0 s the slot was confirmed at 20, but version {middle} lacks it: key 4 holds 't0k4', deleted by tx 1"]

    bad = _two_sinks(tmp_path / "bad", {"a": 20, "b": 20})  # both claim tx 1, the delete is not there
    verdict = check(history | {"observations": []}, bad, FINAL, 1.0, 60.0)
    assert verdict["properties"]["durable numbers never ahead of the table"]["problems"] == [
        f"version {middle} records durable 20 but key 4 holds 't0k4', deleted by tx 1"]
