"""Driver of the standalone-cluster test: runs in its own process (one SparkContext per process).

Usage: python standalone_job.py MASTER_URL; prints one JSON line with the outcome.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def tag(kv: tuple[int, int]) -> tuple[int, tuple[int, int]]:
    return kv[0], (kv[1], os.getppid())


def reader_daemons(index: int, rows: Any) -> list[tuple[int, int, list[Any]]]:
    return [(index, os.getppid(), list(rows))]


def main(master: str) -> None:
    from pyspark.sql import SparkSession

    from reference.spark import stop_directory, streaming_shuffle
    from reference.spark.shuffle import available_slots

    spark = (SparkSession.builder.master(master).appName("streaming-shuffle-standalone")
             .config("spark.driver.host", "127.0.0.1").config("spark.pyspark.python", sys.executable)
             .config("spark.executor.memory", "512m").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        sc = spark.sparkContext
        deadline = time.monotonic() + 120
        while available_slots(sc) < 4 and time.monotonic() < deadline:  # both executors registered
            time.sleep(0.2)
        rdd = sc.parallelize([(i % 97, i) for i in range(20000)], 2)
        # 4 partitions: 4 exchange tasks fill the 4 slots of both executors
        out = streaming_shuffle(rdd.map(tag), 4).mapPartitionsWithIndex(reader_daemons).collect()
        expected = rdd.partitionBy(4).glom().collect()
        got = [sorted((k, v) for k, (v, _) in rows) for _, _, rows in sorted(out)]
        print(json.dumps({
            "correct": got == [sorted(p) for p in expected],
            "writer_daemons": sorted({d for _, _, rows in out for _, (_, d) in rows}),
            "reader_daemons": sorted({d for _, d, _ in out}),
        }))
    finally:
        stop_directory(spark.sparkContext)
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
