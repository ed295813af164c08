"""``python -m benchmarks cdc [--json]``: the Postgres change source, from commit to durable.

A throwaway Postgres 15 and a sync server subprocess (the pipeline's flush settings: durable within
``max_replication_lag_s`` 0.2 s); the source is :func:`reference.cdc.replicate.replicate`, one
process, one origin.

- burst: ``--sessions`` sessions commit ``--burst`` transactions of the workload (1-4 statements
  each) before the source starts; figure: changes/s from the source's start until every one of
  them is durable (the drain rate);
- steady: one session commits one-row transactions at ``--rate`` per second for ``--seconds``
  while the source runs; each row carries its commit time, and its latency is from that time to
  the source seeing a durable number at or above its commit LSN (p50/p99/max).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from reference.cdc import workload
from reference.cdc.pgwire import PgConnection
from reference.cdc.postgres_server import PostgresServer
from reference.cdc.replicate import replicate
from reference.cdc.source import SlotSource, SlotSpec
from reference.pipeline.syncserver import FlushSettings, SyncServerProcess
from reference.sync.client import SyncClient
from spec.pgoutput.feedback import record_boundary
from spec.pgoutput.messages import parse_lsn
from spec.pgoutput.transactions import SourceTransaction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--burst", type=int, default=2000, help="transactions committed before the source starts")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--rate", type=float, default=50.0, help="steady one-row transactions per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the steady phase")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _burst(server: PostgresServer, sync: SyncServerProcess, args: argparse.Namespace) -> dict[str, Any]:
    conn = server.connect()
    workload.create(conn, "burst")
    conn.query("SELECT pg_create_logical_replication_slot('burst', 'pgoutput')")
    conn.close()
    workload.run_concurrently(server.address(), args.sessions, args.burst // args.sessions)
    started = time.monotonic()
    source = SlotSource(server.address(), SlotSpec("burst", "burst", until="current"))
    client = SyncClient(sync.location, origin="burst")
    source.open()
    try:
        counts = replicate(source, client)
    finally:
        source.close()
        client.close()
    seconds = time.monotonic() - started
    return {"transactions": counts.transactions, "changes": counts.rows, "seconds": round(seconds, 2),
            "changes_per_s": round(counts.rows / seconds, 1), "transactions_per_s": round(counts.transactions / seconds, 1)}


def _steady(server: PostgresServer, sync: SyncServerProcess, args: argparse.Namespace) -> dict[str, Any]:
    conn = server.connect()
    conn.query("CREATE TABLE ticks (id bigint PRIMARY KEY, committed_ns bigint)")
    conn.query("CREATE PUBLICATION steady FOR TABLE ticks")
    conn.query("SELECT pg_create_logical_replication_slot('steady', 'pgoutput')")
    source = SlotSource(server.address(), SlotSpec("steady", "steady"))
    client = SyncClient(sync.location, origin="steady")
    source.open()
    sent: list[tuple[int, int]] = []  # (commit LSN, commit time), in commit order
    latencies_ms: list[float] = []

    def on_transaction(tx: SourceTransaction) -> None:
        (change,) = tx.changes["public/ticks"]
        assert change.values is not None
        sent.append((tx.commit_lsn, int(str(change.values[0]))))

    def on_durable(durable: int | None) -> None:
        now = time.time_ns()
        while durable is not None and len(latencies_ms) < len(sent) and sent[len(latencies_ms)][0] <= durable:
            latencies_ms.append((now - sent[len(latencies_ms)][1]) / 1e6)

    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(replicate(source, client, on_transaction=on_transaction,
                                                                     on_durable=on_durable)))
    thread.start()
    offered = int(args.rate * args.seconds)
    started = time.monotonic()
    for i in range(offered):
        ahead = i / args.rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
        conn.query(f"INSERT INTO ticks VALUES ({i}, {time.time_ns()})")
    committing_s = time.monotonic() - started
    source.feedback.until = record_boundary(parse_lsn(str(conn.query("SELECT pg_current_wal_insert_lsn()").rows[0][0])))
    thread.join(120)
    conn.close()
    source.close()
    client.close()
    ordered = sorted(latencies_ms)
    return {"offered_tx_per_s": args.rate, "committed_tx_per_s": round(offered / committing_s, 1),
            "transactions": offered, "durable_seen": len(ordered),
            "latency_p50_ms": round(statistics.median(ordered), 1) if ordered else None,
            "latency_p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1) if ordered else None,
            "latency_max_ms": round(ordered[-1], 1) if ordered else None}


def main(args: argparse.Namespace) -> int:
    flush = FlushSettings()
    with PostgresServer() as server, tempfile.TemporaryDirectory(prefix="bench-cdc-") as store:
        sync = SyncServerProcess(str(Path(store) / "store"), Path(store) / "server.log", flush)
        sync.start()
        try:
            figures = {"burst": _burst(server, sync, args), "steady": _steady(server, sync, args),
                       "sync_server": {"max_replication_lag_s": flush.max_replication_lag_s,
                                       "flush_task_interval_s": flush.flush_task_interval_s}}
        finally:
            sync.stop()
    if args.json:
        print(json.dumps(figures))
    else:
        for phase, values in figures.items():
            print(f"{phase}: " + ", ".join(f"{k} {v}" for k, v in values.items()))
    return 0
