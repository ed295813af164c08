"""One SparkSession per test module of the streaming shuffle: Spark start-up is the slow part.

Module scope, not session scope: a session-wide context stayed active after this directory's
tests, so a later module's ``getOrCreate`` (tests/sync) silently got this context, with this
configuration, and stopped it under this fixture; no module now sees another's context."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest


@pytest.fixture(scope="module")
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
    stop_coordinator(sc)
    session.stop()
