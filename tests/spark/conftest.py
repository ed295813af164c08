"""One SparkSession for every Spark test of the streaming shuffle: Spark start-up is the slow part."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from reference.spark.shuffle import stop_coordinator

    session = (
        SparkSession.builder.master("local[4]").appName("streaming-shuffle-tests")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "4")
        # explicit: a context created earlier in this process (the pipeline tests) leaves its
        # provider URL in the JVM's defaults, and its cluster service is gone by now
        .config("spark.streamwire.cluster.provider", "memory")
        .getOrCreate()
    )
    sc = session.sparkContext
    sc.setLogLevel("ERROR")
    yield session
    if sc._jsc is not None:  # another test may have stopped the shared context already
        stop_coordinator(sc)
    session.stop()
