"""DDL in the stream, with any number of sinks and in one process: TRUNCATE empties the Delta table at
its place among the rows, ADD COLUMN adds the column in order with the rows (also in the middle of a
transaction), DROP COLUMN leaves the Delta column to the rows written before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference.cdc.__main__ import main
from reference.cdc.verify import verify
from reference.pipeline.syncserver import SyncServerProcess
from tests.cdc.conftest import Database
from tests.cdc.tasks import run_pipeline, sql

BIG = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 60) g)"
WORKLOAD = (
    "INSERT INTO items (id, name, big) SELECT g, 'n' || g, " + BIG + " FROM generate_series(1, 30) g",
    "INSERT INTO pairs VALUES (1, 'x', 1, NULL), (2, 'y', 2, NULL)",
    "BEGIN; DELETE FROM items WHERE id < 5; INSERT INTO items (id) VALUES (100); TRUNCATE items; "
    "INSERT INTO items (id, name, big) SELECT g, 'after', " + BIG + " FROM generate_series(200, 220) g; "
    "UPDATE items SET id = 300 WHERE id = 201; COMMIT",
    "UPDATE items SET id = id + 1000 WHERE id BETWEEN 202 AND 210",
    "DELETE FROM items WHERE id > 1215",
    "INSERT INTO pairs VALUES (3, 'z', 3, NULL)",
    "TRUNCATE items, pairs",
    "INSERT INTO items (id, name) SELECT g, 'last' FROM generate_series(7, 16) g",
    "INSERT INTO pairs VALUES (4, 'w', 4, NULL)",
)


@pytest.mark.parametrize("readers", [1, 3])
def test_truncate_lands_in_order_with_the_rows(database: Database, sync_server: SyncServerProcess,
                                               readers: int) -> None:
    sql(database, *WORKLOAD)
    assert run_pipeline(database, sync_server, readers) == [None] * readers
    assert verify(database.address, database.name, Path(sync_server.store)) == []
    assert database.query("SELECT count(*) FROM items") == [("10",)]


def test_truncate_in_one_process(database: Database, sync_server: SyncServerProcess) -> None:
    sql(database, *WORKLOAD)
    assert main(["--source", database.url(), "--publication", database.name, "--slot", database.name,
                 "--sync", sync_server.location, "--until-lsn", "current"]) == 0
    assert verify(database.address, database.name, Path(sync_server.store)) == []


ALTERED = (
    "INSERT INTO items (id, name, big) SELECT g, 'n' || g, " + BIG + " FROM generate_series(1, 12) g",
    "ALTER TABLE items ADD COLUMN extra integer",
    "INSERT INTO items (id, name, extra) VALUES (20, 'after', 7)",
    "UPDATE items SET extra = 5 WHERE id = 1",
    "BEGIN; INSERT INTO items (id) VALUES (21); ALTER TABLE items ADD COLUMN more text; "
    "INSERT INTO items (id, more) VALUES (22, 'm'); UPDATE items SET id = 102, qty = 3 WHERE id = 2; "
    "UPDATE items SET extra = 1 WHERE id = 3; COMMIT",
    "UPDATE items SET more = 'later' WHERE id = 102",
    "INSERT INTO pairs VALUES (1, 'x', 1, 'kept'), (2, 'y', 2, 'gone')",
    "ALTER TABLE pairs DROP COLUMN note",
    "INSERT INTO pairs VALUES (3, 'z', 3)",
    "DELETE FROM pairs WHERE a = 2",
)


@pytest.mark.parametrize("readers", [0, 3])
def test_add_and_drop_column_land_in_order_with_the_rows(database: Database, sync_server: SyncServerProcess,
                                                         readers: int) -> None:
    """``readers`` 0: one process (``reference.cdc``); else the pipeline's tasks with that many sinks."""
    sql(database, *ALTERED)
    if readers:
        assert run_pipeline(database, sync_server, readers) == [None] * readers
    else:
        assert main(["--source", database.url(), "--publication", database.name, "--slot", database.name,
                     "--sync", sync_server.location, "--until-lsn", "current"]) == 0
    assert verify(database.address, database.name, Path(sync_server.store)) == []
    assert database.query("SELECT count(*) FROM items WHERE more IS NOT NULL") == [("2",)]


def test_a_changed_column_type_stops_every_sink_with_advice(database: Database,
                                                             sync_server: SyncServerProcess) -> None:
    sql(database, "INSERT INTO items (id, qty) VALUES (1, 1)", "ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        "INSERT INTO items (id, qty) VALUES (2, 2)")
    stopped = run_pipeline(database, sync_server, 2)
    assert stopped[0] == stopped[1] == (
        "[PGOUTPUT_UNAPPLIABLE_SCHEMA_CHANGE] table public/items: column qty changed from int32 to int64, which its "
        "Delta table cannot follow; start the table over: stop, drop the slot and the Delta table's directory, and "
        "run again with --create-slot (the initial snapshot copies the tables as they are)")
    (difference,) = verify(database.address, database.name, Path(sync_server.store))
    assert (2,) in difference.missing and not difference.different and not difference.unexpected  # nothing after it
