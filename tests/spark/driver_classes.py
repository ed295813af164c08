"""``python tests/spark/driver_classes.py ARCHIVE``: the class-data-sharing archive the suite's Spark drivers map.

A test's Spark driver lives seconds and its start-up is mostly loading and verifying Spark's classes. One
small job run through ``spark-submit`` with ``-XX:ArchiveClassesAtExit`` leaves the classes it loaded from
Spark's class path as an archive (JDK 17's dynamic CDS); tests/conftest.py then starts every driver with
``-XX:SharedArchiveFile`` (``make test`` builds it; without it drivers start as before). The JVM checks the
archive against its own build and class path and silently ignores one that does not match (its CDS log is
off). A partial archive crashes the JVM that maps it, so the archive is written under another name and
renamed into place only after the JVM that wrote it has exited.

With ``--job`` this is the job itself (spark-submit runs it): a session configured as the tests' (see
tests/spark/spark_session.py), a DataFrame shuffle, Arrow, and a streaming query's first batch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DUMP_TIMEOUT_S = 600
SHARING_OPTIONS = ("-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off")
"""How a driver maps the archive; ``cds*=off``: a mismatched archive is ignored without a line on stdout."""


def driver_options(archive: Path) -> list[str]:
    """The JVM options that map ``archive``, or none when it is missing (or its path would split in
    ``SPARK_SUBMIT_OPTS``, which Spark's launcher splits on white space)."""
    if not archive.is_file() or any(c.isspace() for c in str(archive)):
        return []
    return [option.format(archive=archive) for option in SHARING_OPTIONS]


def job() -> None:
    from pyspark.sql import SparkSession, functions

    spark = (SparkSession.builder.appName("driver-classes").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.createDataFrame([(i % 3, f"row-{i}") for i in range(100)], "key int, value string")
    frame.groupBy("key").agg(functions.count("value")).repartition(2).collect()
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    frame.toPandas()
    query = (spark.readStream.format("rate").option("rowsPerSecond", 10).load()
             .writeStream.format("memory").queryName("driver_classes").start())
    query.processAllAvailable()
    query.stop()
    spark.stop()


def build(archive: Path) -> int:
    """Write ``archive`` (replacing any); a note and no archive when there is no JVM to dump one."""
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.part")
    archive.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "SPARK_SUBMIT_OPTS": f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial}"}
    try:
        done = subprocess.run([str(submit), "--master", "local[2]", __file__, "--job"], env=env,
                              capture_output=True, text=True, timeout=DUMP_TIMEOUT_S)
        if done.returncode != 0 or not partial.is_file():
            print(f"note: {archive} not built (Spark drivers start without it): {done.stderr[-2000:]}")
            return 0
        partial.rename(archive)
    except subprocess.TimeoutExpired:
        print(f"note: {archive} not built (Spark drivers start without it): the job ran past {DUMP_TIMEOUT_S} s")
    finally:
        partial.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--job"]:
        job()
    elif len(sys.argv) == 2:
        sys.exit(build(Path(sys.argv[1])))
    else:
        sys.exit(f"usage: {sys.argv[0]} ARCHIVE")
