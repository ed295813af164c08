"""The seafowl-sync sink leaves Spark's log as the user set it: ``query.stop()`` logs no ERROR line or
stop warning (the driver's log4j denies exactly Spark's echoes of a stop, reference/spark/quiet.py,
and still logs the other lines) and no logger leaves PySpark's WARN for INFO."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from spark_session import console_beyond_start_up

from reference.spark.quiet import quiet_stops

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 600.0


def denied(spark: Any, logger: str, text: str) -> bool:
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    event = (log4j.core.impl.Log4jLogEvent.newBuilder().setLoggerName(logger).setLevel(log4j.Level.ERROR)
             .setMessage(log4j.message.SimpleMessage(text)).build())
    config = log4j.LogManager.getContext(False).getConfiguration()
    return bool(config.getLoggerConfig(logger).isFiltered(event))


def test_the_echoes_of_a_stopped_querys_write_tasks_are_denied_and_nothing_else(spark: Any) -> None:
    v2 = "org.apache.spark.sql.execution.datasources.v2"
    quiet_stops(spark.sparkContext)
    quiet_stops(spark.sparkContext)  # once per context
    write = "MicroBatchWrite[epoch: 1, writer: org.apache.spark.sql.execution.datasources.v2.python.PythonStreamingWrite@5e]"
    assert denied(spark, f"{v2}.WriteToDataSourceV2Exec", f"Data source write support {write} is aborting.")
    assert denied(spark, f"{v2}.WriteToDataSourceV2Exec", f"Data source write support {write} aborted.")
    assert denied(spark, f"{v2}.WriteToDataSourceV2Exec", f"Data source write support {write} failed to abort.")
    assert denied(spark, f"{v2}.DataWritingSparkTask", "Aborting commit for partition 2 (task 15, attempt 0, stage 9.0)")
    assert denied(spark, "org.apache.spark.util.Utils", "Aborting task")
    assert not denied(spark, f"{v2}.WriteToDataSourceV2Exec", "Data source write support ParquetWrite is aborting.")
    assert not denied(spark, "org.apache.spark.util.Utils", "Uncaught exception in thread main")
    assert denied(spark, "org.apache.spark.scheduler.DAGScheduler",
                  "Failed to cancel job group 95e6e13b-4cb9. Cannot find active jobs for it.")
    assert denied(spark, "org.apache.spark.scheduler.TaskSetManager",
                  "[queryId = ac24d] [batchId = 0] Lost task 0.0 in stage 0.0 (TID 0) (192.0.2.2 executor driver): "
                  "TaskKilled (Stage cancelled: [SPARK_JOB_CANCELLED] Job 0 cancelled Query [id = ac24d17d, "
                  "runId = 95e6e13b] was stopped SQLSTATE: XXKDA)")
    assert not denied(spark, "org.apache.spark.scheduler.TaskSetManager",
                      "Lost task 0.0 in stage 0.0 (TID 0) (host executor 1): java.lang.RuntimeException: boom")
    assert denied(spark, "org.apache.hadoop.util.Shell", "Interrupted while joining on: Thread[Thread-91,5,main]")
    assert not denied(spark, "org.apache.hadoop.util.Shell", "Error while running command to get file permissions")


def test_registering_the_sink_leaves_the_loggers_levels_to_their_parent(spark: Any) -> None:
    """No logger gets a configuration of its own (one would take it out of PySpark's WARN threshold)."""
    quiet_stops(spark.sparkContext)
    config = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
    for logger in ("org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
                   "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
                   "org.apache.spark.scheduler.DAGScheduler"):
        assert config.getLoggerConfig(logger).getName() == "", logger


def test_the_accumulator_server_takes_the_jvms_goodbye_silently_and_reports_the_rest(
        spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    quiet_stops(spark.sparkContext)
    server = spark.sparkContext._accumulatorServer
    for error in (EOFError(), ValueError("The value of the provided token to the AccumulatorServer is not correct.")):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))
    printed = capsys.readouterr().err
    assert "ValueError: The value of the provided token" in printed and "EOFError" not in printed, printed


def test_the_shuffle_quiets_the_stops_of_its_context_too(spark: Any) -> None:
    from reference.spark import StreamingShuffle

    sc = spark.sparkContext
    sc._streamwire_quiet = False
    vars(sc._accumulatorServer).pop("handle_error", None)  # PySpark's own again
    StreamingShuffle(spark).close()
    assert sc._streamwire_quiet and "handle_error" in vars(sc._accumulatorServer)


RATE_QUERY = textwrap.dedent("""
    import sys, time
    from pyspark.sql import SparkSession
    from reference.spark import sync_datasource

    location, checkpoint = sys.argv[1:]
    spark = SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    sync_datasource.register(spark)
    rows = spark.readStream.format("rate").option("rowsPerSecond", 500).load().selectExpr("value AS id", "timestamp AS at")
    query = (rows.writeStream.format("seafowl-sync").option("location", location).option("table", "rate")
             .option("checkpointLocation", checkpoint).start())
    while (query.lastProgress or {}).get("batchId", -1) < 1:
        time.sleep(0.1)
    query.stop()
    spark.stop()
    print("STOPPED", flush=True)
""")


def test_a_rate_query_into_the_sink_and_its_stop_print_nothing_but_sparks_start_up(tmp_path: Path) -> None:
    """As a user runs it (PySpark's default WARN): no INFO line per micro-batch, and its stop prints no
    ERROR, no stop warning and no traceback."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    server = subprocess.Popen([sys.executable, "-m", "reference.sync", "serve", "--store", str(tmp_path / "store"),
                               "--port", "0", "--max-replication-lag-s", "0.2", "--flush-task-interval-s", "0.1"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split()[1]
        script = tmp_path / "rate.py"
        script.write_text(RATE_QUERY)
        done = subprocess.run([sys.executable, str(script), f"grpc://127.0.0.1:{port}", str(tmp_path / "checkpoint")],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    finally:
        server.terminate()
        server.wait(30)
    assert done.returncode == 0 and done.stdout == "STOPPED\n", done.stderr[-3000:]
    assert console_beyond_start_up(done.stderr) == [], done.stderr[-3000:]
