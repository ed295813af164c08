"""``python -m benchmarks sync [--json]``: ingest rate, flush latency and peak memory of the sync server.

One in-process server on a temporary Delta store; one client sends transactions of
upserts (a quarter of them updates of earlier keys) through Flight.  The in-memory
limit is the size policy's ``max_in_memory_bytes``; peak figures are the writer's
pending bytes and the process's maximum RSS.

Then a flood: the server runs alone in a process (``python -m reference.sync serve``)
with ``--high-watermark-bytes`` and several clients put large transactions at once
(more than it may hold); ``peak_rss_mb`` is that process's peak RSS (``VmHWM``), to
set against ``high_watermark_mb`` and ``idle_rss_mb``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from conformance.sync.suite import DESCS, _cmd, do_put
from reference.sync.client import SyncClient, SyncPut
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore
from spec.sync.writer import SyncSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rows", type=int, default=2000, help="rows per transaction")
    parser.add_argument("--max-in-memory-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--flood-high-watermark-mb", type=int, default=64)
    parser.add_argument("--flood-put-mb", type=int, default=16, help="size of each flooding put")
    parser.add_argument("--flood-clients", type=int, default=4)
    parser.add_argument("--flood-puts", type=int, default=2, help="puts per flooding client")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _batch(seq: int, rows: int) -> pa.Table:
    start = seq * rows
    new = pa.array(range(start, start + rows), pa.int64())
    updates = rows // 4
    old = pa.array([None] * (rows - updates) + list(range(start - updates, start)) if seq else [None] * rows, pa.int64())
    if seq:
        new = pa.array(list(range(start, start + rows - updates)) + list(range(start - updates, start)), pa.int64())
    return pa.table({"old_id": old, "new_id": new, "v": pa.array([f"value-{seq}"] * rows, pa.string())})


def _vm_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def flood(args: argparse.Namespace) -> dict[str, object]:
    """Peak RSS of a server process while clients put more than its high-watermark allows."""
    mib = 1024 * 1024
    high = args.flood_high_watermark_mb * mib
    rows = args.flood_put_mb * mib // 24  # 8-byte keys (two columns) and an 8-byte value
    with tempfile.TemporaryDirectory(prefix="sync-flood-") as root:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reference.sync", "serve", "--store", root, "--port", "0",
             "--max-in-memory-bytes", str(high // 2), "--high-watermark-bytes", str(high)],
            stdout=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout is not None
            location = f"grpc://127.0.0.1:{proc.stdout.readline().split()[1]}"
            idle = _vm_kib(proc.pid, "VmRSS")
            batch = pa.table({"old_id": pa.nulls(rows, pa.int64()), "new_id": pa.array(range(rows), pa.int64()),
                              "v": pa.array(range(rows), pa.int64())})

            def client(n: int) -> list[bool]:
                outcomes = []
                for seq in range(1, args.flood_puts + 1):
                    out = do_put(location, _cmd(f"flood{n}", f"flood-{n}", seq).to_descriptor_cmd(), [batch], timeout=600)
                    outcomes.append(out.response is not None and out.response.accepted)
                return outcomes

            started = time.perf_counter()
            with ThreadPoolExecutor(args.flood_clients) as pool:
                results = [ok for outcome in pool.map(client, range(args.flood_clients)) for ok in outcome]
            seconds = time.perf_counter() - started
            peak = _vm_kib(proc.pid, "VmHWM")
        finally:
            proc.kill()
            proc.wait()
    return {
        "flood_put_mb": round(batch.nbytes / mib, 1),
        "flood_puts": len(results),
        "flood_accepted": sum(results),
        "flood_refused": len(results) - sum(results),
        "flood_seconds": round(seconds, 1),
        "high_watermark_mb": args.flood_high_watermark_mb,
        "idle_rss_mb": round(idle / 1024, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "peak_rss_to_high_watermark": round(peak / 1024 / args.flood_high_watermark_mb, 2),
    }


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
        **flood(args),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<26} {value}")
    return 0
