"""Crash drill: SIGKILL the server at random points, restart it, let the client replay.

Two tables, small transactions of inserts, key-changing updates and deletes with full
values, and frequent count-based flushes so kills land before, between and during
flushes.  After the last restart the server runs with lag 0 so the replayed tail is
flushed; the tables must then equal the model database exactly (no loss, no duplicate)
and the durable number must be the last transaction's.  Tiny data files and maintenance
(compaction, vacuum with no retention, checkpoints) every 50 ms make kills land inside those too.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from conformance.sync.suite import DESCS, rows_batch
from reference.sync.client import SyncClient, SyncPut
from reference.sync.store import DeltaStore

KILLS = 20
TRANSACTIONS = 120
TABLES = ("orders", "users")
STARTUP_TIMEOUT_S = 60.0
STORE_OPTIONS = ("--target-file-rows", "4", "--maintenance-interval-s", "0.05", "--vacuum-retention-hours", "0")


class ServerProcess:
    """The reference server as a subprocess; ``location`` blocks while it restarts."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.proc: subprocess.Popen[str] | None = None
        self.ready = threading.Event()
        self.address = ""

    def start(self, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reference.sync", "serve", "--store", str(self.store), "--port", "0",
             *STORE_OPTIONS, *extra],
            stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        word, port = self.proc.stdout.readline().split()
        assert word == "LISTENING"
        self.address = f"grpc://127.0.0.1:{port}"
        self.ready.set()

    def kill(self) -> None:
        self.ready.clear()
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=STARTUP_TIMEOUT_S)

    def location(self) -> str:
        assert self.ready.wait(STARTUP_TIMEOUT_S), "server did not come back"
        return self.address


def make_transaction(rng: random.Random, db: dict[str, dict[int, str]], step: int) -> list[SyncPut]:
    puts = []
    for table in rng.sample(TABLES, rng.randint(1, 2)):
        rows: list[tuple[Any, ...]] = []
        state = db[table]
        for _ in range(rng.randint(1, 4)):
            free = [k for k in range(40) if k not in state]
            kind = rng.choice(["insert", "insert", "update", "delete"]) if free else "delete"
            if kind == "insert" or not state:
                k = rng.choice(free)
                state[k] = f"{step}"
                rows.append((None, k, state[k]))
            elif kind == "update":
                k = rng.choice(sorted(state))
                j = rng.choice([k, *free])
                del state[k]
                state[j] = f"{step}u"
                rows.append((k, j, state[j]))
            else:
                k = rng.choice(sorted(state))
                del state[k]
                rows.append((k, None, None))
        puts.append(SyncPut(table, rows_batch(rows), DESCS))
    return puts


def test_crash_drill(tmp_path: Path) -> None:
    rng = random.Random(7)
    store = tmp_path / "store"
    server = ServerProcess(store)
    server.start("--max-syncs-per-url", "3")
    client = SyncClient(server.location, "pg-main", deadline_s=120.0, backoff_initial_s=0.01, backoff_max_s=0.2)
    client.probe()
    db: dict[str, dict[int, str]] = {t: {} for t in TABLES}
    kill_at = set(rng.sample(range(5, TRANSACTIONS), KILLS))
    kills = 0
    try:
        for seq in range(1, TRANSACTIONS + 1):
            puts = make_transaction(rng, db, seq)
            if seq in kill_at:
                # Kill while the client is inside this transaction (before, between or after its puts).
                timer = threading.Timer(rng.uniform(0.0, 0.03), lambda: (server.kill(), server.start("--max-syncs-per-url", "3")))
                timer.start()
                client.send_transaction(seq, puts)
                timer.join(STARTUP_TIMEOUT_S)
                kills += 1
            else:
                client.send_transaction(seq, puts)
        server.kill()
        server.start("--max-replication-lag-s", "0")
        final = client.probe()
    finally:
        client.close()
        if server.proc is not None:
            server.kill()
    assert kills == KILLS and client.restarts_seen >= 1
    assert final.durable_sequence_number == TRANSACTIONS
    delta = DeltaStore(str(store))
    for table in TABLES:
        rows = delta.read_table(str(store / table)).to_pylist()
        assert len(rows) == len({r["id"] for r in rows}), f"duplicate keys in {table}"
        assert {r["id"]: r["v"] for r in rows} == db[table], table
