"""The driver: starts the control plane and the sync server, runs the Spark job, checks the table.

Shuffle: the project's streaming shuffle (``reference.spark.shuffle.streaming_shuffle``), where
source and sink tasks run at the same time and changes flow as they are generated; ``--shuffle
spark`` uses PySpark's own ``partitionBy`` (sinks start once every source finished) for
comparison.  Both keep each writer's order within a reader, which is all routing.py needs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from reference.pipeline.changes import StreamSpec
from reference.cluster.config import ClusterHost
from reference.pipeline.coordination import Member, RunKeys
from reference.pipeline.oracle import TableDiff, compare, expected_state
from reference.pipeline.progress import Monitor, SourceDurability
from reference.pipeline.report import latency_ms, summary_line, throughput, write
from reference.pipeline.routing import owner, parts
from reference.pipeline.sink import SinkConfig, sink_partition
from reference.pipeline.source import SourceConfig, source_partition
from reference.pipeline.syncserver import SyncServerProcess
from reference.sync.client import SyncClient
from reference.sync.store import DeltaStore

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_JOB_ATTEMPTS = 3


class PipelineError(Exception):
    """The pipeline could not run as asked (bad options, an existing table)."""

    condition = "PIPELINE_INVALID_SETUP"


@dataclass(frozen=True)
class Options:
    """The command line's options (see ``python -m reference.pipeline --help``)."""

    changes: int = 40_000
    keys: int = 5_000
    origins: int = 4
    writers: int = 2
    readers: int = 2
    store: str | None = None
    table: str = "cdc"
    provider: str = "memory"
    master: str | None = None
    report: str | None = None
    chaos: bool = False
    seed: int = 42
    rate: float = 0.0
    shuffle: str = "streaming"


@dataclass
class Outcome:
    """The verdict: ``ok`` with the summary line, or what differs."""

    ok: bool
    line: str
    figures: dict[str, Any]
    diff: TableDiff
    problems: list[str]


ShuffleFn = Callable[[Any, int, Callable[[int], int]], Any]


def choose_shuffle(kind: str) -> tuple[str, ShuffleFn]:
    """The shuffle to route with: ``streaming`` (the project's) or ``spark`` (partitionBy, as a baseline)."""
    if kind == "streaming":
        from reference.spark.shuffle import streaming_shuffle

        return "streaming", lambda rdd, n, f: streaming_shuffle(rdd, n, partition_func=f)
    if kind == "spark":
        return "spark", lambda rdd, n, f: rdd.partitionBy(n, f)
    raise PipelineError(f"--shuffle must be streaming or spark, not {kind!r}")


def _spark_context(options: Options, cluster_url: str) -> Any:
    from pyspark import SparkConf, SparkContext

    slots = options.writers + options.readers
    master = options.master or f"local[{slots},4]"  # ",4": a crashed task is retried (--chaos)
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    conf = (SparkConf().setMaster(master).setAppName("streamwire-pipeline")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.task.maxFailures", "4")
            .set("spark.pyspark.python", sys.executable)
            .set("spark.executorEnv.PYTHONPATH", pythonpath)
            .set("spark.streamwire.cluster.provider", cluster_url))
    os.environ["PYTHONPATH"] = pythonpath
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    return sc


def _sink_task(config: SinkConfig, index: int, records: Iterator[Any]) -> Iterator[dict[str, Any]]:
    return sink_partition(config, index, records)


def _parts_per_reader(spec: StreamSpec, readers: int) -> list[int]:
    counts = [0] * readers
    for o in range(spec.origins):
        for tx in spec.transactions(o):
            for r, changes in parts(tx, readers).items():
                counts[r] += len(changes)
    return counts


def run(options: Options, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> Outcome:
    """Run the pipeline once and judge the table."""
    spec = StreamSpec(options.seed, options.changes, options.keys, options.origins)
    if options.writers < 1 or options.readers < 1:
        raise PipelineError("--writers and --readers must be at least 1")
    shuffle_name, shuffle = choose_shuffle(options.shuffle)
    run_id = uuid.uuid4().hex[:10]
    workdir = Path(tempfile.mkdtemp(prefix="streamwire-pipeline-"))
    store = options.store or str(workdir / "store")
    table_uri = DeltaStore(store).table_uri(options.table)
    if _table_exists(table_uri):
        raise PipelineError(f"{table_uri} already holds a table; pick another --table or --store")

    started = time.monotonic()
    expected = expected_state(spec)
    durability = SourceDurability(spec, options.readers, options.table)
    per_reader = _parts_per_reader(spec, options.readers)
    oracle_s = time.monotonic() - started
    print(f"pipeline {run_id}: {spec.changes} changes over {spec.keys} keys from {spec.origins} origins, "
          f"{options.writers} writers -> {shuffle_name} shuffle -> {options.readers} sinks -> sync server -> "
          f"{table_uri}", file=out, flush=True)

    keys = RunKeys(run_id)
    host = ClusterHost(options.provider)
    server = SyncServerProcess(store, workdir / "sync-server.log")
    sc = None
    monitor: Monitor | None = None
    kept = True  # the work dir stays when anything fails
    try:
        driver = Member(host.backend, f"pl-{run_id}-driver", "driver")

        def start_server() -> str:
            location = server.start()
            driver.publish(keys.sync_server, {"location": location, "generation": server.generation})
            return location

        def restart_server() -> str:
            server.kill()
            return start_server()

        location = start_server()
        print(f"sync server at {location}, cluster provider {options.provider} "
              f"(executors: {host.executor_url})", file=out, flush=True)
        sc = _spark_context(options, host.executor_url)
        kill_reader = 0 if options.chaos and options.readers else None
        sink_config = SinkConfig(run_id, host.executor_url, options.table, options.readers,
                                 kill_reader=kill_reader, kill_after=max(1, per_reader[0] * 6 // 10))
        source_config = SourceConfig(spec, options.writers, options.readers, options.rate)
        monitor = Monitor(driver, keys, durability, sum(per_reader),
                          restart_server=restart_server if options.chaos else None, out=err)
        monitor.start()
        job_started = time.monotonic()
        results, job_attempts = _run_job(sc, shuffle, source_config, sink_config, monitor)
        job_s = time.monotonic() - job_started
        monitor.stop()

        problems: list[str] = []
        final_durable = _server_durable(server.location, durability.final)
        for origin, want in durability.final.items():
            if want is not None and final_durable.get(origin) != want:
                problems.append(f"server reports durable {final_durable.get(origin)} for {origin}, expected {want}")
        rows = DeltaStore(store).read_table(table_uri).to_pylist() if _table_exists(table_uri) else []
        diff = compare(expected, rows)
        if diff:
            problems.append("table differs from the expected state:\n" + diff.describe())
        source_durable = durability.update({o: n for o, n in final_durable.items()})
        for o in range(spec.origins):
            name = spec.origin_name(o)
            if source_durable[name] != durability.last_seq[o]:
                problems.append(f"{name} durable at {source_durable[name]}, its last transaction is {durability.last_seq[o]}")

        timings = [tuple(t) for r in results for t in r["timings"]]
        # A re-run job's first attempt left no timings: count from the job's start then.
        rate, window_s = throughput(spec.changes, timings if job_attempts == 1 else [], job_s)
        figures: dict[str, Any] = {
            "options": asdict(options), "run_id": run_id, "shuffle": shuffle_name, "table": table_uri,
            "rows": len(rows), "expected_rows": len(expected), "table_matches": not diff,
            "changes": spec.changes, "throughput_changes_per_s": round(rate, 1), "window_s": round(window_s, 2),
            "job_s": round(job_s, 2), "job_attempts": job_attempts, "oracle_s": round(oracle_s, 2), "total_s": round(time.monotonic() - started, 2),
            "latency_ms": latency_ms(timings),
            "durable": source_durable, "durable_sync_origins": final_durable,
            "sync_server_generations": server.generation, "chaos_task_killed": driver.value(keys.chaos_kill),
            "sinks": [{k: v for k, v in r.items() if k != "timings"} for r in results],
            "events": monitor.events, "problems": problems,
        }
        ok = not problems
        line = summary_line(len(rows), source_durable, rate) if ok else f"pipeline FAILED: {len(problems)} problems"
        _print_figures(figures, out)
        if options.report:
            samples = [(s.t, s.synced) for s in monitor.samples]
            for path in write(Path(options.report), figures, timings, samples, monitor.events):
                print(f"report: {path}", file=out)
        for problem in problems:
            print(problem, file=out)
        kept = not ok
        if kept:
            print(f"kept for inspection: {workdir} (store and sync server log)", file=out)
        print(line, file=out, flush=True)
        return Outcome(ok, line, figures, diff, problems)
    finally:
        if monitor is not None:
            monitor.stop()
        if sc is not None:
            from reference.spark.shuffle import stop_coordinator

            stop_coordinator(sc)
            sc.stop()
        server.stop()
        host.close()
        if options.store is None and not kept:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_job(sc: Any, shuffle: ShuffleFn, source: SourceConfig, sink: SinkConfig,
             monitor: Monitor) -> tuple[list[dict[str, Any]], int]:
    """Run sources -> shuffle -> sinks; a failed job is run again, resuming after the durable sequence.

    Spark retries a failed task by itself where it can (PySpark's shuffle).  The streaming
    shuffle cannot replay one reader, so a task failure fails its job; re-running the job is
    its stage re-run: sources regenerate the same stream and sinks skip what is durable.
    """
    for attempt in range(1, MAX_JOB_ATTEMPTS + 1):
        sources = sc.parallelize(range(source.writers), source.writers).mapPartitionsWithIndex(
            functools.partial(source_partition, source))
        routed = shuffle(sources, source.readers, functools.partial(owner, readers=source.readers))
        sinks = routed.mapPartitionsWithIndex(functools.partial(_sink_task, sink))
        try:
            results: list[dict[str, Any]] = sinks.collect()
            return results, attempt
        except Exception as exc:
            if attempt == MAX_JOB_ATTEMPTS:
                raise
            monitor.event(f"job attempt {attempt} failed ({_root_cause(exc)}); re-running it, "
                          f"sinks resume after the durable sequence")
    raise AssertionError("unreachable")


def _root_cause(exc: Exception) -> str:
    """The first Python exception line of a Spark job failure (its whole text is pages long)."""
    lines = str(exc).splitlines()
    cause = next((ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Unsupported|Failed)\b", ln)), None)
    return (cause or (lines[0] if lines else type(exc).__name__))[:300]


def _table_exists(uri: str) -> bool:
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(uri))


def _server_durable(location: str, origins: dict[str, int | None]) -> dict[str, int | None]:
    """Ask the server itself (a probe per sync origin) what is durable."""
    durable: dict[str, int | None] = {}
    for origin in origins:
        client = SyncClient(location, origin, deadline_s=30.0)
        try:
            durable[origin] = client.probe().durable_sequence_number
        finally:
            client.close()
    return durable


def _print_figures(figures: dict[str, Any], out: TextIO) -> None:
    lat = figures["latency_ms"]
    print(f"durable per sync origin: " + " ".join(f"{o}={n}" for o, n in figures["durable_sync_origins"].items()),
          file=out)
    print(f"durable per source origin: " + " ".join(f"{o}={n}" for o, n in figures["durable"].items()), file=out)
    window = "from first commit to last durable" if figures["job_attempts"] == 1 else "of the re-run job"
    print(f"throughput: {figures['throughput_changes_per_s']:,.0f} changes/s ({figures['changes']} changes in "
          f"{figures['window_s']}s {window}; job {figures['job_s']}s, {figures['job_attempts']} attempts)", file=out)
    for name, p in lat.items():
        print(f"latency commit->{name} (ms): " + " ".join(f"{k}={v}" for k, v in p.items()), file=out)
    restarts = sum(s["restarts_seen"] for s in figures["sinks"])
    print(f"sinks: {len(figures['sinks'])} results, {sum(s['puts'] for s in figures['sinks'])} puts, "
          f"{sum(s['skipped'] for s in figures['sinks'])} durable changes skipped on replay, "
          f"{restarts} server restarts seen; sync server generations: {figures['sync_server_generations']}", file=out)
