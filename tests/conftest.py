"""Hypothesis profiles: ``dev`` for quick local runs, ``ci`` (selected when CI is set) for CI;
a loopback etcd (cluster and shuffle tests) and a throwaway Postgres (CDC tests), always stopped."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

from conformance.pgoutput.postgres_server import PostgresServer, postgres_bin_dir
from conformance.cluster.etcd_server import EtcdServer, etcd_binary
from tests.spark.driver_classes import driver_options

settings.register_profile("dev", max_examples=50, stateful_step_count=30, deadline=None)
settings.register_profile(
    "ci", max_examples=200, stateful_step_count=50, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

DRIVER_CLASSES = Path(__file__).resolve().parents[1] / "build" / "spark-driver-classes.jsa"
"""Spark's classes a driver loads, as a class-data-sharing archive (``make test`` builds it with
tests/spark/driver_classes.py)."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", " ".join(["-XX:TieredStopAtLevel=1", *driver_options(DRIVER_CLASSES)]))
"""Every Spark driver the suite starts (in process or in a user's script, which inherits this) compiles with C1
only: a test's JVM lives seconds, and C2 compiling for a run that ends first took 15-20% of the Spark tests'
time on 2 cores. It maps the archive when there is one: start-up is mostly class loading. Nothing a test checks
depends on the JIT or on where classes come from; benchmarks run Spark as users do."""
if DRIVER_CLASSES_MAPPED := driver_options(DRIVER_CLASSES):
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", " ".join(DRIVER_CLASSES_MAPPED))
    """The standalone masters and workers the Spark tests start map it too (same class path): their start-up
    took 3.2-3.4 s of CPU without it, 1.8-2.0 s with it."""
EXECUTOR_OPTIONS = ["-XX:TieredStopAtLevel=1", *DRIVER_CLASSES_MAPPED]
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", shlex.join(
    ["--conf", f"spark.executor.defaultJavaOptions={' '.join(EXECUTOR_OPTIONS)}", "pyspark-shell"]))
"""The executors a standalone master launches for a driver the suite starts (tests/spark/test_standalone_cluster.py,
test_multihost.py) start as the drivers do: C1 only, the archive mapped (their class path is the driver's). Without
it each executor's start loaded every class from the jars with C2 compiling. ``defaultJavaOptions``: a job's own
``extraJavaOptions`` add to them."""


@pytest.fixture(scope="session")
def etcd_required() -> None:
    """Without `etcd` on PATH, etcd tests fail in CI and skip (saying why) locally."""
    if etcd_binary() is None:
        message = "etcd binary not on PATH (Debian package etcd-server; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def etcd_server(etcd_required: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """An etcd on loopback for the session, stopped at its end."""
    server = EtcdServer(Path(tmp_path_factory.mktemp("etcd")) / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_required() -> None:
    """Without Postgres binaries, CDC tests fail in CI and skip (saying why) locally."""
    if postgres_bin_dir() is None:
        message = "no Postgres binaries (Debian package postgresql-15; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_server(postgres_required: None) -> Iterator[PostgresServer]:
    """A Postgres with wal_level=logical for the session, stopped and removed at its end."""
    with PostgresServer() as server:
        yield server
