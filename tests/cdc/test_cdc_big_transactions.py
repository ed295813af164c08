"""A transaction larger than the sync server's message limit lands: its puts go message by message."""

from __future__ import annotations

from pathlib import Path

from reference.cdc.verify import verify
from reference.pipeline.syncserver import FlushSettings, SyncServerProcess
from tests.cdc.conftest import Database
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
