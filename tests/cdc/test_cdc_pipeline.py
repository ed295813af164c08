"""The pipeline on PySpark, killed with -9 mid-stream (driver, Spark workers and its sync server at
once, as a machine dies), then run again to the WAL position of its restart: every table equals
Postgres, no key twice, and the slot moved only to what the surviving store holds durable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.procstat import descendants
from reference.cdc import workload
from reference.cdc.pgwire import PgConnection
from conformance.pgoutput.postgres_server import PostgresServer
from reference.cdc.source import slot_position
from tests.cdc.conftest import Database

pytestmark = pytest.mark.spark
SESSIONS = 4


def _kill_9_with_everything_it_started(process: subprocess.Popen[bytes]) -> None:
    for pid in [process.pid, *descendants(process.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(30)


def test_kill_9_of_the_pipeline_then_restart(postgres_server: PostgresServer, tmp_path: Path) -> None:
    admin = postgres_server.connect()
    admin.query("CREATE DATABASE pipeline")
    admin.close()
    db = Database(postgres_server, "pipeline")
    conn = PgConnection(db.address)
    workload.create(conn, "pipeline")
    conn.close()
    store = tmp_path / "store"
    run = [sys.executable, "-m", "reference.pipeline", "--source", db.url(), "--publication", "pipeline",
           "--slot", "pipeline", "--store", str(store), "--readers", "2"]
    first = subprocess.Popen([*run, "--create-slot"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not db.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pipeline' AND active"):
            assert first.poll() is None, "the pipeline ended before streaming"
            time.sleep(0.2)
        created_at = slot_position(db.address, "pipeline")
        workload.run_concurrently(db.address, SESSIONS, 20, seed=1)
        while slot_position(db.address, "pipeline") == created_at:
            assert first.poll() is None, "the pipeline ended before confirming anything"
            time.sleep(0.1)
        workload.run_concurrently(db.address, SESSIONS, 5, seed=2)  # in flight when the pipeline dies
    finally:
        _kill_9_with_everything_it_started(first)
    killed_at = slot_position(db.address, "pipeline")
    workload.run_concurrently(db.address, SESSIONS, 5, seed=3)
    second = subprocess.run([*run, "--until-lsn", "current", "--verify"], capture_output=True, text=True,
                            timeout=300, check=False)
    assert second.returncode == 0, second.stdout + second.stderr[-3000:]
    assert second.stdout.splitlines()[-1].startswith("pipeline OK")
    assert created_at is not None and killed_at is not None and created_at < killed_at
    assert (slot_position(db.address, "pipeline") or 0) > killed_at
