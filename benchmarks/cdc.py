"""``python -m benchmarks cdc [--json]``: the Postgres change source against ``pg_recvlogical``, and
its commit-to-durable latency.

A throwaway Postgres 15 and a sync server subprocess (the pipeline's flush settings: durable within
``max_replication_lag_s`` 0.2 s); the source is :func:`reference.cdc.replicate.replicate`, one
process, one origin.

- backlogs: two slots are created, then a backlog is committed (``--transactions`` transactions of
  100 rows each, and ``--single`` one-row transactions); ``pg_recvlogical`` drains one slot to
  ``/dev/null`` (pgoutput, the same publication) up to the WAL position after the backlog, and the
  source the other until all of it is durable in the sync server. Each is timed from its
  START_REPLICATION (``pg_recvlogical``: from its start, connection included); figure: changes/s
  of each and their ratio, and the CPU seconds of the source's process meanwhile (its threads
  included: what is not CPU is waiting for Postgres or the sync server). The sync server has taken
  one put and made it durable before (its first put of a process costs about a second of its own
  start: not the source's);
- steady: one session commits one-row transactions at ``--rate`` per second for ``--seconds``
  while the source runs; each row carries its commit time, and its latency is from that time to
  the source seeing a durable number at or above its commit LSN (p50/p99/max). The session commits
  with ``synchronous_commit = on`` (Postgres's default; the throwaway server's is off): logical
  decoding sends only WAL that is flushed, so under ``off`` a commit waits for the WAL writer
  (``wal_writer_delay``, 200 ms) before any source can see it, which is Postgres's latency, not the
  source's.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from conformance.pgoutput.postgres_server import PostgresServer, postgres_bin_dir
from reference.cdc.replicate import replicate
from reference.cdc.source import SlotSource, SlotSpec
from reference.pipeline.syncserver import FlushSettings, SyncServerProcess
from reference.sync.client import SyncClient, SyncPut
from spec.pgoutput.changes import Op, RowChange, TableImage
from spec.pgoutput.feedback import record_boundary
from spec.pgoutput.messages import parse_lsn
from spec.pgoutput.transactions import SourceTransaction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--transactions", type=int, default=1000, help="100-row transactions of the first backlog")
    parser.add_argument("--single", type=int, default=2000, help="one-row transactions of the second backlog")
    parser.add_argument("--rate", type=float, default=50.0, help="steady one-row transactions per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the steady phase")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _backlog(server: PostgresServer, sync: SyncServerProcess, name: str, transactions: int,
             rows: int) -> dict[str, Any]:
    """One backlog drained by pg_recvlogical and by the source, each from its own slot."""
    conn = server.connect()
    conn.query(f"CREATE TABLE {name} (id bigint PRIMARY KEY, name text, qty integer, price numeric(12,2))")
    conn.query(f"CREATE PUBLICATION {name} FOR TABLE {name}")
    for slot in (f"{name}_source", f"{name}_recv"):
        conn.query(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    conn.query(f"DO $$ BEGIN FOR t IN 0..{transactions - 1} LOOP INSERT INTO {name} SELECT t * {rows} + g, 'row ' || g, "
               f"g, g / 7.0 FROM generate_series(1, {rows}) g; COMMIT; END LOOP; END $$")
    end = str(conn.query("SELECT pg_current_wal_insert_lsn()").rows[0][0])
    conn.close()
    changes = transactions * rows
    bin_dir = postgres_bin_dir()
    assert bin_dir is not None
    bin_dir = bin_dir.resolve() if (bin_dir / "pg_recvlogical").exists() else (bin_dir / "initdb").resolve().parent
    started = time.monotonic()
    subprocess.run([str(bin_dir / "pg_recvlogical"), "-d", f"host={server.directory} port={server.port} "
                    f"user=postgres dbname=postgres", "--slot", f"{name}_recv", "--start", "--no-loop",
                    "-o", "proto_version=1", "-o", f"publication_names={name}", "--endpos", end, "-f", "/dev/null"],
                   check=True, timeout=600)
    recv_s = time.monotonic() - started
    source = SlotSource(server.address(), SlotSpec(f"{name}_source", name, until=end))
    client = SyncClient(sync.location, origin=f"{name}_source")
    source.open()
    started, cpu = time.monotonic(), _cpu_s()
    try:
        counts = replicate(source, client)
    finally:
        source.close()
        client.close()
    source_s, cpu = time.monotonic() - started, _cpu_s() - cpu
    assert counts.rows == changes, (counts.rows, changes)
    return {"transactions": transactions, "rows_per_transaction": rows, "changes": changes,
            "pg_recvlogical_s": round(recv_s, 3), "pg_recvlogical_changes_per_s": round(changes / recv_s),
            "source_s": round(source_s, 3), "source_changes_per_s": round(changes / source_s),
            "source_cpu_s": round(cpu, 2),
            "source_transactions": counts.transactions, "source_sync_transactions": counts.sync_transactions,
            "ratio": round(recv_s / source_s, 3)}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _warm_up(sync: SyncServerProcess) -> None:
    """One put made durable, so that the sync server's own start is behind it before anything is timed."""
    image = TableImage("bench/warm_up", (("id", pa.int64()),), (("v", pa.string()),))
    client = SyncClient(sync.location, origin="warm-up")
    try:
        client.send_transaction(1, [SyncPut(image.path, image.batch([RowChange(image, Op.INSERT, None, (1,), ("x",), (True,))]),
                                            image.descriptors())])
        client.wait_durable(1)
    finally:
        client.close()


def _steady(server: PostgresServer, sync: SyncServerProcess, args: argparse.Namespace) -> dict[str, Any]:
    conn = server.connect()
    conn.query("CREATE TABLE ticks (id bigint PRIMARY KEY, committed_ns bigint)")
    conn.query("CREATE PUBLICATION steady FOR TABLE ticks")
    conn.query("SELECT pg_create_logical_replication_slot('steady', 'pgoutput')")
    conn.query("SET synchronous_commit = on")
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
    pa.array([0])  # pyarrow imports pandas on its first conversion (0.3-0.5 s here): once per process, not per backlog
    with PostgresServer() as server, tempfile.TemporaryDirectory(prefix="bench-cdc-") as store:
        sync = SyncServerProcess(str(Path(store) / "store"), Path(store) / "server.log", flush)
        sync.start()
        try:
            _warm_up(sync)
            figures = {"backlog_100_rows": _backlog(server, sync, "rows100", args.transactions, 100),
                       "backlog_1_row": _backlog(server, sync, "rows1", args.single, 1),
                       "steady": _steady(server, sync, args),
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
