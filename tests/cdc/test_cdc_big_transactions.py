"""A transaction larger than the sync server's message limit lands: its puts go message by message; one larger
than the pipeline's spill budgets streams through its source and sink tasks in bounded pieces."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference.cdc import source as source_module
from reference.cdc.spill import ChangeSpill, PartSpill
from reference.cdc.verify import verify
from reference.pipeline import postgres as postgres_module
from reference.pipeline.syncserver import FlushSettings, SyncServerProcess
from spec.pgoutput.changes import TableChanges, TablePut
from tests.cdc.conftest import Database
from tests.cdc.test_cdc_spill import ABORTED, LARGE
from tests.cdc.tasks import run_pipeline, sql

LIMIT = 256 * 1024
"""The sync server's message limit here (its default is 128 MiB)."""


def test_a_transaction_larger_than_the_message_limit_lands(database: Database, tmp_path: Path) -> None:
    sql(database, "BEGIN; INSERT INTO items (id, name, big) SELECT g, 'n' || g, repeat(md5(g::text), 8) "
                  "FROM generate_series(1, 2500) g; UPDATE items SET qty = 1 WHERE id % 3 = 0; COMMIT")
    server = SyncServerProcess(str(tmp_path / "store"), tmp_path / "server.log", FlushSettings(max_message_bytes=LIMIT))
    server.start()
    try:
        assert run_pipeline(database, server, 2, message_bytes=LIMIT // 4) == [None, None]
    finally:
        server.stop()
    assert verify(database.address, database.name, tmp_path / "store") == []


def test_message_batches_keep_order_and_size() -> None:
    import pyarrow as pa

    from spec.sync.flight import message_batches

    table = pa.table({"id": range(5000), "s": ["x" * (i % 700) for i in range(5000)]})
    batches = message_batches(table, 64 * 1024)
    assert pa.Table.from_batches(batches).equals(table)
    assert len(batches) > 20 and max(b.nbytes for b in batches) <= 64 * 1024
    one_large_row = pa.table({"s": ["y" * 100_000, "z"]})
    assert [b.num_rows for b in message_batches(one_large_row, 1000)] == [1, 1]
    assert message_batches(table.slice(0, 0), 1000) == []


@pytest.mark.parametrize("readers", [1, 3])
def test_a_transaction_larger_than_the_spill_budgets_streams_through_the_pipeline(
        database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readers: int) -> None:
    """On PySpark's tasks (on threads here) the source spills the open transaction's changes and each sink its
    parts (each sent as one put), in bounded pieces, and the transaction lands exactly: key changes of TOASTed rows across
    sinks, a TRUNCATE, an ADD COLUMN and a rolled-back savepoint inside it."""
    source_pieces: list[int] = []
    sink_pieces: list[int] = []

    class CountedChanges(ChangeSpill):
        def write(self, changes: dict[str, TableChanges]) -> None:
            source_pieces.append(sum(len(c) for c in changes.values()))
            super().write(changes)

    class CountedPieces(PartSpill):
        def write(self, put: TablePut) -> None:
            sink_pieces.append(put.changes)
            super().write(put)

    monkeypatch.setattr(source_module, "ChangeSpill", CountedChanges)
    monkeypatch.setattr(postgres_module, "PartSpill", CountedPieces)
    sql(database, "INSERT INTO items (id, name, big) SELECT g, 'toast', repeat(md5(g::text), 100) "
                  "FROM generate_series(90001, 90040) g")
    moves = "UPDATE items SET id = id + 1000 WHERE id BETWEEN 90001 AND 90040"
    sql(database, ABORTED, "; ".join((*LARGE[:-1], moves, LARGE[-1])), "INSERT INTO items (id, name) VALUES (9999, 'later')")
    server = SyncServerProcess(str(tmp_path / "store"), tmp_path / "server.log")
    server.start()
    try:
        assert run_pipeline(database, server, readers, spill_bytes=64 * 1024) == [None] * readers
    finally:
        server.stop()
    assert len(source_pieces) > 10 and max(source_pieces) < 1000  # spilled as it came, in bounded pieces
    assert len(sink_pieces) > 5 and max(sink_pieces) < 1500
    assert verify(database.address, database.name, tmp_path / "store") == []
