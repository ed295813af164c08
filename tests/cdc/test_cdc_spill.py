"""A transaction larger than the source's spill budget: its changes go to a spill file as they arrive and
land exactly, in order with a TRUNCATE, an ADD COLUMN and a rolled-back subtransaction inside it; an
aborted one lands nothing. The spill file's puts read back as written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from reference.cdc import source as source_module
from reference.cdc.__main__ import main
from reference.cdc.source import SlotSource, SlotSpec
from reference.cdc.spill import PartSpill, TransactionSpill
from reference.cdc.verify import verify
from reference.pipeline.syncserver import SyncServerProcess
from reference.sync.client import SyncPut
from spec.pgoutput.changes import Op, RowChange, TableChanges, TableImage, TablePut
from spec.pgoutput.feedback import record_boundary
from spec.pgoutput.messages import parse_lsn
from tests.cdc.conftest import Database
from tests.cdc.tasks import sql

BIG = "repeat(md5(g::text), 8)"
ABORTED = f"BEGIN; INSERT INTO items (id, name, big) SELECT g, 'aborted', {BIG} FROM generate_series(50001, 52000) g; ROLLBACK"
LARGE = (
    "BEGIN",
    f"INSERT INTO items (id, name, big) SELECT g, 'n' || g, {BIG} FROM generate_series(1, 1500) g",
    "INSERT INTO pairs SELECT g, 'p', g, 'note' FROM generate_series(1, 300) g",
    "UPDATE items SET qty = 7 WHERE id % 5 = 0",
    "UPDATE items SET id = id + 10000 WHERE id BETWEEN 100 AND 150",
    "SAVEPOINT undone",
    f"INSERT INTO items (id, name, big) SELECT g, 'rolled back', {BIG} FROM generate_series(20001, 20600) g",
    "DELETE FROM items WHERE id < 50",
    "ROLLBACK TO SAVEPOINT undone",
    "TRUNCATE pairs",
    "INSERT INTO pairs SELECT g, 'q', g, NULL FROM generate_series(1, 40) g",
    "ALTER TABLE items ADD COLUMN extra integer",
    f"INSERT INTO items (id, name, big, extra) SELECT g, 'after', {BIG}, g FROM generate_series(3001, 3600) g",
    "UPDATE items SET extra = 1 WHERE id BETWEEN 10 AND 20",
    "COMMIT",
)


def test_a_spilled_transaction_lands_exactly(database: Database, sync_server: SyncServerProcess,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[int] = []

    class CountedSpill(TransactionSpill):
        def write(self, changes: dict[str, TableChanges]) -> None:
            written.append(sum(len(c) for c in changes.values()))
            super().write(changes)

    monkeypatch.setattr(source_module, "TransactionSpill", CountedSpill)
    sql(database, ABORTED, "; ".join(LARGE), "INSERT INTO items (id, name) VALUES (9999, 'later')")
    assert main(["--source", database.url(), "--publication", database.name, "--slot", database.name,
                 "--sync", sync_server.location, "--until-lsn", "current", "--spill", "64kB"]) == 0
    assert len(written) > 10 and max(written) < 1000  # spilled as it came, in bounded pieces
    assert verify(database.address, database.name, Path(sync_server.store)) == []
    assert database.query("SELECT count(*), count(*) FILTER (WHERE name IN ('aborted', 'rolled back')) FROM items") == \
        [("2101", "0")]


def test_spilled_puts_read_back_in_order_then_the_rest() -> None:
    image = TableImage("public/t", (("id", pa.int64()),), (("v", pa.string()),))

    def insert(k: int) -> RowChange:
        return RowChange(image, Op.INSERT, None, (k,), (f"v{k}",), (True,))

    spill = TransactionSpill()
    spill.write({"public/t": [insert(1), insert(2)]})
    spill.write({"public/t": [insert(3), RowChange.truncate(image), insert(4)], "public/u": []})
    rest = SyncPut("public/t", image.batch([insert(5)]), image.descriptors())
    puts = spill.puts(then=[rest])
    assert len(puts) == 3 and spill.rows == 5
    assert [p.batch.column("new.id").to_pylist() for p in puts] == [[1, 2], [4], [5]]
    assert [p.truncate for p in puts] == [False, True, False]
    assert puts[-1] is rest and puts[1].descriptors == image.descriptors()
    assert [p.batch.column("new.id").to_pylist() for p in puts[1:]] == [[4], [5]]
    with pytest.raises(IndexError):
        puts[3]


def test_a_sinks_spilled_part_is_one_put_read_back_piece_by_piece() -> None:
    """A sink's part written out in pieces is sent as one put (concurrent sinks must not interleave puts
    inside a transaction): the pieces after the last TRUNCATE, in the part's last image, then what is held."""
    image = TableImage("public/t", (("id", pa.int64()),), (("v", pa.string()),))
    wider = TableImage("public/t", image.keys, (*image.values, ("w", pa.int32())))

    def insert(k: int, table: TableImage = image) -> RowChange:
        return RowChange(table, Op.INSERT, None, (k,), (f"v{k}",) + (k,) * (table is wider),
                         (True,) * len(table.values))

    spill = PartSpill()
    spill.write(TablePut.of([insert(1)]))
    spill.write(TablePut.of([insert(2), RowChange.truncate(image), insert(3)]))
    spill.write(TablePut.of([insert(4)]))
    put = spill.put(then=TablePut.of([insert(5, wider)]))
    assert put.truncate and put.descriptors == wider.descriptors() and put.batch.num_rows == 3
    assert not isinstance(put.batch, pa.Table)
    read = pa.concat_tables(list(put.batch.tables()))
    assert read.schema == put.batch.schema == wider.schema()
    assert read.column("new.id").to_pylist() == [3, 4, 5] and read.column("w").to_pylist() == [None, None, 5]
    assert spill.put(then=TablePut.of([RowChange.truncate(image)])).batch.num_rows == 0


def test_a_transaction_resent_after_a_reconnection_is_not_spilled_again(database: Database,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Postgres resends from the confirmed position what the source already handed over: a large such
    transaction is dropped as it comes (its Begin names its commit LSN), not written out again."""
    written: list[int] = []

    class CountedSpill(TransactionSpill):
        def write(self, changes: dict[str, TableChanges]) -> None:
            written.append(len(changes))
            super().write(changes)

    monkeypatch.setattr(source_module, "TransactionSpill", CountedSpill)
    sql(database, "; ".join(LARGE[:3] + ("COMMIT",)))
    end = record_boundary(parse_lsn(str(database.query("SELECT pg_current_wal_insert_lsn()")[0][0])))
    source = SlotSource(database.address, SlotSpec(database.name, database.name, spill_bytes=64 * 1024))
    source.open()
    try:
        source.feedback.sent = end  # as after a reconnection: everything before ``end`` was handed over
        for _ in range(60):
            assert source.read(0.5) is None
            if source.feedback.received >= end:
                break
            source.ask_position()
        assert source.feedback.received >= end and written == []
    finally:
        source.close()
