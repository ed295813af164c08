"""Outages are waited out: a sync server away for longer than its client's deadline, and a crash of
Postgres mid-stream, end with every table equal to Postgres, with warning lines naming what was
waited for and the WAL the slot retains; ``--max-retained-wal`` stops with one line instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reference.cdc import workload
from reference.cdc.__main__ import main
from reference.cdc.replicate import ReplicationCounts
from reference.cdc.verify import verify
from reference.pipeline.postgres import PartsEnd
from conformance.loopback import free_port
from reference.pipeline.syncserver import SyncServerProcess
from spec.pgoutput.outage import OutagePolicy
from tests.cdc.conftest import Database
from tests.cdc.tasks import Records, run_pipeline
from tests.cdc.test_cdc_exactly_once import assert_tables_equal, replicating, stop_at_current

CLIENT_DEADLINE_S = 0.5
"""Far shorter than the outages below: before the outage policy, the source exited after it."""


def _policy(database: Database) -> OutagePolicy:
    return OutagePolicy(database.name, warn_every_s=0.2, attempt_s=CLIENT_DEADLINE_S, backoff_max_s=0.5)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within 30 s"
        time.sleep(0.05)


def test_a_sync_server_away_longer_than_the_client_deadline_is_waited_out(
        database: Database, sync_server: SyncServerProcess) -> None:
    warnings: list[str] = []
    with replicating(database, sync_server, client_deadline_s=CLIENT_DEADLINE_S, policy=_policy(database),
                     warn=warnings.append) as (source, _, result):
        workload.run_concurrently(database.address, 2, 10)
        sync_server.kill()
        workload.run_concurrently(database.address, 2, 10, seed=1)
        _wait_for(lambda: len(warnings) >= 3, "three warnings")  # at least 3 x 0.2 s, longer than the deadline
        sync_server.start()
        stop_at_current(database, source)
    assert isinstance(result[0], ReplicationCounts), result
    away = [w for w in warnings if w.startswith("waiting for the sync server at grpc://127.0.0.1:")]
    assert away and all(f"slot {database.name} retains " in w and " of WAL" in w for w in away), warnings
    assert warnings[-1].startswith("the sync server is back after ")
    assert_tables_equal(database, sync_server)


def test_a_postgres_crash_mid_stream_is_waited_out(database: Database, sync_server: SyncServerProcess) -> None:
    warnings: list[str] = []
    with replicating(database, sync_server, client_deadline_s=CLIENT_DEADLINE_S, policy=_policy(database),
                     warn=warnings.append) as (source, _, result):
        workload.run_concurrently(database.address, 2, 10)
        database.server.restart(mode="immediate")
        workload.run_concurrently(database.address, 2, 10, seed=1)
        stop_at_current(database, source)
    assert isinstance(result[0], ReplicationCounts), result
    assert any(w.startswith("Postgres is back after ") for w in warnings), warnings
    assert_tables_equal(database, sync_server)


def test_max_retained_wal_stops_with_one_line(database: Database, capsys: pytest.CaptureFixture[str]) -> None:
    workload.run_concurrently(database.address, 1, 20)  # the slot now retains the WAL of these
    status = main(["--source", database.url(), "--publication", database.name, "--slot", database.name,
                   "--sync", f"grpc://127.0.0.1:{free_port()}", "--max-retained-wal", "1kB"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"cdc: slot {database.name} retains ")
    assert "more than --max-retained-wal 1.0 KiB: stopping before the database's disk fills" in lines[0]
    assert "while waiting for the sync server at grpc://127.0.0.1:" in lines[0]


def test_the_pipelines_source_task_streams_again_after_postgres_ended_its_stream(
        database: Database, sync_server: SyncServerProcess) -> None:
    """Postgres ends the replication stream under the PySpark source task (as its wal_sender_timeout does
    while stalled sinks hold the task in the shuffle): the task streams from the slot again, skips what it
    already sent, and every table ends equal to Postgres (before: PgConnectionError failed the task)."""
    workload.run_concurrently(database.address, 2, 10, seed=4)
    ended: list[str | None] = []

    def end_the_stream_after_the_first_transaction(records: Records) -> Records:
        for item in records:
            yield item
            if not ended and isinstance(item[1], PartsEnd):
                ended.append(database.query("SELECT pg_terminate_backend(active_pid)::text FROM pg_replication_slots "
                                            f"WHERE slot_name = '{database.name}'")[0][0])
    assert run_pipeline(database, sync_server, 2, tap=end_the_stream_after_the_first_transaction) == [None, None]
    assert ended == ["true"]
    assert verify(database.address, database.name, Path(sync_server.store)) == []
