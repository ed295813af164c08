"""``python -m benchmarks sync [--json]``: ingest rate, flush latency and peak memory of the sync server.

One in-process server on a temporary Delta store; one client sends transactions of
upserts (a quarter of them updates of earlier keys) through Flight.  The in-memory
limit is the size policy's ``max_in_memory_bytes``; peak figures are the writer's
pending bytes and the process's maximum RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import threading
import time

import pyarrow as pa

from conformance.suites.sync import DESCS
from reference.sync.client import SyncClient, SyncPut
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore
from spec.sync.writer import SyncSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rows", type=int, default=2000, help="rows per transaction")
    parser.add_argument("--max-in-memory-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _batch(seq: int, rows: int) -> pa.Table:
    start = seq * rows
    new = pa.array(range(start, start + rows), pa.int64())
    updates = rows // 4
    old = pa.array([None] * (rows - updates) + list(range(start - updates, start)) if seq else [None] * rows, pa.int64())
    if seq:
        new = pa.array(list(range(start, start + rows - updates)) + list(range(start - updates, start)), pa.int64())
    return pa.table({"old_id": old, "new_id": new, "v": pa.array([f"value-{seq}"] * rows, pa.string())})


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures."""
    with tempfile.TemporaryDirectory(prefix="sync-bench-") as root:
        settings = SyncSettings(max_in_memory_bytes=args.max_in_memory_bytes)
        server = SyncServer(DeltaStore(root), settings=settings)
        threading.Thread(target=server.serve, daemon=True).start()
        client = SyncClient(f"grpc://127.0.0.1:{server.port}", "bench")
        batches = [_batch(seq, args.rows) for seq in range(args.transactions)]
        started = time.perf_counter()
        for seq, batch in enumerate(batches):
            client.send_transaction(seq, [SyncPut("bench", batch, DESCS)])
        elapsed = time.perf_counter() - started
        stats = server.stats()
        client.close()
        server.shutdown()
    flushes = stats["flush_seconds"]
    result = {
        "transactions": args.transactions,
        "rows": args.transactions * args.rows,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(args.transactions * args.rows / elapsed),
        "flushes": len(flushes),
        "flush_latency_ms_median": round(statistics.median(flushes) * 1000, 1) if flushes else None,
        "flush_latency_ms_max": round(max(flushes) * 1000, 1) if flushes else None,
        "max_in_memory_bytes": args.max_in_memory_bytes,
        "peak_in_memory_bytes": stats["peak_in_memory_bytes"],
        "peak_to_limit": round(stats["peak_in_memory_bytes"] / args.max_in_memory_bytes, 3),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<26} {value}")
    return 0
