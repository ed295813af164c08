"""A database that already holds rows ends equal to its Delta tables: the slot created with an
initial snapshot copies them in chunks, consistently with where the stream starts; a snapshot cut
off mid-way (the connection and the process gone) resumes after its last durable chunk, in a new
snapshot, while the tables keep changing, without duplicates or gaps."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reference.cdc import workload
from reference.cdc.__main__ import main
from reference.cdc.replicate import ReplicationCounts, replicate, settled_durable
from reference.cdc.source import SlotSource, SlotSpec
from reference.pipeline.postgres import copy_snapshot
from reference.pipeline.syncserver import SyncServerProcess
from reference.sync.client import SyncClient
from spec.pgoutput.coalesce import Batch
from spec.pgoutput.snapshot import SnapshotProgress
from spec.pgoutput.transactions import SourceTransaction
from tests.cdc.conftest import Database
from tests.cdc.tasks import run_pipeline, sql
from tests.cdc.test_cdc_exactly_once import assert_tables_equal, stop_at_current

BASE = 10 ** 12
"""Keys of the rows loaded before the slot (the workload's keys are far below)."""


def _load(database: Database, rows: int) -> None:
    """Rows the database holds before the slot exists: TOASTed values, NULLs, a composite key."""
    database.query(f"INSERT INTO items (id, name, qty, price, big, flag) SELECT {BASE} + g, 'n' || g, g, g / 7.0, "
                   f"CASE WHEN g % 50 = 0 THEN repeat('t' || g, 900) END, g % 3 = 0 "
                   f"FROM generate_series(1, {rows}) g")
    database.query(f"INSERT INTO pairs (a, b, v, note) SELECT g % 97, 'b' || g, g, NULL FROM generate_series(1, {rows}) g")


def test_a_database_with_rows_ends_equal_to_its_delta_tables(
        database: Database, sync_server: SyncServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload.run_concurrently(database.address, 2, 10)
    _load(database, 12_000)  # three chunks of items, three of pairs
    slot = f"{database.name}_snap"
    args = ["--source", database.url(), "--publication", database.name, "--slot", slot, "--sync", sync_server.location,
            "--state-dir", str(tmp_path), "--until-lsn", "current", "--verify", "--store", sync_server.store]
    assert main([*args, "--create-slot"]) == 0
    out, err = capsys.readouterr()
    assert "pipeline OK" in out
    assert "cdc: snapshot of public/items: 5000 rows so far" in err and "cdc: snapshot of public/pairs read: " in err
    workload.run_concurrently(database.address, 2, 10, seed=1)  # then the stream, from the slot's point
    assert main(args) == 0
    assert "pipeline OK" in capsys.readouterr().out


def _run(database: Database, server: SyncServerProcess, spec: SlotSpec, *, chunks: int | None) -> ReplicationCounts:
    """A source on ``spec`` until ``chunks`` chunks were handed over (then cut off, as by a crash: no
    clean end of its transaction), or, with None, until what is committed now is durable."""
    source = SlotSource(database.address, spec)
    client = SyncClient(lambda: server.location, origin=spec.slot)
    handed: list[SourceTransaction] = []
    source.open(durable=lambda: settled_durable(client))
    if chunks is None:
        stop_at_current(database, source)
    cut = threading.Event()

    def on_transaction(tx: SourceTransaction) -> None:
        handed.append(tx)
        if chunks is not None and len(handed) >= chunks:
            cut.set()

    try:
        return replicate(source, client, stop=cut.is_set, on_transaction=on_transaction, batch=Batch(max_rows=1))
    finally:
        source.close()
        client.close()


def test_a_snapshot_cut_off_resumes_without_duplicates_or_gaps(
        database: Database, sync_server: SyncServerProcess, tmp_path: Path) -> None:
    _load(database, 3_000)
    spec = SlotSpec(f"{database.name}_snap", database.name, create_slot=True, snapshot=True, chunk_rows=400,
                    state_dir=str(tmp_path))
    first = _run(database, sync_server, spec, chunks=4)
    assert first.transactions == 4
    # meanwhile: rows already copied and rows not yet copied change, vanish, appear; keys move
    database.query(f"UPDATE items SET name = 'changed', big = repeat('u', 5000) WHERE id % 10 = 1")
    database.query(f"DELETE FROM items WHERE id % 10 = 2")
    database.query(f"UPDATE items SET id = id + 5000000 WHERE id % 10 = 3")
    database.query(f"INSERT INTO items (id, name) SELECT {BASE} - g, 'early' FROM generate_series(1, 50) g")
    database.query("UPDATE pairs SET v = -v WHERE a = 5")
    database.query("DELETE FROM pairs WHERE a = 6")
    workload.run_concurrently(database.address, 2, 10)
    second = _run(database, sync_server, spec, chunks=None)
    assert_tables_equal(database, sync_server)
    progress = SnapshotProgress.parse((tmp_path / f"{database.name}.{spec.slot}.snapshot").read_text())
    numbers = [n for n, _, _ in progress.chunks]
    assert progress.complete and numbers == sorted(set(numbers))
    (_, fourth_table, fourth), (_, fifth_table, fifth) = progress.chunks[3:5]
    assert fourth_table == fifth_table == "public/items" and int(fifth[0]) > int(fourth[0])  # resumed, not restarted
    assert second.transactions > 0


def test_the_pipeline_driver_copies_the_rows_then_the_sinks_stream(
        database: Database, sync_server: SyncServerProcess, tmp_path: Path) -> None:
    """On PySpark the driver reads the snapshot before the job (its own origin, waited for until durable);
    the job's tasks (here on threads) then stream from the slot, also changes of the copied rows."""
    workload.run_concurrently(database.address, 2, 5)
    _load(database, 2_500)
    database.query(f"SELECT pg_drop_replication_slot('{database.name}')")  # the driver creates it, with its snapshot
    spec = SlotSpec(database.name, database.name, create_slot=True, reads_back=True, snapshot=True,
                    state_dir=str(tmp_path), chunk_rows=1_000)
    held = int(str(database.query("SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pairs)")[0][0]))
    assert copy_snapshot(SlotSource(database.address, spec), sync_server.location) == held
    assert copy_snapshot(SlotSource(database.address, spec), sync_server.location) == 0  # done: not again
    sql(database, f"UPDATE items SET qty = -1 WHERE id % 7 = 0 AND id > {BASE}",
        f"UPDATE items SET id = id + 1000000 WHERE id BETWEEN {BASE + 1} AND {BASE + 100}",
        "DELETE FROM pairs WHERE v % 5 = 0")
    workload.run_concurrently(database.address, 2, 5, seed=1)
    assert run_pipeline(database, sync_server, 2) == [None, None]
    assert_tables_equal(database, sync_server)
