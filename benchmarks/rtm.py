"""Spark's real-time mode next to the Python runtime, at the same offered rates, in one run.

Both sides carry rows ``(key, seq, sent_us)`` through a streaming shuffle to 2 readers, keyed over 16 keys,
fed in 10 ms ticks at each offered rate of a ramp (each row stamped with the wall clock when offered):

  spark   a real-time-mode query on local[8]: a LowLatencyMemoryStream (2 partitions, reached through the
          JVM gateway), repartition(2, key), so Spark 4.3.0's own StreamingShuffleWriter/Reader carry the
          rows, and a JVM foreach sink stamping arrival (conformance/shuffle/jvm/RealTimeArrivals.java)
  spark_without_shuffle
          the same query without repartition (source to sink in one stage): what Spark's figures owe to
          the source, the query engine and the sink rather than to its shuffle
  python  the runtime (reference/shuffle/local.py): 2 writer tasks to 2 reader tasks, default settings and
          options (so Spark's flush: a buffer waits to fill or for networkBufferMaxWaitTimeMs), the reader's
          consumer stamping arrival
  python_idle_flush
          the same with the idle flush (TaskOptions(flush_when_idle=True): a buffer is sent as soon as the
          producer has handed over everything it had), the option for real-time work

Each step (a window) offers its rate for --step-s seconds, then waits for every row; a step is sustained when
every row arrived, the last one within a second of the step's end, and at least 90% of the offered rate came
through. Each rate is offered in --windows steps in a row. The ramp of a side stops after its first step that is
not sustained. Figures per step: end-to-end p50/p99 latency (ms), delivered rows/s (rows over the time from the
step's start to its last arrival); per side: the highest sustained offered rate, and per rate all of whose
windows it sustained, the median of their p99 (``rate_p99_ms``). Per rate both Spark sides sustained,
``spark_shuffle_share_p99_ms`` is Spark's p99 with its shuffle minus its p99 without it (medians), and the goals
compare each Python side's median p99 with that share.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import struct
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, Iterable, Iterator, NamedTuple, Protocol

from reference.shuffle.local import run_local_shuffle
from reference.shuffle.task import TaskOptions
from streamwire.cli import one_line
from spec.shuffle.settings import ShuffleSettings

PARTITIONS = 2
"""Source partitions and shuffle partitions on the Spark side; writers and readers on the Python side."""
KEYS = 16
TICK_S = 0.01
SLACK_S = 1.0
"""A sustained step's last row arrives at most this long after the step's last offer."""
KEPT_PACE = 0.9
"""A sustained step delivers at least this share of the offered rate."""
WARMUP_ROWS = 20
WARMUP_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 60.0
REAL_TIME_BATCH = "5 minutes"
"""Real-time mode's long-running batch (at least spark.sql.streaming.realTimeMode.minBatchDuration, 5 s). Rows
offered while one batch ends and the next starts wait seconds; the default outlasts a run, so the figures are
the steady state (``--batch "10 seconds"`` shows the boundaries)."""
SPARK_MASTER = "local[8]"
"""Real-time mode runs every stage at once: 2 source tasks and 2 shuffle readers, with room to spare."""
WINDOWS = 3
"""Steps per rate (quick: 1). The share is a difference of two p99s measured a minute apart: a single window's
p99 is decided by the few rows that one stall of a loaded machine delays (one run had Spark without its shuffle
at a p99 of 158 ms against 69 ms with it, a negative share), so a rate's p99 is the median of its windows'."""
FULL_RATES = (500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
QUICK_RATES = (500, 5_000)
ROW = struct.Struct(">qq")
"""The Python side's record: seq, sent_us."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help=f"rates {QUICK_RATES} only, 2 s each")
    parser.add_argument("--step-s", type=float, default=None, help="seconds per offered rate (default 5, quick 2)")
    parser.add_argument("--windows", type=int, default=None,
                        help=f"steps per rate, whose median p99 is the rate's (default {WINDOWS}, quick 1)")
    parser.add_argument("--batch", default=REAL_TIME_BATCH, help="real-time mode's batch duration (trigger realTime)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")


class Arrival(NamedTuple):
    seq: int
    sent_us: int
    arrived_us: int


class Side(Protocol):
    """One implementation under test: rows go in by ``offer``, arrivals come out by ``drain``."""

    def offer(self, first_seq: int, count: int, sent_us: int) -> None: ...

    def arrived(self) -> int:
        """Rows arrived so far, in all."""

    def drain(self) -> list[Arrival]:
        """The arrivals since the last drain."""


@dataclass(frozen=True)
class Step:
    offered_rows_s: int
    sent: int
    delivered: int
    p50_ms: float | None
    p99_ms: float | None
    delivered_rows_s: float
    sustained: bool


@dataclass
class SideFigures:
    available: bool
    reason: str | None = None
    steps: list[Step] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        sustained = [step.offered_rows_s for step in self.steps if step.sustained]
        return {"available": self.available, "reason": self.reason, "steps": [asdict(s) for s in self.steps],
                "sustainable_rows_s": max(sustained, default=0),
                "every_row_delivered": self.available and all(s.delivered == s.sent for s in self.steps)}


def now_us() -> int:
    return time.time_ns() // 1_000


def _wait_for(side: Side, total: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while side.arrived() < total and time.monotonic() < deadline:
        time.sleep(0.02)


def run_step(side: Side, rate: int, seconds: float, first_seq: int) -> Step:
    """Offer ``rate`` rows/s for ``seconds`` in ticks (never ahead of the clock), then wait for every row."""
    start = time.monotonic()
    start_us = now_us()
    sent = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * rate) - sent
        if due > 0:
            side.offer(first_seq + sent, due, now_us())
            sent += due
        time.sleep(max(0.0, TICK_S - (time.monotonic() - start - elapsed)))
    end_us = now_us()
    _wait_for(side, first_seq + sent, DRAIN_TIMEOUT_S)
    arrivals = side.drain()
    latencies = [(a.arrived_us - a.sent_us) / 1000.0 for a in arrivals]
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else None
    last_us = max((a.arrived_us for a in arrivals), default=end_us)
    delivered = len({a.seq for a in arrivals if first_seq <= a.seq < first_seq + sent})
    delivered_rows_s = delivered / max(last_us - start_us, 1) * 1e6
    return Step(rate, sent, delivered, round(cuts[49], 2) if cuts else None, round(cuts[98], 2) if cuts else None,
                round(delivered_rows_s, 1), delivered == sent == len(arrivals)
                and last_us - end_us <= SLACK_S * 1e6 and delivered_rows_s >= KEPT_PACE * rate)


def ramp(side: Side, rates: tuple[int, ...], seconds: float, windows: int) -> list[Step]:
    """Warm the side up (its first rows find every task running), then ``windows`` steps of each rate until one
    is not sustained."""
    side.offer(0, WARMUP_ROWS, now_us())
    _wait_for(side, WARMUP_ROWS, WARMUP_TIMEOUT_S)
    if side.arrived() < WARMUP_ROWS:
        raise RuntimeError(f"warm-up rows did not arrive within {WARMUP_TIMEOUT_S:.0f} s")
    side.drain()
    steps: list[Step] = []
    seq = WARMUP_ROWS
    for rate in rates:
        for _ in range(windows):
            steps.append(run_step(side, rate, seconds, seq))
            seq += steps[-1].sent
            if not steps[-1].sustained:
                return steps
    return steps


class PythonRuntime:
    """The runtime in one process (writer and reader tasks as threads), fed through one queue per writer."""

    def __init__(self, options: TaskOptions) -> None:
        self._options = options
        self._queues: list[queue.SimpleQueue[list[tuple[int, bytes]] | None]] = [
            queue.SimpleQueue() for _ in range(PARTITIONS)]
        self._arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._count = 0
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rtm-python-runtime")

    def _records(self, writer: int) -> Iterator[tuple[int, bytes]]:
        for batch in iter(self._queues[writer].get, None):
            yield from batch

    def _consume(self, reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        for record in records:
            seq, sent = ROW.unpack(record)
            with self._lock:
                self._arrivals.append(Arrival(seq, sent, now_us()))
                self._count += 1
        return []

    def _run(self) -> None:
        try:
            run_local_shuffle([self._records(w) for w in range(PARTITIONS)], PARTITIONS, ShuffleSettings(),
                              self._options, consume=self._consume, timeout_s=24 * 3600.0)
        except BaseException as error:  # noqa: BLE001 - reported by close()
            self._failure = error

    def offer(self, first_seq: int, count: int, sent_us: int) -> None:
        batches: list[list[tuple[int, bytes]]] = [[] for _ in range(PARTITIONS)]
        for seq in range(first_seq, first_seq + count):
            key = seq % KEYS
            batches[seq % PARTITIONS].append((key % PARTITIONS, ROW.pack(seq, sent_us)))
        for writer, batch in enumerate(batches):
            self._queues[writer].put(batch)

    def arrived(self) -> int:
        return self._count

    def drain(self) -> list[Arrival]:
        with self._lock:
            arrivals, self._arrivals = self._arrivals, []
        return arrivals

    def __enter__(self) -> PythonRuntime:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for writer_queue in self._queues:
            writer_queue.put(None)
        self._thread.join(DRAIN_TIMEOUT_S)
        if error is not None:
            return
        if self._thread.is_alive():
            raise RuntimeError(f"the Python runtime did not end within {DRAIN_TIMEOUT_S:.0f} s of its input")
        if self._failure is not None:
            raise RuntimeError(f"the Python runtime failed: {self._failure}") from self._failure


def start_spark(host: str = "127.0.0.1") -> Any:
    """A local session whose driver class path holds the arrival sink (compiled like the conformance adapter);
    its shuffle servers listen on ``host`` (a loopback address of its own lets a capture watch only them)."""
    from conformance.shuffle.jvm_bridge import CLASSES_JAR, compile_sources, find_jdk, spark_jars
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    classes = compile_sources(find_jdk(), spark_jars()) / CLASSES_JAR
    spark = (SparkSession.builder.master(SPARK_MASTER).appName("streamwire-rtm")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", host).config("spark.driver.bindAddress", host)
             .config("spark.driver.extraClassPath", str(classes)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class SparkRealTime:
    """A real-time-mode query from a LowLatencyMemoryStream (through ``repartition`` when ``shuffle``) to the
    JVM arrival sink; one at a time per session, since they share the sink's store."""

    def __init__(self, spark: Any, work: str, batch: str, shuffle: bool) -> None:
        from pyspark.sql import DataFrame

        jvm = spark.sparkContext._jvm
        self._spark = spark
        self._stream = jvm.org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream.apply(
            spark._jsparkSession, PARTITIONS, jvm.org.apache.spark.sql.Encoders.STRING())
        self._lines = jvm.java.util.regex.Pattern.compile("\n")
        self._to_scala = jvm.scala.jdk.javaapi.CollectionConverters
        self._sink = jvm.RealTimeArrivals
        rows = (DataFrame(self._stream.toDF(), spark)
                .selectExpr("split(value, ',') AS f")
                .selectExpr("CAST(f[0] AS INT) AS key", "CAST(f[1] AS BIGINT) AS seq", "CAST(f[2] AS BIGINT) AS sent_us"))
        if shuffle:
            rows = rows.repartition(PARTITIONS, "key")
        self._query = (rows._jdf.writeStream().foreach(jvm.RealTimeArrivals()).outputMode("update")
                       .option("checkpointLocation", work)
                       .trigger(jvm.org.apache.spark.sql.streaming.Trigger.RealTime(batch)).start())
        self._base = int(self._sink.count())
        self._sink.drain()

    def offer(self, first_seq: int, count: int, sent_us: int) -> None:
        """One ``addData`` per tick; the lines are split in the JVM (a Python list would cost a call per row)."""
        text = "\n".join(f"{seq % KEYS},{seq},{sent_us}" for seq in range(first_seq, first_seq + count))
        self._stream.addData(self._to_scala.asScala(self._lines.splitAsStream(text).toList()).toSeq())

    def arrived(self) -> int:
        return int(self._sink.count()) - self._base

    def drain(self) -> list[Arrival]:
        data = bytes(self._sink.drain())
        longs = struct.unpack(f">{len(data) // 8}q", data)
        return [Arrival(*longs[i:i + 3]) for i in range(0, len(longs), 3)]

    def stop(self) -> None:
        """Stop the query; stopping aborts the running batch's tasks, which Spark logs loudly, so it is muted."""
        self._spark.sparkContext.setLogLevel("OFF")
        try:
            self._query.stop()
        finally:
            self._spark.sparkContext.setLogLevel("ERROR")


def spark_query(spark: Any, rates: tuple[int, ...], seconds: float, windows: int, batch: str,
                shuffle: bool) -> SideFigures:
    """One real-time query's ramp; a query that cannot start or run reports why instead of figures."""
    with tempfile.TemporaryDirectory(prefix="streamwire-rtm-") as work:
        try:
            query = SparkRealTime(spark, work, batch, shuffle)
        except Exception as error:  # noqa: BLE001 - real-time mode unavailable here: say why
            return SideFigures(False, one_line(error))
        try:
            return SideFigures(True, None, ramp(query, rates, seconds, windows))
        except Exception as error:  # noqa: BLE001 - reported in the figures
            return SideFigures(False, one_line(error))
        finally:
            query.stop()


def spark_sides(rates: tuple[int, ...], seconds: float, windows: int, batch: str) -> tuple[SideFigures, SideFigures]:
    """Spark's query through its streaming shuffle, then the same query without the shuffle (source to sink),
    which shows how much of Spark's figures the shuffle accounts for."""
    try:
        spark = start_spark()
    except Exception as error:  # noqa: BLE001 - no Spark here: both sides say why
        unavailable = SideFigures(False, one_line(error))
        return unavailable, unavailable
    try:
        return (spark_query(spark, rates, seconds, windows, batch, shuffle=True),
                spark_query(spark, rates, seconds, windows, batch, shuffle=False))
    finally:
        spark.stop()


def python_side(rates: tuple[int, ...], seconds: float, windows: int, options: TaskOptions) -> SideFigures:
    with PythonRuntime(options) as runtime:
        return SideFigures(True, None, ramp(runtime, rates, seconds, windows))


def _print_side(name: str, figures: SideFigures) -> None:
    if not figures.available:
        print(f"{name} unavailable: {figures.reason}", flush=True)
    for step in figures.steps:
        print(f"{name:17} offered {step.offered_rows_s:7,} rows/s: delivered {step.delivered}/{step.sent} at "
              f"{step.delivered_rows_s:10,.0f} rows/s, p50 {step.p50_ms} ms, p99 {step.p99_ms} ms"
              f"{'' if step.sustained else '  (not sustained)'}", flush=True)


def main(args: argparse.Namespace) -> int:
    rates = QUICK_RATES if args.quick else FULL_RATES
    seconds = args.step_s or (2.0 if args.quick else 5.0)
    windows = args.windows or (1 if args.quick else WINDOWS)
    spark, unshuffled = spark_sides(rates, seconds, windows, args.batch)
    _print_side("spark", spark)
    _print_side("spark, no shuffle", unshuffled)
    python = python_side(rates, seconds, windows, TaskOptions())
    _print_side("python", python)
    idle_flush = python_side(rates, seconds, windows, TaskOptions(flush_when_idle=True))
    _print_side("python, idle flush", idle_flush)
    figures: dict[str, Any] = {"rates": list(rates), "step_s": seconds, "windows": windows, "keys": KEYS, "partitions": PARTITIONS,
               "real_time_batch": args.batch, "spark": spark.summary(), "spark_without_shuffle": unshuffled.summary(),
                               "python": python.summary(), "python_idle_flush": idle_flush.summary()}
    figures.update(shuffle_share(spark, unshuffled, {"python": python, "python_idle_flush": idle_flush}, windows))
    if args.json:
        print(json.dumps(figures))
    delivered = figures["python"]["every_row_delivered"] and figures["python_idle_flush"]["every_row_delivered"]
    return 0 if delivered else 1


def rate_p99(figures: SideFigures, windows: int) -> dict[int, float]:
    """Per rate all of whose ``windows`` steps were sustained, the median of their p99."""
    by_rate: dict[int, list[float]] = {}
    for step in figures.steps:
        if step.sustained and step.p99_ms is not None:
            by_rate.setdefault(step.offered_rows_s, []).append(step.p99_ms)
    return {rate: round(statistics.median(p99s), 2) for rate, p99s in by_rate.items() if len(p99s) == windows}


def shuffle_share(spark: SideFigures, unshuffled: SideFigures, pythons: dict[str, SideFigures],
                  windows: int) -> dict[str, Any]:
    """Spark's shuffle's share of its p99 per rate both Spark sides sustained, and whether each Python
    side's p99 at that rate stays within it (each a median over the rate's windows)."""
    sides = {"spark": spark, "spark_without_shuffle": unshuffled, **pythons}
    p99 = {name: rate_p99(figures, windows) for name, figures in sides.items()}
    with_shuffle, without = p99["spark"], p99["spark_without_shuffle"]
    share = {rate: round(ms - without[rate], 2) for rate, ms in with_shuffle.items() if rate in without}
    goals = {}
    for name in pythons:
        theirs = p99[name]
        goals[f"{name}_p99_within_spark_shuffle_share"] = bool(share) and all(
            rate in theirs and theirs[rate] <= limit for rate, limit in share.items())
        for rate, limit in share.items():
            print(f"{name:17} {rate:7,} rows/s: p99 {theirs.get(rate)} ms against Spark's shuffle share {limit} ms",
                  flush=True)
    return {"rate_p99_ms": {name: {str(rate): ms for rate, ms in by_rate.items()} for name, by_rate in p99.items()},
            "spark_shuffle_share_p99_ms": {str(rate): ms for rate, ms in share.items()}, "goals": goals}
