"""A local Spark session for the tests of one module (Spark start-up is the slow part)."""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Iterator, Mapping

SPARK_START_UP = re.compile(
    r"^WARNING: Using incubator modules|^Using Spark's default log4j profile|^Setting default log level|"
    r"^To adjust logging level|WARN Utils: (Your hostname|Set SPARK_LOCAL_IP|Service 'SparkUI' could not bind on port)|WARN NativeCodeLoader|"
    r"WARN ResolveWriteToStream: spark.sql.adaptive.enabled is not supported in streaming")
"""What Spark prints starting a job (or a streaming query) on this machine, whatever the job (its UI
moves to the next port when another Spark on the machine holds 4040)."""


def console_beyond_start_up(stderr: str) -> list[str]:
    """The lines a user's job printed on stderr besides Spark's start-up lines."""
    return [line for line in stderr.splitlines() if not SPARK_START_UP.search(line)]


def local_session(extra: Mapping[str, str] = {}) -> Iterator[Any]:
    """A local[4] session with ``extra`` settings, stopped (with its default shuffle service) after."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from reference.spark.shuffle import stop_directory

    builder = (
        SparkSession.builder.master("local[4]").appName("streaming-shuffle-tests")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "4")
        # explicit: a context created earlier in this process (the pipeline tests) leaves its
        # provider URL in the JVM's defaults, and its cluster service is gone by now
        .config("spark.streamwire.cluster.provider", "memory")
    )
    for key, value in extra.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    sc = session.sparkContext
    sc.setLogLevel("ERROR")
    yield session
    stop_directory(sc)
    session.stop()
