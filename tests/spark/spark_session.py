"""A local Spark session for the tests of one module (Spark start-up is the slow part)."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator, Mapping


def local_session(extra: Mapping[str, str] = {}) -> Iterator[Any]:
    """A local[4] session with ``extra`` settings, stopped (with its default shuffle service) after."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from reference.spark.shuffle import stop_coordinator

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
    stop_coordinator(sc)
    session.stop()
