"""How the streaming shuffle's cost grows with M x R, the data fixed.

The same 64 MB of 100-byte records (8 MB with --quick) go through M writers to R readers for
M x R = 1x1, 2x2, 4x4, 8x8, 16x16, each configuration in a fresh child process (so its peak memory
is its own), all tasks of a shuffle as threads of that process over real loopback sockets, every
reader consuming at once. Per configuration: mb_s and us_per_record (first record written to last
read), threads (peak of the process, sampled every 10 ms, and the tasks' own: one thread per task
plus what the tasks started), peak_rss_mb over the child's baseline before the shuffle,
bytes_per_connection (that growth over M x R connections) and accounted_bytes_per_connection (what
the protocol's budgets allow one connection: its writer's byte permits plus the 32 KiB send + 512 B
receive TCP buffers Spark counts per channel, over R, plus its reader's quota, readerMaxMemory / M).
Fitted exponents over M x R (0: flat, 1: linear) and the slope of peak memory per added
connection. Goals (booleans): threads per task constant in M x R; memory per connection at most
its accounted buffers + 64 KiB in every configuration. ``--writer-max-memory`` and
``--reader-max-memory`` tighten the budgets (Spark's 32 MiB by default); ``--report DIR`` writes
figures.json and one log-log PNG per curve.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import threading
import time
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.growth import exponent, plot
from benchmarks.procstat import sample
from reference.net.ledger import ResourceLedger
from reference.shuffle.local import run_local_shuffle
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.writer import TCP_RECEIVE_BUFFER, TCP_SEND_BUFFER, permit_capacity

SHAPES = (1, 2, 4, 8, 16)
RECORD_SIZE = 100
BUDGET_SLACK = 64 * 1024
SAMPLE_S = 0.01


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="8 MB instead of 64 MB")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    parser.add_argument("--report", type=Path, default=None, help="write figures.json and PNG plots here")
    parser.add_argument("--writer-max-memory", type=int, default=ShuffleSettings().writer_max_memory)
    parser.add_argument("--reader-max-memory", type=int, default=ShuffleSettings().reader_max_memory)


class Run(NamedTuple):
    """One configuration's measurements, sent up from its child process."""

    writers: int
    readers: int
    records: int
    seconds: float
    peak_threads: int
    task_threads: int
    baseline_rss: int
    peak_rss: int
    delivered: bool


def _records(writer: int, count: int, readers: int) -> Iterator[tuple[int, bytes]]:
    for i in range(count):
        yield i % readers, b"%0*d" % (RECORD_SIZE, writer * count + i)


class _Peaks:
    """Samples this process's threads and RSS until stopped."""

    def __init__(self) -> None:
        self.threads = 0
        self.rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="benchmark-sampler")

    def __enter__(self) -> _Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            now = sample()
            self.threads = max(self.threads, now.threads - 1)  # not the sampler itself
            self.rss = max(self.rss, now.rss_bytes)


def accounted_per_connection(settings: ShuffleSettings, writers: int, readers: int) -> int:
    """Bytes the protocol's budgets allow one connection: its share of the writer's permits and
    TCP buffers, plus its share of the reader's quota."""
    writer = permit_capacity(settings, readers) + readers * (TCP_SEND_BUFFER + TCP_RECEIVE_BUFFER)
    return writer // readers + settings.reader_max_memory // writers


def _shuffle(writers: int, readers: int, total_records: int, settings: ShuffleSettings, pipe: Pipe) -> None:
    """The child: one M x R shuffle, measured."""
    per_writer = total_records // writers
    ledger = ResourceLedger()
    counts = [0] * readers

    def consume(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        n = 0
        for record in records:
            n += len(record) == RECORD_SIZE
        counts[reader_id] = n
        return []

    baseline = sample()
    with _Peaks() as peaks:
        start = time.perf_counter()
        run_local_shuffle([_records(w, per_writer, readers) for w in range(writers)], readers, settings,
                          consume=consume, timeout_s=3600, ledger=ledger)
        seconds = time.perf_counter() - start
    pipe.send(Run(writers, readers, per_writer * writers, seconds, peaks.threads,
                  writers + readers + ledger.threads_started, baseline.rss_bytes, max(peaks.rss, baseline.rss_bytes),
                  sum(counts) == per_writer * writers))


def measure(writers: int, readers: int, total_records: int, settings: ShuffleSettings) -> Run:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=_shuffle,
                                                           args=(writers, readers, total_records, settings, child))
    process.start()
    try:
        run: Run = parent.recv()
    finally:
        process.join()
    return run


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of y over x."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(args: argparse.Namespace) -> int:
    total_records = (8 if args.quick else 64) * 10**6 // RECORD_SIZE
    settings = ShuffleSettings(writer_max_memory=args.writer_max_memory, reader_max_memory=args.reader_max_memory)
    rows: list[dict[str, Any]] = []
    for n in SHAPES:
        run = measure(n, n, total_records, settings)
        growth = run.peak_rss - run.baseline_rss
        row = {"shape": f"{n}x{n}", "connections": n * n, "records": run.records,
               "mb_s": round(run.records * RECORD_SIZE / 1e6 / run.seconds, 2),
               "us_per_record": round(run.seconds * 1e6 / run.records, 3), "threads": run.peak_threads,
               "task_threads": run.task_threads, "threads_per_task": round(run.task_threads / (2 * n), 3),
               "peak_rss_mb": round(growth / 2**20, 2), "bytes_per_connection": round(growth / (n * n)),
               "accounted_bytes_per_connection": accounted_per_connection(settings, n, n), "delivered": run.delivered}
        rows.append(row)
        print(f"{row['shape']:>6}  {row['mb_s']:7.2f} MB/s  {row['us_per_record']:7.3f} us/record  threads "
              f"{row['threads']:4} ({row['threads_per_task']} per task)  peak RSS +{row['peak_rss_mb']:7.2f} MB  "
              f"{row['bytes_per_connection']:9} B/connection (accounted {row['accounted_bytes_per_connection']})",
              flush=True)
    connections = [float(r["connections"]) for r in rows]
    slope = _slope(connections, [r["peak_rss_mb"] * 2**20 for r in rows])
    figures: dict[str, Any] = {
        "data_mb": total_records * RECORD_SIZE / 1e6, "record_size": RECORD_SIZE,
        "writer_max_memory": settings.writer_max_memory, "reader_max_memory": settings.reader_max_memory, "runs": rows,
        "exponents": {name: exponent(connections, [float(r[name]) for r in rows])
                      for name in ("mb_s", "us_per_record", "threads", "threads_per_task", "peak_rss_mb")},
        "rss_bytes_per_added_connection": round(slope),
    }
    per_task = [r["threads_per_task"] for r in rows]
    figures["goals"] = {
        "threads_per_task_constant": max(per_task) - min(per_task) <= 0.5,
        "memory_per_connection_within_budget": all(
            r["bytes_per_connection"] <= r["accounted_bytes_per_connection"] + BUDGET_SLACK for r in rows),
        "every_record_delivered": all(r["delivered"] for r in rows),
    }
    print(f"exponents over M x R: {figures['exponents']}; {figures['rss_bytes_per_added_connection']} B of peak "
          "RSS per added connection", flush=True)
    if args.report is not None:
        _report(args.report, figures, connections)
    if args.json:
        print(json.dumps(figures))
    return 0 if all(figures["goals"].values()) else 1


def _report(directory: Path, figures: dict[str, Any], connections: list[float]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "figures.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    rows = figures["runs"]
    curves = {
        "shuffle-scale-rate.png": ("throughput", "MB/s", {"MB/s": [r["mb_s"] for r in rows]}),
        "shuffle-scale-cost.png": ("cost per record", "µs/record", {"µs/record": [r["us_per_record"] for r in rows]}),
        "shuffle-scale-threads.png": ("threads", "threads", {"process peak": [r["threads"] for r in rows],
                                                             "per task": [r["threads_per_task"] for r in rows]}),
        "shuffle-scale-memory.png": ("peak RSS over baseline", "MB", {"peak RSS": [r["peak_rss_mb"] for r in rows]}),
    }
    for name, (title, unit, series) in curves.items():
        plot(directory / name, f"streaming shuffle: {title}", "M x R connections", unit, connections, series)
