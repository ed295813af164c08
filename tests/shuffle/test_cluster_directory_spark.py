"""The PySpark API coordinates through the backend ``spark.streamwire.cluster.provider`` names: here a
real etcd, reached by the driver and by every executor's tasks (the default, the in-process cluster
behind the driver's cluster service, is what tests/spark runs on).

A SparkContext takes its configuration once per process, so the job runs in a child process: this
file run as a script is that job and prints one JSON line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from conformance.cluster.etcd_server import EtcdServer

pytestmark = [pytest.mark.spark, pytest.mark.etcd]

JOB_TIMEOUT_S = 300.0
"""Only to end a hung child; Spark start-up on a loaded machine takes most of it."""


def test_pyspark_shuffle_runs_on_the_etcd_provider(etcd_server: EtcdServer) -> None:
    setting = f"etcd://127.0.0.1:{etcd_server.client_port}/spark-{uuid.uuid4().hex[:8]}"
    done = subprocess.run([sys.executable, __file__, setting], capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["backend"] == "EtcdCluster"
    assert outcome["task_url"] == setting  # what executors open
    assert outcome["partitions"] == outcome["expected"]


def job(setting: str) -> dict[str, object]:
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from reference.cluster.config import SPARK_CONF_KEY
    from reference.spark import shuffle as api

    spark = (SparkSession.builder.master("local[4]").appName("streaming-shuffle-on-etcd")
             .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config(SPARK_CONF_KEY, setting).getOrCreate())
    try:
        sc = spark.sparkContext
        sc.setLogLevel("ERROR")
        pairs = sc.parallelize([(i % 11, i) for i in range(3000)], 2)
        result = api.streaming_shuffle(pairs, 2)
        partitions = [sorted(p) for p in result.glom().collect()]
        expected = [sorted(p) for p in pairs.partitionBy(2).glom().collect()]
        coordinator = api.StreamingShuffle.default(sc).directory
        return {"backend": type(coordinator.backend).__name__, "task_url": coordinator.task_url,
                "partitions": partitions, "expected": expected}
    finally:
        api.stop_directory(spark.sparkContext)
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(job(sys.argv[1])))
