"""``python -m benchmarks cdc-acceptance [--json]``: issue 39's done criterion, run for real on PySpark.

A Postgres 15 with ``ssl = on`` (a throwaway CA) already holds rows (the workload's two tables: TOASTed
values, a composite key, NULLs) and keeps changing while the pipeline runs with its defaults
(``python -m reference.pipeline --source 'postgresql://...?sslmode=verify-full&sslrootcert=CA'
--create-slot``: 2 sinks, the initial snapshot): concurrent sessions (key changes of rows whose TOASTed
value is unchanged, most across sinks), a 450,000-row transaction, a TRUNCATE and a refill, an ADD
COLUMN and updates of it. The pipeline is killed with -9 (driver, Spark workers and its sync server at
once) while the large transaction is in flight; more changes commit; a second run (``--until-lsn
current --verify``) streams on, and its sync server is killed and started again on the same port and
store 90 s later (an outage longer than the source's old 60 s limit). The verdict is that run's
``--verify``: every published table equal to its Delta table. Progress on stderr; the last line is
the verdict (``cdc-acceptance OK ...`` or ``cdc-acceptance FAILED ...``), ``--json`` adds one object.
Takes 10-20 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from conformance.pgoutput.postgres_server import PostgresServer
from benchmarks.procstat import descendants
from conformance.pgoutput.tls import serve_tls, throwaway_ca
from reference.cdc import workload
from reference.cdc.pgwire import PgConnectionError, PgServerError
from reference.cdc.source import slot_position
from reference.pipeline.syncserver import FlushSettings, pythonpath

NAME = "lake"
SESSIONS = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=450_000, help="rows of the large transaction")
    parser.add_argument("--outage-s", type=float, default=90.0, help="how long the sync server is away")
    parser.add_argument("--transactions", type=int, default=40, help="transactions per session per workload phase")
    parser.add_argument("--json", action="store_true", help="print one JSON object after the verdict")


def _say(line: str) -> None:
    print(f"cdc-acceptance: {line}", file=sys.stderr, flush=True)


def _kill_9(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Pipeline:
    """One ``python -m reference.pipeline`` run; its stderr kept in a file and read for the sync server's port."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self._out: TextIO = open(log, "w", encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        self.process = subprocess.Popen([sys.executable, "-m", "reference.pipeline", *args], stdout=self._out,
                                        stderr=subprocess.STDOUT, text=True, env=env)

    def sync_port(self, timeout_s: float = 300.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(r"sync server at grpc://127\.0\.0\.1:(\d+)", self.log.read_text(encoding="utf-8"))
            if found:
                return int(found.group(1))
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"the pipeline printed no sync server location; see {self.log}")

    def sync_server_pids(self) -> list[int]:
        return [pid for pid in descendants(self.process.pid)
                if b"reference.sync\0serve" in _cmdline(pid)]

    def kill_9(self) -> None:
        _kill_9([self.process.pid, *descendants(self.process.pid)])
        self.process.wait(30)
        self._out.close()

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout_s)
        finally:
            self._out.close()

    def tail(self, lines: int = 5) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _serve(store: Path, port: int, log: Path) -> subprocess.Popen[str]:
    """A sync server on ``port`` over ``store``, as the pipeline starts its own; returns once it listens."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath()}
    proc = subprocess.Popen([sys.executable, "-m", "reference.sync", "serve", "--store", str(store), "--host",
                             "127.0.0.1", "--port", str(port), *FlushSettings().args()],
                            stdout=subprocess.PIPE, stderr=open(log, "a", encoding="utf-8"), text=True, env=env,
                            start_new_session=True)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(60) or not proc.stdout.readline().startswith("LISTENING "):
            proc.kill()
            raise RuntimeError(f"the restarted sync server did not listen on {port}; see {log}")
    return proc


def _sql(server: PostgresServer, *statements: str) -> list[tuple[str | None, ...]]:
    """Run ``statements`` in one session; the last one's rows."""
    conn = server.connect(NAME)
    try:
        rows: list[tuple[str | None, ...]] = []
        for statement in statements:
            rows = conn.query(statement).rows
        return rows
    finally:
        conn.close()


def _slot_active(server: PostgresServer) -> bool:
    return bool(_sql(server, f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{NAME}' AND active"))


def _wait_for(what: str, ready: Any, pipeline: Pipeline, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if pipeline.process.poll() is not None:
            raise RuntimeError(f"the pipeline ended while waiting for {what}: " + " | ".join(pipeline.tail()))
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not seen within {timeout_s:g} s")
        time.sleep(0.5)


def _big_transaction(rows: int) -> str:
    return ("BEGIN; INSERT INTO items (id, name, qty, big) SELECT 800000000000 + g, repeat(md5(g::text), 10), g % 1000, "
            f"NULL FROM generate_series(1, {rows}) g; COMMIT")


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {"rows": args.rows, "outage_s": args.outage_s}
    started = time.monotonic()
    ca = throwaway_ca(work, "ca")
    server = PostgresServer()
    serve_tls(server, ca)
    server.start()
    try:
        admin = server.connect()
        admin.query(f"CREATE DATABASE {NAME}")
        admin.close()
        conn = server.connect(NAME)
        workload.create(conn, NAME)
        conn.close()
        address = server.address(database=NAME)
        workload.run_concurrently(address, SESSIONS, args.transactions, seed=1)
        held = _sql(server, "SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM pairs)")[0]
        _say(f"Postgres (ssl=on) holds {held[0]} items and {held[1]} pairs; starting the pipeline over verify-full TLS")
        source = (f"postgresql://postgres:{server.password}@localhost:{server.port}/{NAME}"
                  f"?sslmode=verify-full&sslrootcert={ca[1]}")
        store = work / "store"
        common = ["--source", source, "--publication", NAME, "--slot", NAME, "--store", str(store)]

        first = Pipeline([*common, "--create-slot"], work / "first.log")
        try:
            writers = threading.Thread(target=workload.run_concurrently, args=(address, SESSIONS, args.transactions),
                                       kwargs={"seed": 2}, name="writers")
            writers.start()  # while the snapshot is read and the stream starts
            _wait_for("the slot", lambda: slot_position(address, NAME) is not None, first)
            created = slot_position(address, NAME)
            writers.join()
            _say(f"slot created at {created}; concurrent writers done; more while the first run starts streaming")
            workload.run_concurrently(address, SESSIONS, args.transactions // 4, seed=5)
            _wait_for("the slot confirmed past its creation", lambda: slot_position(address, NAME) != created, first)
            _say(f"first run streaming: slot confirmed to {slot_position(address, NAME)}")
            _sql(server, "UPDATE items SET id = id + 700000000000 WHERE id % 3 = 0 AND big IS NOT NULL")  # TOAST moves
            _say(f"key changes of TOASTed rows committed; committing a {args.rows}-row transaction")
            _sql(server, _big_transaction(args.rows))
            before_kill = slot_position(address, NAME)
            time.sleep(15)  # the large transaction in flight
            first.kill_9()
            killed_at = slot_position(address, NAME)
            figures["slot_at_kill"] = str(killed_at)
            _say(f"first run killed with -9 (slot at {killed_at}, {before_kill} when the large transaction committed)")
        finally:
            if first.process.poll() is None:
                first.kill_9()
        _sql(server, "TRUNCATE pairs", "INSERT INTO pairs SELECT g, 'r', g, 'refilled' FROM generate_series(1, 500) g",
             "ALTER TABLE items ADD COLUMN extra integer", "UPDATE items SET extra = qty WHERE id % 7 = 0")
        workload.run_concurrently(address, SESSIONS, args.transactions // 2, seed=3)
        _say("TRUNCATE, refill, ADD COLUMN and its updates, more writers committed; second run to the current WAL position")

        second = Pipeline([*common, "--until-lsn", "current", "--verify"], work / "second.log")
        replacement: subprocess.Popen[str] | None = None
        try:
            port = second.sync_port()
            _wait_for("the second run streaming", lambda: _slot_active(server), second)
            time.sleep(5)
            _kill_9(second.sync_server_pids())
            _say(f"the second run's sync server killed with -9; away for {args.outage_s:g} s")
            time.sleep(args.outage_s)
            replacement = _serve(store, port, work / "replacement-server.log")
            _say(f"sync server started again on port {port}")
            status = second.wait(1800)
        finally:
            if second.process.poll() is None:
                second.kill_9()
            if replacement is not None:
                replacement.terminate()
                replacement.wait(30)
        lines = second.tail(8)
        figures.update(second_status=status, second_last_lines=lines, seconds=round(time.monotonic() - started, 1))
        figures["ok"] = status == 0 and bool(lines) and lines[-1].startswith("pipeline OK")
        return figures
    finally:
        server.remove()


def main(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="streamwire-cdc-acceptance-"))
    try:
        figures = run(args, work)
    except (RuntimeError, PgServerError, PgConnectionError, OSError, subprocess.SubprocessError) as exc:
        print(f"cdc-acceptance FAILED: {type(exc).__name__}: {exc} (logs in {work})")
        return 1
    if figures["ok"]:
        print(f"cdc-acceptance OK: {figures['rows']}-row transaction, kill -9 of the pipeline, a {figures['outage_s']:g} s "
              f"sync-server outage, TLS: every table equals its Delta table ({figures['seconds']} s)")
    else:
        print(f"cdc-acceptance FAILED: the second run ended {figures['second_status']}: "
              + " | ".join(figures["second_last_lines"][-3:]) + f" (logs in {work})")
    if args.json:
        print(json.dumps(figures))
    return 0 if figures["ok"] else 1
