"""``query.stop()`` of a seafowl-sync query logs no ERROR line: the driver's log4j denies exactly the
echoes of killed write tasks (reference/spark/quiet.py), and still logs the other ERROR lines."""

from __future__ import annotations

from typing import Any

import pytest

from reference.spark.quiet import drop_stop_echoes

pytestmark = pytest.mark.spark


def denied(spark: Any, logger: str, text: str) -> bool:
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    event = (log4j.core.impl.Log4jLogEvent.newBuilder().setLoggerName(logger).setLevel(log4j.Level.ERROR)
             .setMessage(log4j.message.SimpleMessage(text)).build())
    config = log4j.LogManager.getContext(False).getConfiguration()
    return bool(config.getLoggerConfig(logger).isFiltered(event))


def test_the_echoes_of_a_stopped_querys_write_tasks_are_denied_and_nothing_else(spark: Any) -> None:
    v2 = "org.apache.spark.sql.execution.datasources.v2"
    drop_stop_echoes(spark.sparkContext)
    drop_stop_echoes(spark.sparkContext)  # once per context
    write = "MicroBatchWrite[epoch: 1, writer: org.apache.spark.sql.execution.datasources.v2.python.PythonStreamingWrite@5e]"
    assert denied(spark, f"{v2}.WriteToDataSourceV2Exec", f"Data source write support {write} is aborting.")
    assert denied(spark, f"{v2}.WriteToDataSourceV2Exec", f"Data source write support {write} aborted.")
    assert denied(spark, f"{v2}.WriteToDataSourceV2Exec", f"Data source write support {write} failed to abort.")
    assert denied(spark, f"{v2}.DataWritingSparkTask", "Aborting commit for partition 2 (task 15, attempt 0, stage 9.0)")
    assert denied(spark, "org.apache.spark.util.Utils", "Aborting task")
    assert not denied(spark, f"{v2}.WriteToDataSourceV2Exec", "Data source write support ParquetWrite is aborting.")
    assert not denied(spark, "org.apache.spark.util.Utils", "Uncaught exception in thread main")
