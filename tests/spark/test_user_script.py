"""A data engineer's script outside the repository, on local[2], with no PYSPARK_PYTHON set.

The script finds the package as a checkout user would (its own ``sys.path``); the Python workers
must find it and its dependencies without help, two partitions must fit the two slots (each task
writes and reads), and the partitions must be ``df.repartition``'s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 900.0

SCRIPT = textwrap.dedent("""
    import logging, sys, threading
    sys.path.insert(0, sys.argv[1])
    logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("reference.cluster").setLevel(logging.WARNING)
    from pyspark.sql import SparkSession
    from reference.spark import stop_directory, streaming_repartition

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    before = {t.ident for t in threading.enumerate()}
    df = spark.range(0, 5000, 1, 4).selectExpr("id", "id % 7 AS key")
    out = streaming_repartition(df, 2, "key")  # 2 partitions, 2 slots: each task writes and reads
    print("PARTITIONS", out.rdd.getNumPartitions())
    def partitions(frame):
        return frame.rdd.glom().map(lambda rows: sorted(tuple(r) for r in rows)).collect()
    print("SAME", partitions(out) == partitions(df.repartition(2, "key")))
    stop_directory(spark.sparkContext)
    print("THREADS LEFT", sorted(t.name for t in threading.enumerate() if t.ident not in before))
    spark.stop()
""")


def test_a_script_outside_the_repo_repartitions_on_local_2(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = "/usr/bin:/bin"  # python3 on the PATH is not the one with the package
    done = subprocess.run([sys.executable, str(script), str(REPO)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    assert "PARTITIONS 2" in lines
    assert "SAME True" in lines
    assert "THREADS LEFT []" in lines
    assert "LOG reference.spark.shuffle streaming shuffle 0: input coalesced from 4 partitions into 2 exchange " \
           "tasks on 2 task slots" in lines
    assert any(line.startswith("LOG reference.spark.workers Python workers of local[2] use the driver's "
                               "interpreter") for line in lines)
