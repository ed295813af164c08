"""``python -m benchmarks sync-scale [--sizes 10000,100000] [--json] [--report DIR]``: flush cost against table size.

For each size N a table of ids 0..N-1 is written by delta-rs (one commit carrying the sync
metadata) and laid out by the store's maintenance; a first flush (one update) then turns on
deletion vectors and builds the row index (``first_flush_ms``, once per table and restart);
then flushes of 1,000 keyed changes are timed as the server runs them (``read_state`` + ``write``; wall and process CPU time, the
latter steadier on a shared machine): updates of 1,000 consecutive keys
at a random place, inserts of 1,000 new keys above the largest, and updates of 1,000 keys
scattered over the whole table.  Each flush's rows and bytes rewritten come from its commit's
add and remove actions (rows rewritten: rows in the files it added; rows deleted: rows it marked
in deletion vectors).  ``flush_peak_rss_mib`` is the process's peak RSS during the update and
insert flushes (the peak is reset after seeding), ``scattered_peak_rss_mib`` during the scattered ones.  Exponents are least-squares slopes over log N; the goals
compare 5M rows with 100k rows (run ``--sizes 10000,100000,1000000,5000000`` for them): every
kind's flush on 5M rows within 2x of its time on 100k, at most 10 rows rewritten per row changed.
``--no-deletion-vectors`` measures the copy-on-write store instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from benchmarks.growth import exponent, plot
from conformance.sync.suite import DESCS, rows_batch
from reference.sync.store import DeltaStore, FileChanges, StoreSettings, TableState
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange

KEYS = 1000
KINDS = ("update", "insert", "scattered")
GOAL_SIZES = (100_000, 5_000_000)
GOAL_TIME_RATIO = 2.0
GOAL_ROWS_PER_CHANGE = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated table sizes in rows (full run: 10000,100000,1000000,5000000)")
    parser.add_argument("--repeats", type=int, default=7, help="flushes of each kind per size (median reported)")
    parser.add_argument("--target-file-rows", type=int, default=StoreSettings().target_file_rows)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-deletion-vectors", dest="deletion_vectors", action="store_false",
                        help="measure the copy-on-write store (flushes rewrite the files they touch)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--report", type=Path, help="directory for PNG plots of each curve")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    """Start a new peak (Linux: writing 5 to clear_refs resets VmHWM)."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    Path("/proc/self/clear_refs").write_text("5")


def _change(rows: list[tuple[Any, ...]]) -> SquashedChange:
    batch = rows_batch(rows)
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


def _seed(store: DeltaStore, uri: str, size: int) -> None:
    ids = pa.array(range(size), pa.int64())
    rows = pa.table({"id": ids, "v": pc.cast(ids, pa.string())})
    write_deltalake(uri, rows, mode="append",
                    commit_properties=store.commit_properties(TableState({"bench": 0}, {"bench": 0}, ("id",))))
    store.maintain(uri)


class Flush(NamedTuple):
    seconds: float
    cpu_seconds: float
    files: FileChanges


def _flush(store: DeltaStore, uri: str, seq: int, change: SquashedChange) -> Flush:
    started, cpu_started = time.perf_counter(), time.process_time()
    store.read_state(uri)
    files = store.write(uri, [change], {"bench": seq}, {"bench": seq})
    return Flush(time.perf_counter() - started, time.process_time() - cpu_started, files)


def _measure(size: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="sync-scale-") as root:
        store = DeltaStore(root, settings=StoreSettings(target_file_rows=args.target_file_rows,
                                                         deletion_vectors=args.deletion_vectors))
        uri = f"{root}/t"
        _seed(store, uri, size)
        first = _flush(store, uri, 1, _change([(0, 0, "first")]))
        _reset_peak_rss()
        seq = 1
        top = size

        def updates() -> SquashedChange:
            start = rng.randrange(0, max(size - KEYS, 1))
            return _change([(k, k, f"u{seq}") for k in range(start, start + KEYS)])

        def inserts() -> SquashedChange:
            nonlocal top
            top += KEYS
            return _change([(None, k, f"i{seq}") for k in range(top - KEYS, top)])

        def scattered() -> SquashedChange:
            return _change([(k, k, f"s{seq}") for k in rng.sample(range(size), KEYS)])

        makers: dict[str, Callable[[], SquashedChange]] = {"update": updates, "insert": inserts, "scattered": scattered}
        result: dict[str, Any] = {"rows": size, "rss_before_flushes_mib": round(_status_kib("VmRSS") / 1024, 1),
                                  "first_flush_ms": round(first.seconds * 1000, 1)}
        for kind in KINDS:
            if kind == "scattered":  # the keyed flushes' peak, before a flush that reads the whole table
                result["flush_peak_rss_mib"] = round(_status_kib("VmHWM") / 1024, 1)
                _reset_peak_rss()
            flushes = []
            for _ in range(args.repeats):
                seq += 1
                flushes.append(_flush(store, uri, seq, makers[kind]()))
            outcomes = [f.files for f in flushes]
            result[kind] = {
                "flush_ms": round(statistics.median(f.seconds for f in flushes) * 1000, 1),
                "flush_cpu_ms": round(statistics.median(f.cpu_seconds for f in flushes) * 1000, 1),
                "rows_rewritten": max(f.rows_added for f in outcomes),
                "rows_deleted": max(f.rows_deleted for f in outcomes),
                "rows_read": max(f.rows_removed for f in outcomes),
                "bytes_rewritten": max(f.bytes_added for f in outcomes),
                "files_rewritten": max(f.files_removed for f in outcomes),
            }
        result["scattered_peak_rss_mib"] = round(_status_kib("VmHWM") / 1024, 1)
        result["files"] = len(DeltaTable(uri).file_uris())
    return result


def _figure(results: list[dict[str, Any]], kind: str, key: str) -> list[float]:
    return [r[kind][key] for r in results]


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    sizes = [r["rows"] for r in results]
    exponents: dict[str, float | None] = {}
    for kind in KINDS:
        for key in ("flush_ms", "flush_cpu_ms", "rows_rewritten", "bytes_rewritten"):
            exponents[f"{kind}_{key}"] = exponent(sizes, _figure(results, kind, key))
    exponents["files"] = exponent(sizes, [r["files"] for r in results])
    for key in ("flush_peak_rss_mib", "scattered_peak_rss_mib"):
        exponents[key] = exponent(sizes, [r[key] for r in results])
    by_size = {r["rows"]: r for r in results}
    small, large = (by_size.get(n) for n in GOAL_SIZES)
    ratios = {
        f"{kind}_{key}": round(large[kind][key] / small[kind][key], 2) if small and large else None
        for kind in KINDS for key in ("flush_ms", "flush_cpu_ms")
    }
    amplification = max(r[kind]["rows_rewritten"] / KEYS for r in results for kind in KINDS)
    return {
        "exponents": exponents,
        "flush_5m_over_100k": ratios,
        "max_rows_rewritten_per_row_changed": round(amplification, 1),
        "goals": {
            "flush_5m_within_2x_of_100k": (
                None if small is None or large is None
                else all(v is not None and v <= GOAL_TIME_RATIO for k, v in ratios.items() if k.endswith("_flush_ms"))
            ),
            "rows_rewritten_within_10x_of_changed": amplification <= GOAL_ROWS_PER_CHANGE,
        },
    }


def _report(directory: Path, results: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    sizes = [r["rows"] for r in results]
    for key, label in (("flush_ms", "flush time (ms)"), ("flush_cpu_ms", "flush CPU time (ms)"),
                       ("rows_rewritten", "rows rewritten per flush"), ("bytes_rewritten", "bytes rewritten per flush")):
        plot(directory / f"sync-scale-{key}.png", f"1,000-key flush: {label}", "table rows", label, sizes,
             {kind: _figure(results, kind, key) for kind in KINDS})
    plot(directory / "sync-scale-files.png", "data files after the flushes", "table rows", "files", sizes,
         {"files": [r["files"] for r in results]})
    plot(directory / "sync-scale-rss.png", "peak RSS during the flushes", "table rows", "MiB", sizes,
         {"update and insert": [r["flush_peak_rss_mib"] for r in results],
          "scattered": [r["scattered_peak_rss_mib"] for r in results]})


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures."""
    sizes = sorted(int(s) for s in args.sizes.split(","))
    results = [_measure(size, args) for size in sizes]
    out = {"keys_per_flush": KEYS, "target_file_rows": args.target_file_rows,
           "deletion_vectors": args.deletion_vectors, "sizes": results, **_summary(results)}
    if args.report:
        _report(args.report, results)
    if args.json:
        print(json.dumps(out))
    else:
        for r in results:
            print(f"{r['rows']:>9} rows  files {r['files']:>4}  peak RSS {r['flush_peak_rss_mib']:>7} MiB  " + "  ".join(
                f"{k} {r[k]['flush_ms']:>7} ms (CPU {r[k]['flush_cpu_ms']:>7}) / {r[k]['rows_rewritten']:>8} rows"
                for k in KINDS))
        print(json.dumps(_summary(results), indent=2))
    return 0
