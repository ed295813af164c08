"""The user's path through PySpark, in one run on ``local[4]``:

  dataframe   streaming_repartition(df, 2, "key") vs df.repartition(2, "key"), each followed by the
              same Python step (an Arrow batch count), seconds for --rows rows and their ratio, and the
              CPU seconds of Spark's JVM and of its Python workers during each
  sink        rows/s from writeStream (format seafowl-sync, waitDurable) into a sync server until
              durable, for --sink-rows rows read from Parquet files by an availableNow query
  rate        a rate source offering --rate rows/s for --rate-seconds into the sink (waitDurable, the
              server's lag 1 s): rows offered, rows durable when the query is stopped, their ratio
              (1.0 keeps pace) and the mean micro-batch duration
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from benchmarks.procstat import cpu_seconds, jvm_pid

SLOTS = 4
READERS = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the DataFrame case")
    parser.add_argument("--sink-rows", type=int, default=200_000, help="rows of the sink case")
    parser.add_argument("--rate", type=int, default=10_000, help="rows/s the rate source offers")
    parser.add_argument("--rate-seconds", type=float, default=30.0, help="how long the rate query runs")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")


def _count(batches: Iterator[Any]) -> Iterator[Any]:
    """The Python step both shuffles feed: one pass over every Arrow batch."""
    import pyarrow as pa

    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pydict({"n": [rows]})


def _timed_rows(df: Any) -> tuple[float, int, dict[str, float]]:
    """Seconds, rows and CPU seconds (Spark's JVM, its Python workers) of the Python step over ``df``."""
    jvm = jvm_pid(df.sparkSession.sparkContext)
    cpu, start = cpu_seconds(jvm), time.perf_counter()
    rows = sum(r["n"] for r in df.mapInArrow(_count, "n long").collect())
    return time.perf_counter() - start, rows, (cpu_seconds(jvm) - cpu)._asdict()


def dataframe_case(spark: Any, rows: int) -> dict[str, Any]:
    from reference.spark import StreamingShuffle

    df = spark.range(0, rows, 1, SLOTS - READERS).selectExpr("id", "id % 1000 AS key", "CAST(id AS STRING) AS v")
    df.cache().count()
    with StreamingShuffle(spark) as shuffle:
        # Warm both paths once (Python workers, imports), then time one run of each.
        _timed_rows(df.repartition(READERS, "key"))
        _timed_rows(shuffle.repartition(df, READERS, "key"))
        spark_s, spark_rows, spark_cpu = _timed_rows(df.repartition(READERS, "key"))
        streaming_s, streaming_rows, streaming_cpu = _timed_rows(shuffle.repartition(df, READERS, "key"))
    assert spark_rows == streaming_rows == rows
    return {"rows": rows, "repartition_s": round(spark_s, 3), "streaming_repartition_s": round(streaming_s, 3),
            "streaming_vs_repartition": round(streaming_s / spark_s, 3),
            "repartition_cpu_s": spark_cpu, "streaming_repartition_cpu_s": streaming_cpu}


def sink_case(spark: Any, rows: int, work: Path) -> dict[str, Any]:
    from reference.pipeline.syncserver import FlushSettings, SyncServerProcess
    from reference.spark import sync_datasource

    source = str(work / "source")
    spark.range(0, rows, 1, 2).selectExpr("id", "CAST(id AS STRING) AS v").write.parquet(source)
    server = SyncServerProcess(str(work / "store"), work / "server.log", FlushSettings(0.2))
    location = server.start()
    try:
        sync_datasource.register(spark)
        changes = spark.readStream.schema("id long, v string").parquet(source)
        start = time.perf_counter()
        query = (changes.writeStream.format(sync_datasource.NAME).option("location", location)
                 .option("table", "bench").option("checkpointLocation", str(work / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        elapsed = time.perf_counter() - start
    finally:
        server.stop()
    return {"sink_rows": rows, "sink_s": round(elapsed, 3), "sink_rows_per_s": round(rows / elapsed)}


def rate_case(spark: Any, rate: int, seconds: float, work: Path) -> dict[str, Any]:
    from reference.pipeline.syncserver import FlushSettings, SyncServerProcess
    from reference.spark import sync_datasource
    from reference.sync.store import read_delta

    server = SyncServerProcess(str(work / "rate-store"), work / "rate-server.log", FlushSettings(1.0, 0.2))
    location = server.start()
    try:
        sync_datasource.register(spark)
        changes = spark.readStream.format("rate").option("rowsPerSecond", rate).load().selectExpr(
            "value AS id", "timestamp AS at")
        query = (changes.writeStream.format(sync_datasource.NAME).option("location", location)
                 .option("table", "rate").option("checkpointLocation", str(work / "rate-checkpoint")).start())
        time.sleep(seconds)
        offered = max(int(p["sources"][0]["endOffset"]) for p in query.recentProgress) if query.recentProgress else 0
        durations = [p["durationMs"]["triggerExecution"] for p in query.recentProgress]
        query.stop()
    finally:
        server.stop()
    landed = read_delta(str(work / "rate-store" / "rate")).num_rows
    return {"rate_offered_rows": rate * seconds, "rate_committed_rows": offered, "rate_durable_rows": landed,
            "rate_keeps_pace": round(landed / (rate * seconds), 3),
            "rate_mean_batch_ms": round(sum(durations) / max(1, len(durations)))}


def main(args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    from reference.spark.workers import local_workers_use_driver_python

    spark = (SparkSession.builder.master(f"local[{SLOTS}]").appName("streamwire-user-path")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    local_workers_use_driver_python(spark.sparkContext)
    try:
        figures = dataframe_case(spark, args.rows)
        with tempfile.TemporaryDirectory(prefix="streamwire-bench-") as work:
            figures.update(sink_case(spark, args.sink_rows, Path(work)))
            figures.update(rate_case(spark, args.rate, args.rate_seconds, Path(work)))
    finally:
        spark.stop()
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        print(f"dataframe  {figures['rows']} rows: repartition {figures['repartition_s']} s, streaming_repartition "
              f"{figures['streaming_repartition_s']} s, ratio {figures['streaming_vs_repartition']} (CPU s: "
              f"{figures['repartition_cpu_s']} and {figures['streaming_repartition_cpu_s']})")
        print(f"sink       {figures['sink_rows']} rows: {figures['sink_rows_per_s']:,} rows/s until durable "
              f"({figures['sink_s']} s)")
        print(f"rate       {args.rate} rows/s for {args.rate_seconds} s: {figures['rate_durable_rows']} rows durable "
              f"({figures['rate_keeps_pace']} of those offered), mean micro-batch {figures['rate_mean_batch_ms']} ms")
    return 0
