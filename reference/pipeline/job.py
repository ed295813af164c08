"""The driver: starts the control plane and the sync server, runs the Spark job, checks the table.

Shuffle: the project's streaming shuffle (``reference.spark.shuffle.streaming_shuffle``), where
source and sink tasks run at the same time and changes flow as they are generated; ``--shuffle
spark`` uses PySpark's own ``partitionBy`` (sinks start once every source finished) for
comparison.  Both keep each writer's order within a reader, which is all routing.py needs.
"""

from __future__ import annotations

import functools
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

from streamwire.cli import one_line
from reference.pipeline.changes import StreamSpec
from reference.cluster.config import DriverCluster
from reference.pipeline.coordination import Member, RunKeys
from reference.pipeline.faults import NO_FAULTS, CrashSink, FaultPlan
from reference.pipeline.oracle import Row, TableDiff, compare, expected_state
from reference.pipeline.progress import Monitor, SourceDurability
from reference.pipeline.records import PartTiming
from reference.pipeline.report import latency_ms, summary_line, throughput, write
from reference.pipeline.routing import owner, parts
from reference.pipeline.sink import SinkConfig, SinkResult, sink_partition
from reference.pipeline.source import SourceConfig, source_partition
from reference.pipeline.syncserver import SyncServerProcess, pythonpath
from reference.sync.client import SyncClient
from reference.sync.store import DeltaStore
from spec.errors import RuntimeFailure

MAX_JOB_ATTEMPTS = 3


class PipelineError(RuntimeFailure):
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
    host: str = "127.0.0.1"
    report: str | None = None
    chaos: bool = False
    keep: bool = False
    """Keep the work dir (table, server log) of a run that passed too."""
    seed: int = 42
    rate: float = 0.0
    shuffle: str = "streaming"


@dataclass
class Figures:
    """Everything one run measured and concluded: printed, written to figures.json, returned."""

    options: Options
    run_id: str
    shuffle: str
    table: str
    changes: int
    expected_rows: int
    oracle_s: float
    rows: int = 0
    table_matches: bool = False
    job_s: float = 0.0
    job_attempts: int = 0
    throughput_changes_per_s: float = 0.0
    window_s: float = 0.0
    total_s: float = 0.0
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    durable: dict[str, int] = field(default_factory=dict)
    """Each source origin's durable point."""
    durable_sync_origins: dict[str, int | None] = field(default_factory=dict)
    sync_server_generations: int = 0
    chaos_task_killed: dict[str, Any] | None = None
    sinks: list[SinkResult] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """figures.json: every field, the sinks without their per-part timings."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["options"] = asdict(self.options)
        out["sinks"] = [{k: v for k, v in asdict(s).items() if k != "timings"} for s in self.sinks]
        return out


@dataclass
class Outcome:
    """The verdict: ``ok`` with the summary line, or what differs."""

    ok: bool
    line: str
    figures: Figures
    diff: TableDiff
    problems: list[str]


ShuffleFn = Callable[[Any, int, Callable[[int], int]], Any]


@dataclass(frozen=True)
class _Setup:
    """What a run is, decided before anything starts."""

    options: Options
    spec: StreamSpec
    shuffle_name: str
    run_id: str
    workdir: Path
    store: str
    table_uri: str


@dataclass(frozen=True)
class _Oracle:
    """What the run must produce, computed from the stream alone."""

    expected: dict[int, Row]
    durability: SourceDurability
    per_reader: list[int]
    """Sink rows each sink receives (a change split across two sinks is a row for each)."""


@dataclass
class _Services:
    """What a run starts: the cluster, the sync server, Spark, the shuffle; closed in reverse."""

    host: DriverCluster
    server: SyncServerProcess
    driver: Member
    keys: RunKeys
    sc: Any = None
    streaming: Any = None
    """The StreamingShuffle this run owns (``--shuffle streaming``)."""
    monitor: Monitor | None = None

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        if self.streaming is not None:
            self.streaming.close()
        if self.sc is not None:
            self.sc.stop()
        self.server.stop()
        self.host.close()


def spark_context(slots: int, host: str, cluster_url: str, master: str | None = None, max_failures: int = 4) -> Any:
    """A context whose Python workers run this interpreter with this checkout importable, set on the
    context itself (PySpark takes the workers' interpreter from ``sc.pythonExec``), never in
    ``os.environ``; ``slots`` task slots locally unless ``master`` names a cluster. ``max_failures``
    attempts per task: 4 lets a crashed task be retried (--chaos); 1 fails the job with the first
    error where a retry cannot help (a streaming shuffle's reader is never retried alone). Spark's
    own log says only FATAL: the job says each failure itself, in one line naming its root cause
    (a crashed task's retries were about 250 lines of ERROR traces)."""
    from pyspark import SparkConf, SparkContext

    master = master or f"local[{slots},{max_failures}]"
    conf = (SparkConf().setMaster(master).setAppName("streamwire-pipeline")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.task.maxFailures", str(max_failures))
            .set("spark.driver.host", host)
            .set("spark.pyspark.python", sys.executable)
            .set("spark.executorEnv.PYTHONPATH", pythonpath())
            .set("spark.streamwire.cluster.provider", cluster_url))
    sc = SparkContext.getOrCreate(conf)
    sc.pythonExec = sys.executable
    sc.setLogLevel("FATAL")
    return sc


def _parts_per_reader(spec: StreamSpec, readers: int) -> list[int]:
    counts = [0] * readers
    for o in range(spec.origins):
        for tx in spec.transactions(o):
            for r, changes in parts(tx, readers).items():
                counts[r] += len(changes)
    return counts


def run(options: Options, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> Outcome:
    """Run the pipeline once and judge the table: setup, oracle, services, job, verification, report."""
    started = time.monotonic()
    setup = _setup(options)
    oracle, oracle_s = _oracle(setup)
    figures = Figures(options, setup.run_id, setup.shuffle_name, setup.table_uri, setup.spec.changes,
                      len(oracle.expected), round(oracle_s, 2))
    print(f"pipeline {setup.run_id}: {setup.spec.changes} changes ({sum(oracle.per_reader)} sink rows) over "
          f"{setup.spec.keys} keys from "
          f"{setup.spec.origins} origins, {options.writers} writers -> {setup.shuffle_name} shuffle -> "
          f"{options.readers} sinks -> sync server -> {setup.table_uri}", file=out, flush=True)
    kept = True  # the work dir stays when anything fails
    try:
        services = _start(setup, oracle, out, err)
    except Exception as error:  # nothing ran yet: a setup problem, said in one line
        shutil.rmtree(setup.workdir, ignore_errors=True)
        raise PipelineError(f"could not start: {one_line(error)}") from error
    try:
        timings = _job(setup, oracle, services, figures)
        diff = _verify(setup, oracle, services, figures)
        figures.total_s = round(time.monotonic() - started, 2)
        ok = not figures.problems
        line = (summary_line(figures.rows, figures.durable, figures.throughput_changes_per_s) if ok
                else f"pipeline FAILED: {len(figures.problems)} problems")
        _report(figures, timings, services, out)
        kept = not ok or options.keep
        if kept:
            held = "store and sync server log" if options.store is None else "sync server log"
            print(f"kept {'as asked' if ok else 'for inspection'}: {setup.workdir} ({held}); "
                  f"table {setup.table_uri}", file=out)
        print(line, file=out, flush=True)
        return Outcome(ok, line, figures, diff, figures.problems)
    finally:
        services.close()
        if not kept:  # a --store lives elsewhere: the work dir then holds only the server's log
            shutil.rmtree(setup.workdir, ignore_errors=True)


def _setup(options: Options) -> _Setup:
    """Check the options and name the run's table; nothing is started yet."""
    spec = StreamSpec(options.seed, options.changes, options.keys, options.origins)
    if options.writers < 1 or options.readers < 1:
        raise PipelineError("--writers and --readers must be at least 1")
    if options.shuffle not in ("streaming", "spark"):
        raise PipelineError(f"--shuffle must be streaming or spark, not {options.shuffle!r}")
    workdir = Path(tempfile.mkdtemp(prefix="streamwire-pipeline-"))
    store = options.store or str(workdir / "store")
    table_uri = DeltaStore(store).table_uri(options.table)
    if _table_exists(table_uri):
        shutil.rmtree(workdir, ignore_errors=True)
        raise PipelineError(f"{table_uri} already holds a table; pick another --table or --store")
    return _Setup(options, spec, options.shuffle, uuid.uuid4().hex[:10], workdir, store, table_uri)


def _oracle(setup: _Setup) -> tuple[_Oracle, float]:
    """The expected table and durable points, and how long they took to compute."""
    started = time.monotonic()
    readers = setup.options.readers
    oracle = _Oracle(expected_state(setup.spec), SourceDurability(setup.spec, readers, setup.options.table),
                     _parts_per_reader(setup.spec, readers))
    return oracle, time.monotonic() - started


def _start(setup: _Setup, oracle: _Oracle, out: TextIO, err: TextIO) -> _Services:
    """Start the cluster, the sync server (its location published), Spark and the progress monitor."""
    options, keys = setup.options, RunKeys(setup.run_id)
    host = DriverCluster(options.provider, options.host)
    server = SyncServerProcess(setup.store, setup.workdir / "sync-server.log", host=options.host)
    services = _Services(host, server, Member(host.backend, f"pl-{setup.run_id}-driver", "driver"), keys)
    try:
        location = _start_server(services)
        print(f"sync server at {location}, cluster provider {options.provider} "
              f"(executors: {host.executor_url})", file=out, flush=True)
        services.sc = spark_context(options.writers + options.readers, options.host, host.executor_url,
                                    options.master)
        if options.shuffle == "streaming":
            from reference.spark.shape import choose_shape
            from reference.spark.shuffle import StreamingShuffle, available_slots

            choose_shape(options.writers, options.readers, available_slots(services.sc)).require()  # or says why
            services.streaming = StreamingShuffle(services.sc)
        services.monitor = Monitor(services.driver, keys, oracle.durability, sum(oracle.per_reader),
                                   restart_server=functools.partial(_restart_server, services) if options.chaos
                                   else None, watch_task_kill=options.chaos, out=err)
        services.monitor.start()
        return services
    except BaseException:
        services.close()
        raise


def _start_server(services: _Services) -> str:
    location = services.server.start()
    services.driver.publish(services.keys.sync_server,
                            {"location": location, "generation": services.server.generation})
    return location


def _restart_server(services: _Services) -> str:
    services.server.kill()
    return _start_server(services)


def _shuffle(services: _Services) -> ShuffleFn:
    """The shuffle to route with: the streaming shuffle this run owns, or ``partitionBy`` (a baseline)."""
    streaming = services.streaming
    if streaming is not None:
        return lambda rdd, n, f: streaming.shuffle(rdd, n, partition_func=f, fallback="error")
    return lambda rdd, n, f: rdd.partitionBy(n, f)


def _job(setup: _Setup, oracle: _Oracle, services: _Services, figures: Figures) -> list[PartTiming]:
    """Run the Spark job (re-run if it fails); fills the job's figures, returns the parts' timings."""
    options = setup.options
    faults: FaultPlan = NO_FAULTS
    if options.chaos:
        faults = CrashSink(setup.run_id, reader=0, after=max(1, oracle.per_reader[0] * 6 // 10))
    sink_config = SinkConfig(setup.run_id, services.host.executor_url, options.table, options.readers)
    source_config = SourceConfig(setup.spec, options.writers, options.readers, options.rate)
    assert services.monitor is not None
    started = time.monotonic()
    results, figures.job_attempts = _run_job(services.sc, _shuffle(services), source_config, sink_config, faults,
                                             services.monitor)
    job_s = time.monotonic() - started
    services.monitor.stop()
    timings = [t for r in results for t in r.timings]
    # A re-run job's first attempt left no timings: count from the job's start then.
    rate, window_s = throughput(setup.spec.changes, timings if figures.job_attempts == 1 else [], job_s)
    figures.job_s, figures.throughput_changes_per_s, figures.window_s = round(job_s, 2), round(rate, 1), round(window_s, 2)
    figures.latency_ms = latency_ms(timings)
    figures.sinks = results
    figures.events = services.monitor.events
    figures.chaos_task_killed = services.driver.value(services.keys.chaos_kill)
    return timings


def _verify(setup: _Setup, oracle: _Oracle, services: _Services, figures: Figures) -> TableDiff:
    """Judge the table and the durable numbers the server reports; problems go into ``figures``."""
    problems = figures.problems
    final_durable = _server_durable(services.server.location, oracle.durability.final)
    for origin, want in oracle.durability.final.items():
        if want is not None and final_durable.get(origin) != want:
            problems.append(f"server reports durable {final_durable.get(origin)} for {origin}, expected {want}")
    table_exists = _table_exists(setup.table_uri)
    rows = DeltaStore(setup.store).read_table(setup.table_uri).to_pylist() if table_exists else []
    diff = compare(oracle.expected, rows)
    if diff:
        problems.append("table differs from the expected state:\n" + diff.describe())
    source_durable = oracle.durability.update(dict(final_durable))
    for o in range(setup.spec.origins):
        name = setup.spec.origin_name(o)
        if source_durable[name] != oracle.durability.last_seq[o]:
            problems.append(f"{name} durable at {source_durable[name]}, its last transaction is "
                            f"{oracle.durability.last_seq[o]}")
    figures.rows, figures.table_matches = len(rows), not diff
    figures.durable, figures.durable_sync_origins = source_durable, final_durable
    figures.sync_server_generations = services.server.generation
    return diff


def _report(figures: Figures, timings: list[PartTiming], services: _Services, out: TextIO) -> None:
    """Print the figures (and write figures.json and the plot with ``--report``), then the problems."""
    _print_figures(figures, out)
    if figures.options.report:
        assert services.monitor is not None
        samples = [(s.t, s.synced) for s in services.monitor.samples]
        for path in write(Path(figures.options.report), figures.to_json(), timings, samples, figures.events):
            print(f"report: {path}", file=out)
    for problem in figures.problems:
        print(problem, file=out)


def _run_job(sc: Any, shuffle: ShuffleFn, source: SourceConfig, sink: SinkConfig, faults: FaultPlan,
             monitor: Monitor) -> tuple[list[SinkResult], int]:
    """Run sources -> shuffle -> sinks; a failed job is run again, resuming after the durable sequence.

    Spark retries a failed task by itself where it can (PySpark's shuffle).  The streaming
    shuffle cannot replay one reader, so a task failure fails its job; re-running the job is
    its stage re-run: sources regenerate the same stream and sinks skip what is durable.
    """
    for attempt in range(1, MAX_JOB_ATTEMPTS + 1):
        sources = sc.parallelize(range(source.writers), source.writers).mapPartitionsWithIndex(
            functools.partial(source_partition, source))
        routed = shuffle(sources, source.readers, functools.partial(owner, readers=source.readers))
        sinks = routed.mapPartitionsWithIndex(functools.partial(sink_partition, sink, faults))
        try:
            results: list[SinkResult] = sinks.collect()
            return results, attempt
        except Exception as exc:
            if attempt == MAX_JOB_ATTEMPTS:
                raise
            monitor.event(f"job attempt {attempt} failed ({root_cause(exc)}); re-running it, "
                          f"sinks resume after the durable sequence")
    raise AssertionError("unreachable")


def root_cause(exc: Exception) -> str:
    """The first Python exception line of a Spark job failure (its whole text is pages long), whole."""
    lines = str(exc).splitlines()
    cause = next((ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Unsupported|Failed)\b", ln)), None)
    return cause or (lines[0] if lines else type(exc).__name__)


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


def _print_figures(figures: Figures, out: TextIO) -> None:
    print("durable per sync origin: " + " ".join(f"{o}={n}" for o, n in figures.durable_sync_origins.items()),
          file=out)
    print("durable per source origin: " + " ".join(f"{o}={n}" for o, n in figures.durable.items()), file=out)
    window = "from first commit to last durable" if figures.job_attempts == 1 else "of the re-run job"
    print(f"throughput: {figures.throughput_changes_per_s:,.0f} changes/s ({figures.changes} changes in "
          f"{figures.window_s}s {window}; job {figures.job_s}s, {figures.job_attempts} attempts)", file=out)
    for name, p in figures.latency_ms.items():
        print(f"latency commit->{name} (ms): " + " ".join(f"{k}={v}" for k, v in p.items()), file=out)
    sinks = figures.sinks
    print(f"sinks: {len(sinks)} results, {sum(s.puts for s in sinks)} puts, "
          f"{sum(s.skipped for s in sinks)} sink rows already durable skipped on replay; "
          f"sync server restarts: {figures.sync_server_generations - 1}", file=out)
