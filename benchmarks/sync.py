"""``python -m benchmarks sync [--json]``: ingest rate, flush latency and peak memory of the sync server.

One in-process server on a temporary Delta store; one client sends transactions of
upserts (a quarter of them updates of earlier keys) through Flight.  The in-memory
limit is the size policy's ``max_in_memory_bytes``; peak figures are the writer's
pending bytes and the process's maximum RSS.

Then, for each settings point (``--flood-points``: W the high-watermark, P ``--max-concurrent-puts``,
M ``--max-message-bytes``), a server running alone in a process (``python -m reference.sync serve``):
its RSS at idle and once its first put was flushed (``after_first_flush_rss_mb``), and four floods:
clients sending messages far above the message limit at once (``oversized``), clients putting
in-limit transactions at once, more than the server may hold, of the narrowest rows (``in_limit``) and of
rows of about 1 KiB (``wide``), and clients sending
many small puts (``small``).  Each reports the process's peak RSS (``VmHWM``) over its idle RSS
next to the documented bound ``W + P x M + C x 0.086 + 96`` MiB, C its connections (docs/sync.md,
"Memory"; ``FloodPoint.bound``, printed as its formula with the figures); ``within_bound`` says
whether the flood stayed under it,
``after_over_idle_mb`` what it held once what it kept was flushed (the floods run at a replication lag of
``FLOOD_LAG_S``), ``row_indexes_mb`` the row indexes of what it stored.
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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from conformance.sync.suite import DESCS, _cmd, do_put
from reference.sync.client import SyncClient, SyncPut
from reference.sync.front import RELAY_HIGH_WATER_BYTES
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore
from spec.sync.writer import SyncSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rows", type=int, default=2000, help="rows per transaction")
    parser.add_argument("--max-in-memory-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--flood-points", type=lambda text: [FloodPoint.parse(p) for p in text.split(",")],
                        default=[FloodPoint(64, 8, 32, 16), FloodPoint(64, 2, 16, 8), FloodPoint(128, 4, 32, 24)],
                        help="settings the floods run against, each W:P:M:PUT in MiB (high-watermark, concurrent "
                             "puts, message limit, in-limit put size), comma-separated")
    parser.add_argument("--flood-clients", type=int, default=16, help="clients of the in-limit and small floods")
    parser.add_argument("--flood-puts", type=int, default=2, help="puts per in-limit flooding client")
    parser.add_argument("--flood-small-put-mb", type=float, default=1, help="size of each put of the small flood")
    parser.add_argument("--flood-small-puts", type=int, default=25, help="puts per small flooding client")
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


CONNECTION_KIB = 24 + 2 * RELAY_HIGH_WATER_BYTES // 1024
"""An open client connection, putting or not: gRPC's and the front's share (measured: 2,000 idle connections,
+45.8 MiB) and what the front may queue for it each way (``reference.sync.front``), without TLS."""
FIXED_MB = 96
"""What the server holds whatever its settings and clients: deltalake's and DataFusion's runtimes set up by
the first flush, one row group being written, allocator slack (docs/sync.md, "Memory")."""
ROW_INDEX_BYTES_PER_ROW = 17
"""What stays per stored row of a flushed table: its row index entry (``reference.sync.row_index``:
an int64 key, its row number and whether a DV deletes it); reported beside the bound, not in it."""


@dataclass(frozen=True)
class FloodPoint:
    """One point of settings the floods run against: W, P, M (MiB) and the size of an in-limit put."""

    high_watermark_mb: int
    max_concurrent_puts: int
    max_message_mb: int
    put_mb: int

    @classmethod
    def parse(cls, text: str) -> FloodPoint:
        w, p, m, put = (int(part) for part in text.split(":"))
        return cls(w, p, m, put)

    def bound(self, connections: int) -> tuple[int, str]:
        """The documented bound on peak RSS over idle with ``connections`` open, ``W + P x M + C x 0.086 + 96``
        (docs/sync.md, "Memory"), and its formula with the figures; gRPC receives no message above the
        smaller of M and W."""
        message_mb = min(self.max_message_mb, self.high_watermark_mb)
        bound = math.ceil(self.high_watermark_mb + self.max_concurrent_puts * message_mb
                          + connections * CONNECTION_KIB / 1024 + FIXED_MB)
        return bound, (f"{self.high_watermark_mb} + {self.max_concurrent_puts} x {message_mb} + "
                       f"{connections} x {CONNECTION_KIB / 1024:.3f} + {FIXED_MB}")


def _vm_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


@contextmanager
def _server(point: FloodPoint, root: str, lag_s: float) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``python -m reference.sync serve`` alone in a process with ``point``'s settings (flushing at half
    the high-watermark, or after ``lag_s``)."""
    mib = 1024 * 1024
    proc = subprocess.Popen(
        [sys.executable, "-m", "reference.sync", "serve", "--store", root, "--port", "0",
         "--max-in-memory-bytes", str(point.high_watermark_mb * mib // 2),
         "--high-watermark-bytes", str(point.high_watermark_mb * mib),
         "--max-message-bytes", str(point.max_message_mb * mib),
         "--max-concurrent-puts", str(point.max_concurrent_puts), "--max-replication-lag-s", str(lag_s)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc, f"grpc://127.0.0.1:{proc.stdout.readline().split()[1]}"
    finally:
        proc.kill()
        proc.wait()


def _first_flush(point: FloodPoint) -> dict[str, object]:
    """RSS of a server at idle and once one put of one row was flushed (deltalake's runtimes set up)."""
    with tempfile.TemporaryDirectory(prefix="sync-first-") as root, _server(point, root, 0.2) as (proc, location):
        idle = _vm_kib(proc.pid, "VmRSS")
        client = SyncClient(location, "first")
        client.send_transaction(1, [SyncPut("first", _batch(0, 1), DESCS)])
        client.wait_durable(1)
        client.close()
        flushed = _vm_kib(proc.pid, "VmRSS")
    return {"idle_rss_mb": round(idle / 1024, 1), "after_first_flush_rss_mb": round(flushed / 1024, 1)}


def _narrow(mb: float) -> pa.Table:
    """Inserts of ``mb`` MiB of the narrowest rows (8-byte keys, two columns, and an 8-byte value): per-row
    costs weigh most there."""
    rows = int(mb * 1024 * 1024) // 24
    return pa.table({"old_id": pa.nulls(rows, pa.int64()), "new_id": pa.array(range(rows), pa.int64()),
                     "v": pa.array(range(rows), pa.int64())})


def _wide(mb: float) -> pa.Table:
    """Inserts of ``mb`` MiB of wide rows (8-byte keys and a value of about 1 KiB): per-byte costs weigh most
    there (what a flush copies of its values rather than of its keys)."""
    rows = max(int(mb * 1024 * 1024) // 1040, 1)
    value = "w" * 1016
    return pa.table({"old_id": pa.nulls(rows, pa.int64()), "new_id": pa.array(range(rows), pa.int64()),
                     "v": pa.array([f"{value}{k:08d}" for k in range(rows)], pa.string())})


FLOOD_LAG_S = 2.0
"""The floods' replication lag: what a flood left pending is flushed soon after it, so what the server holds
afterwards (``after_over_idle_mb``) is what it gave back, not data waiting for its flush."""


def _settle(root: Path, clients: list[int]) -> None:
    """Wait until the flooded tables of ``clients`` were written and every put they kept is past the lag
    (the flusher then wrote it), at most a minute."""
    started = time.monotonic()
    while time.monotonic() - started < 60 and not all((root / f"flood{n}" / "_delta_log").exists() for n in clients):
        time.sleep(0.2)
    time.sleep(FLOOD_LAG_S + 2)


def _flood(point: FloodPoint, name: str, batch: pa.Table, clients: int, puts: int) -> dict[str, object]:
    """Peak RSS of a server process while ``clients`` each put ``batch`` ``puts`` times at once (each client
    its own table), next to the bound."""
    mib = 1024 * 1024
    bound, formula = point.bound(clients)
    with tempfile.TemporaryDirectory(prefix="sync-flood-") as root, \
            _server(point, root, FLOOD_LAG_S) as (proc, location):
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
        _settle(Path(root), [n for n in range(clients) if "accepted" in results[n * puts:(n + 1) * puts]])
        after = _vm_kib(proc.pid, "VmRSS")
    over_idle = (peak - idle) / 1024
    stored_rows = results.count("accepted") * batch.num_rows
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
        f"{name}_after_over_idle_mb": round((after - idle) / 1024, 1),
        f"{name}_bound_mb": bound,
        f"{name}_bound_formula_mb": formula,
        f"{name}_within_bound": over_idle <= bound,
        f"{name}_row_indexes_mb": math.ceil(stored_rows * ROW_INDEX_BYTES_PER_ROW / mib),
    }


def flood(args: argparse.Namespace, point: FloodPoint) -> dict[str, object]:
    """The floods of one settings point (oversized, in-limit of narrow and of wide rows, many small puts), each
    peak next to the bound."""
    return {
        "high_watermark_mb": point.high_watermark_mb,
        "max_concurrent_puts": point.max_concurrent_puts,
        "max_message_mb": point.max_message_mb,
        **_first_flush(point),
        **_flood(point, "oversized", _narrow(args.flood_oversized_mb), args.flood_oversized_clients, 1),
        **_flood(point, "in_limit", _narrow(point.put_mb), args.flood_clients, args.flood_puts),
        **_flood(point, "wide", _wide(point.put_mb), args.flood_clients, args.flood_puts),
        **_flood(point, "small", _narrow(args.flood_small_put_mb), args.flood_clients, args.flood_small_puts),
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
        "floods": [flood(args, point) for point in args.flood_points],
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:<26} {value}")
    return 0
