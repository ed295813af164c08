"""``python -m benchmarks sync [--json]``: ingest rate, flush latency and peak memory of the sync server.

One in-process server on a temporary Delta store; one client sends transactions of
upserts (a quarter of them updates of earlier keys) through Flight.  The in-memory
limit is the size policy's ``max_in_memory_bytes``; peak figures are the writer's
pending bytes and the process's maximum RSS.

Then two floods of a server running alone in a process (``python -m reference.sync serve``
with ``--high-watermark-bytes``, ``--max-concurrent-puts`` and ``--max-message-bytes``):
clients sending messages far above the message limit at once (``oversized``), and clients
putting in-limit transactions at once, more than the server may hold (``in_limit``).  Each
reports the process's peak RSS (``VmHWM``) over its idle RSS next to the documented bound
(docs/sync.md, "Memory"), computed from the settings by ``memory_bound_mb`` and printed as its
formula; ``within_bound`` says whether the flood stayed under it.
"""

from __future__ import annotations

import argparse
import json
import math
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
from reference.sync.front import RELAY_HIGH_WATER_BYTES
from reference.sync.server import DEFAULT_MAX_CONNECTIONS, SyncServer
from reference.sync.store import DeltaStore
from spec.sync.writer import SyncSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rows", type=int, default=2000, help="rows per transaction")
    parser.add_argument("--max-in-memory-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--flood-high-watermark-mb", type=int, default=64)
    parser.add_argument("--flood-max-message-mb", type=int, default=32)
    parser.add_argument("--flood-max-concurrent-puts", type=int, default=8)
    parser.add_argument("--flood-put-mb", type=int, default=16, help="size of each in-limit flooding put")
    parser.add_argument("--flood-clients", type=int, default=16, help="clients of the in-limit flood")
    parser.add_argument("--flood-puts", type=int, default=2, help="puts per in-limit flooding client")
    parser.add_argument("--flood-oversized-mb", type=int, default=101, help="size of each oversized message")
    parser.add_argument("--flood-oversized-clients", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _batch(seq: int, rows: int) -> pa.Table:
    start = seq * rows
    new = pa.array(range(start, start + rows), pa.int64())
    updates = rows // 4
    old = pa.array([None] * (rows - updates) + list(range(start - updates, start)) if seq else [None] * rows, pa.int64())
    if seq:
        new = pa.array(list(range(start, start + rows - updates)) + list(range(start - updates, start)), pa.int64())
    return pa.table({"old_id": old, "new_id": new, "v": pa.array([f"value-{seq}"] * rows, pa.string())})


MESSAGE_COPIES = 2
"""Copies of a message a running put holds at once: gRPC's receive buffer and the bytes it hands over."""
PUT_OVERHEAD_KIB = 100
"""A running put's thread and call beyond its message (measured: 64 stalled puts, +6.2 MiB)."""
CONNECTION_KIB = 24 + 2 * RELAY_HIGH_WATER_BYTES // 1024
"""An open client connection, putting or not: gRPC's and the front's share (measured: 2,000 idle connections,
+45.8 MiB) and what the front may queue for it each way (``reference.sync.front``), without TLS."""
FLUSH_BYTES_PER_PENDING_BYTE = 13
"""One flush's working set per byte of the table's pending data (measured: +11.2 and +12.8 MiB per MiB of
narrow rows, 24 bytes, for a table's first and a later flush; per-row costs weigh less in wider rows)."""
FLUSH_FIXED_MB = 160
"""What the first flush adds whatever its size (deltalake, DataFusion and Parquet set up, allocator pools)."""
ROW_INDEX_BYTES_PER_ROW = 17
"""What stays per stored row of a flushed table: its row index entry (``reference.sync.row_index``:
an int64 key, its row number and whether a DV deletes it)."""


def memory_bound_mb(
    high_watermark_mb: int, max_concurrent_puts: int, max_message_mb: int, max_connections: int
) -> tuple[int, str]:
    """The documented bound on peak RSS over idle (docs/sync.md, "Memory"), and its formula with the figures.

    gRPC receives no message above the smaller of the message limit and the high-watermark; a flush
    works on one table's pending data, which the high-watermark bounds.
    """
    message_mb = min(max_message_mb, high_watermark_mb)
    puts = max_concurrent_puts * (MESSAGE_COPIES * message_mb + PUT_OVERHEAD_KIB / 1024)
    connections = max_connections * CONNECTION_KIB / 1024
    flush = FLUSH_BYTES_PER_PENDING_BYTE * high_watermark_mb + FLUSH_FIXED_MB
    formula = (f"{high_watermark_mb} + {max_concurrent_puts} x ({MESSAGE_COPIES} x {message_mb} + "
               f"{PUT_OVERHEAD_KIB / 1024:.1f}) + {max_connections} x {CONNECTION_KIB / 1024:.3f} + "
               f"{FLUSH_BYTES_PER_PENDING_BYTE} x {high_watermark_mb} + {FLUSH_FIXED_MB}")
    return math.ceil(high_watermark_mb + puts + connections + flush), formula


def _vm_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _flood(args: argparse.Namespace, name: str, batch: pa.Table, clients: int, puts: int, bound: int) -> dict[str, object]:
    """Peak RSS of a server process while ``clients`` each put ``batch`` ``puts`` times at once, against
    ``bound`` plus the row indexes of what the flood stored."""
    mib = 1024 * 1024
    high, message = args.flood_high_watermark_mb * mib, args.flood_max_message_mb * mib
    with tempfile.TemporaryDirectory(prefix="sync-flood-") as root:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reference.sync", "serve", "--store", root, "--port", "0",
             "--max-in-memory-bytes", str(high // 2), "--high-watermark-bytes", str(high),
             "--max-message-bytes", str(message), "--max-concurrent-puts", str(args.flood_max_concurrent_puts),
             "--max-replication-lag-s", "600"],
            stdout=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout is not None
            location = f"grpc://127.0.0.1:{proc.stdout.readline().split()[1]}"
            idle = _vm_kib(proc.pid, "VmRSS")

            def client(n: int) -> list[str]:
                outcomes = []
                for seq in range(1, puts + 1):
                    out = do_put(location, _cmd(f"flood{n}", f"flood-{n}", seq).to_descriptor_cmd(), [batch], timeout=600)
                    outcomes.append("accepted" if out.response is not None and out.response.accepted
                                    else "not accepted" if out.response is not None else "refused")
                return outcomes

            started = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                results = [o for outcome in pool.map(client, range(clients)) for o in outcome]
            seconds = time.perf_counter() - started
            peak = _vm_kib(proc.pid, "VmHWM")
        finally:
            proc.kill()
            proc.wait()
    over_idle = (peak - idle) / 1024
    stored_rows = results.count("accepted") * batch.num_rows
    row_indexes_mb = math.ceil(stored_rows * ROW_INDEX_BYTES_PER_ROW / mib)
    return {
        f"{name}_put_mb": round(batch.nbytes / mib, 1),
        f"{name}_clients": clients,
        f"{name}_puts": len(results),
        f"{name}_accepted": results.count("accepted"),
        f"{name}_not_accepted": results.count("not accepted"),
        f"{name}_refused": results.count("refused"),
        f"{name}_seconds": round(seconds, 1),
        f"{name}_idle_rss_mb": round(idle / 1024, 1),
        f"{name}_peak_rss_mb": round(peak / 1024, 1),
        f"{name}_peak_over_idle_mb": round(over_idle, 1),
        f"{name}_rows_stored": stored_rows,
        f"{name}_bound_mb": bound + row_indexes_mb,
        f"{name}_within_bound": over_idle <= bound + row_indexes_mb,
    }


def flood(args: argparse.Namespace) -> dict[str, object]:
    """The two floods, and the terms of the bound they are held to."""
    mib = 1024 * 1024

    def batch(mb: int) -> pa.Table:
        rows = mb * mib // 24  # 8-byte keys (two columns) and an 8-byte value
        return pa.table({"old_id": pa.nulls(rows, pa.int64()), "new_id": pa.array(range(rows), pa.int64()),
                         "v": pa.array(range(rows), pa.int64())})

    bound, formula = memory_bound_mb(args.flood_high_watermark_mb, args.flood_max_concurrent_puts,
                                     args.flood_max_message_mb, DEFAULT_MAX_CONNECTIONS)
    return {
        "high_watermark_mb": args.flood_high_watermark_mb,
        "max_concurrent_puts": args.flood_max_concurrent_puts,
        "max_message_mb": args.flood_max_message_mb,
        "bound_mb": bound,
        "bound_formula_mb": formula + f" + rows stored x {ROW_INDEX_BYTES_PER_ROW} B",
        **_flood(args, "oversized", batch(args.flood_oversized_mb), args.flood_oversized_clients, 1, bound),
        **_flood(args, "in_limit", batch(args.flood_put_mb), args.flood_clients, args.flood_puts, bound),
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
