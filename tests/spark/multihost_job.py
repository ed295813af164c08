"""Driver of the multi-host test, run on the master's host (namespace): one SparkContext per process.

Usage: python multihost_job.py MASTER_URL PROVIDER_URL. It waits for the master, etcd and both
executors, then:

1. runs a streaming shuffle across the two executors and checks it against ``partitionBy``;
2. starts an endless streaming shuffle into two partitions and reads only partition 0 (its exchange
   task, plus the writer-only task the driver adds for input partition 1: two writers and one
   reader, one task per executor, so one worker hosts a writer only), prints ``STREAMING {"writers": {node: host}, "reader_hosts": [...]}`` once every task
   joined and data flows, and waits for the job to fail (the test takes a worker's link down);
3. stops its coordinator and context and prints one JSON line: the outcome of both, when the
   drill's first failure reached the driver's view of the directory and when its job failed
   (``time.monotonic``, comparable with the test's), and the provider's bound.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any, Iterator
from urllib.parse import urlsplit

START_TIMEOUT_S = 120.0
DRILL_TIMEOUT_S = 120.0
"""The drill's writers stop by themselves after this (only ends a broken run)."""
OWN_THREADS = ("shuffle-", "cluster-", "etcd-")
"""Name prefixes of the threads the shuffle and the cluster provider start in the driver."""


def wait_for(host: str, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def placed(index: int, rows: Iterator[Any]) -> list[tuple[int, str, list[Any]]]:
    return [(index, os.environ.get("SPARK_LOCAL_IP", "?"), list(rows))]


def endless(index: int, _: Iterator[int]) -> Iterator[tuple[int, int]]:
    deadline = time.monotonic() + DRILL_TIMEOUT_S
    i = 0
    while time.monotonic() < deadline:
        yield i % 13, index * 10**9 + i
        i += 1
        time.sleep(0.002)


def count(rows: Iterator[Any]) -> Iterator[int]:
    yield sum(1 for _ in rows)


def main(master: str, provider: str) -> None:
    from pyspark.sql import SparkSession

    from reference.cluster.config import SPARK_CONF_KEY
    from reference.spark import shuffle as api

    master_address = urlsplit(master)
    wait_for(master_address.hostname or "", master_address.port or 7077)
    etcd_address = urlsplit(provider)
    wait_for(etcd_address.hostname or "", etcd_address.port or 2379)
    spark = (SparkSession.builder.master(master).appName("streaming-shuffle-multihost")
             .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"]).config(SPARK_CONF_KEY, provider)
             .config("spark.pyspark.python", sys.executable).config("spark.executor.memory", "512m")
             # a streaming shuffle's tasks cannot be retried, and a retry Spark places on the executor
             # that was cut off waits for that executor to be declared lost (spark.network.timeout)
             .config("spark.task.maxFailures", "1")
             # one task per executor at a time (each worker offers 2 cores): the two tasks of a run
             # always land on the two hosts, so the drill's writer-only task has a host of its own
             .config("spark.task.cpus", "2")
             # after a JVM GC the context cleaner asks every block manager, the lost executor's too, to
             # drop what was collected; blocking, it waits spark.rpc.askTimeout (120 s) and spark.stop()
             # waits for it: with a System.gc() after the drill, stop took 118 s, 1 s without blocking
             .config("spark.cleaner.referenceTracking.blocking", "false")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    outcome: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while api.available_slots(sc) < 2 and time.monotonic() < deadline:  # both executors registered
            time.sleep(0.2)
        rdd = sc.parallelize([(i % 97, i) for i in range(20000)], 2)
        out = api.streaming_shuffle(rdd, 2).mapPartitionsWithIndex(placed).collect()
        expected = rdd.partitionBy(2).glom().collect()
        outcome["correct"] = [sorted(rows) for _, _, rows in sorted(out)] == [sorted(p) for p in expected]
        outcome["reader_hosts"] = sorted({host for _, host, _ in out})
        outcome.update(drill(sc, api))
    finally:
        api.stop_directory(sc)
        spark.stop()
    time.sleep(0.5)  # daemon threads of the stopped clients end at their next wake-up
    outcome["leftover_threads"] = sorted(t.name for t in threading.enumerate() if t.name.startswith(OWN_THREADS))
    print(json.dumps(outcome), flush=True)


def drill(sc: Any, api: Any) -> dict[str, Any]:
    from spec.shuffle.coordination import ShuffleKey

    result = api.streaming_shuffle(sc.parallelize(range(2), 2).mapPartitionsWithIndex(endless), 2)
    failure: list[BaseException] = []
    failed_at: list[float] = []

    def run() -> None:
        try:
            sc.runJob(result.mapPartitions(count), list, [0])
        except BaseException as error:  # noqa: BLE001 - the outcome is the point
            failure.append(error)
        failed_at.append(time.monotonic())

    job = threading.Thread(target=run, name="drill-job")
    job.start()
    coordinator = api.StreamingShuffle.default(sc).directory
    shuffle_id = max(coordinator.open_shuffles())
    view = coordinator.directory(shuffle_id).view
    key = ShuffleKey(shuffle_id, 0)
    deadline = time.monotonic() + START_TIMEOUT_S
    while (len(view.writers(key)) < 2 or len(view.readers(key)) < 1) and job.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # mid-stream: the writers produce a record every 2 ms
    print("STREAMING " + json.dumps({"writers": {w.node: w.address for w in view.writers(key)},
                                     "reader_hosts": [r.address for r in view.readers(key)]}), flush=True)
    root_cause_at = None
    while job.is_alive() and root_cause_at is None:  # the first failure reaches every task's view
        if view.entry(f"shuffle/{shuffle_id}/0/failure") is not None:
            root_cause_at = time.monotonic()
        time.sleep(0.01)
    job.join(DRILL_TIMEOUT_S + 60)
    return {"drill_error": str(failure[0]) if failure else "", "drill_failed_at": failed_at[0] if failed_at else None,
            "root_cause_at": root_cause_at, "fail_bound": coordinator.backend.timing.fail_bound}


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
