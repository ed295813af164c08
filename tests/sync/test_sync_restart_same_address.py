"""A server killed and started again at the same address, while a client sits idle between transactions.

gRPC reconnects a client's channel by itself, so the client's next put reaches the new server without a
failed call, hence without the probe a reconnection reads first; another client of the origin (the Spark
pipeline's source probing its sinks' origins) took the new server's ``first``. The new server records the put
and answers a memory number above the one the client last heard: nothing in the numbers shows the restart.
The nemesis found it (Spark seed 156: a sink's transactions held in the killed server's memory never reached
the table, while the durable number passed them). Each response names the server's life, so the client sees
a life it did not hear from before and sends again what the killed server held.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from conformance.sync.suite import DESCS, rows_batch
from reference.sync.client import SyncClient, SyncPut
from reference.sync.store import DeltaStore

STARTUP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(store: Path, port: int, lag_s: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "reference.sync", "serve", "--store", str(store), "--port",
                             str(port), "--max-replication-lag-s", lag_s, "--flush-task-interval-s", "0.05"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().split()[0] == "LISTENING"
    return proc


def test_an_idle_client_replays_what_a_server_restarted_at_its_address_lost(tmp_path: Path) -> None:
    store, port = tmp_path / "store", _free_port()
    location = f"grpc://127.0.0.1:{port}"
    server = _serve(store, port, "600")  # holds what it is sent in memory: nothing becomes durable
    sink = SyncClient(location, "o", deadline_s=30.0, backoff_max_s=0.2)
    other = SyncClient(location, "o", deadline_s=30.0, backoff_max_s=0.2)
    try:
        sink.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
        server.kill()
        server.wait(STARTUP_TIMEOUT_S)
        server = _serve(store, port, "0")
        other.probe()  # the new server's first answer goes to another client of the origin
        sink.send_transaction(2, [SyncPut("t", rows_batch([(None, 2, "b")]), DESCS)])
        sink.wait_durable(2, deadline_s=30.0)
    finally:
        sink.close()
        other.close()
        server.kill()
        server.wait(STARTUP_TIMEOUT_S)
    rows = DeltaStore(str(store)).read_table(str(store / "t")).to_pylist()
    assert {r["id"]: r["v"] for r in rows} == {1: "a", 2: "b"}
    assert sink.restarts_seen == 1
