"""Partial evaluation of a streaming-shuffle result, from a script on local[4], as a user runs it.

``show``, ``take``, ``first`` and ``limit(n).collect()`` read some partitions and some rows. Each
must return rows of the right partition (those ``df.repartition`` / ``partitionBy`` put there),
end the writers of its run quietly (no ERROR line, no ``PeerTaskFailed`` in the driver's log), leave
no job, thread or socket behind, and leave the result whole for the next action. The writers get a
4 KiB memory budget, far below the data, so a run that waited for readers that never come would stall.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 900.0
"""Only ends a hung script (every action in it would otherwise wait for an hour); nothing here asserts on time."""

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, logging, os, re, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    logging.basicConfig(level=logging.INFO, format="LOG %(levelname)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark.sql import SparkSession
    from reference.spark import stop_directory, streaming_repartition, streaming_shuffle

    def result(name, value):
        print("RESULT " + json.dumps({"name": name, "value": value}), flush=True)

    def rows_of(partitions):
        return [sorted(list(map(list, p))) for p in partitions]

    def parent(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return -1

    def worker_sockets():
        \"\"\"TCP sockets of the Python workers (children of PySpark's daemon, a child of this driver's
        JVM): listening ones, and connections between two workers (the shuffle's; a worker's
        connection to the JVM has the JVM at its other end).\"\"\"
        owned = set()
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            daemon = parent(pid)
            if daemon > 0 and parent(parent(daemon)) == os.getpid():
                try:
                    for fd in os.listdir(f"/proc/{pid}/fd"):
                        match = re.fullmatch(r"socket:\\[(\\d+)\\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
                        if match:
                            owned.add(match.group(1))
                except OSError:
                    continue  # the worker ended meanwhile
        sockets = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[9] in owned:
                        sockets.append((fields[1], fields[2], fields[3]))
        ends = {local for local, _, _ in sockets}
        return {"listening": [local for local, _, state in sockets if state == "0A"],
                "between workers": [local for local, remote, state in sockets if state == "01" and remote in ends]}

    spark = (SparkSession.builder.master("local[4]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.shuffle.streaming.networkBufferSize", "1024")
             .config("spark.shuffle.streaming.writerMaxMemory", "4096").getOrCreate())
    sc = spark.sparkContext
    before = {t.ident for t in threading.enumerate()}

    df = spark.range(0, 20000, 1, 4).selectExpr("id", "id % 10 AS key")
    out = streaming_repartition(df, 2, "key")
    result("df expected", rows_of(df.repartition(2, "key").rdd.glom().collect()))
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        out.show(3)
    result("df show", [[int(c) for c in line.strip("|").split("|")] for line in shown.getvalue().splitlines()
                       if line.startswith("|") and "id" not in line])
    result("df take", [list(r) for r in out.take(5)])
    result("df first", list(out.first()))
    result("df limit", [list(r) for r in out.limit(3).collect()])
    result("df count", out.count())
    result("df partitions", rows_of(out.rdd.glom().collect()))

    pairs = sc.parallelize([(i % 10, i) for i in range(20000)], 4)
    shuffled = streaming_shuffle(pairs, 2)
    result("rdd expected", rows_of(pairs.partitionBy(2).glom().collect()))
    result("rdd take", [list(r) for r in shuffled.take(5)])
    result("rdd first", list(shuffled.first()))
    result("rdd partitions", rows_of(shuffled.glom().collect()))
    result("rdd take again", [list(r) for r in shuffled.take(5)])

    # partition 0 empty, 1 full, 2 with rows only at the end of the input: take's second job reads
    # 1 and 2 at once; reader 1 stops after 12 rows while reader 2 still waits for its rows
    sparse = sc.parallelize([(1, i) for i in range(29990)] + [(2, i) for i in range(29990, 30000)], 1)
    spread = streaming_shuffle(sparse, 3, lambda key: key)
    # reader 1 may leave before the exchange task of partition 2 registers its (empty) writer: that
    # writer must not wait for it (a run ends once its readers are all done), so take it a few times
    result("rdd take across partitions", [[list(r) for r in spread.take(12)] for _ in range(4)])
    result("rdd spread sizes", spread.glom().map(len).collect())
    result("rdd take from the last partition", [list(r) for r in spread.filter(lambda kv: kv[0] == 2).take(3)])

    deadline = time.monotonic() + 120  # the last run's writers end within a poll of their reading job
    while (sc.statusTracker().getActiveJobsIds() or any(t.name.startswith("shuffle-") for t in threading.enumerate())
           or any(worker_sockets().values())) and time.monotonic() < deadline:
        time.sleep(0.05)
    result("active jobs", list(sc.statusTracker().getActiveJobsIds()))
    result("shuffle threads", sorted(t.name for t in threading.enumerate() if t.name.startswith("shuffle-")))
    result("worker sockets", worker_sockets())
    stop_directory(sc)
    result("threads left", sorted(t.name for t in threading.enumerate() if t.ident not in before))
    spark.stop()
""")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The script's results by name, and its stderr (the driver's log, with the workers' stderr)."""
    script = tmp_path_factory.mktemp("partial") / "job.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([sys.executable, str(script), str(REPO)], cwd=script.parent, env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, Any] = {"stderr": done.stderr}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            item = json.loads(line[len("RESULT "):])
            results[item["name"]] = item["value"]
    return results


def rows_within(rows: list[list[int]], partition: list[list[int]], count: int) -> bool:
    """``count`` distinct rows, all from ``partition`` (which rows a partial read takes is not defined:
    a reader interleaves its writers' streams as they arrive)."""
    return len(rows) == count and len({tuple(r) for r in rows}) == count and all(r in partition for r in rows)


@pytest.mark.parametrize("action,count", [("df show", 3), ("df take", 5), ("df limit", 3)])
def test_a_partial_read_of_a_dataframe_returns_rows_of_the_first_partition(run: dict[str, Any], action: str,
                                                                           count: int) -> None:
    assert rows_within(run[action], run["df expected"][0], count)


def test_first_of_a_dataframe_and_of_an_rdd_is_a_row_of_the_first_partition(run: dict[str, Any]) -> None:
    assert run["df first"] in run["df expected"][0]
    assert run["rdd first"] in run["rdd expected"][0]


def test_take_of_an_rdd_returns_pairs_of_the_first_partition(run: dict[str, Any]) -> None:
    assert rows_within(run["rdd take"], run["rdd expected"][0], 5)
    assert rows_within(run["rdd take again"], run["rdd expected"][0], 5)


def test_readers_of_one_job_that_stop_at_different_times_each_get_their_rows(run: dict[str, Any]) -> None:
    """One writer keeps each partition in input order, so these rows are exactly defined."""
    assert run["rdd take across partitions"] == [[[1, i] for i in range(12)]] * 4
    assert run["rdd take from the last partition"] == [[2, i] for i in range(29990, 29993)]
    assert run["rdd spread sizes"] == [0, 29990, 10]


def test_the_result_is_whole_for_the_actions_after_partial_reads(run: dict[str, Any]) -> None:
    assert run["df count"] == 20000
    assert run["df partitions"] == run["df expected"]
    assert run["rdd partitions"] == run["rdd expected"]


def test_partial_reads_log_no_error(run: dict[str, Any]) -> None:
    """No ERROR line and no traceback: PySpark's own daemon prints a BrokenPipeError traceback whenever the JVM
    stops reading a worker's output early (``df.mapInArrow(f).show()`` does it without any
    shuffle); the daemon this package runs on a local master (reference/spark_daemon.py) does not."""
    log = run["stderr"]
    assert "PeerTaskFailed" not in log and "PEER_TASK_FAILED" not in log
    assert not [line for line in log.splitlines() if " ERROR " in line or line.startswith("LOG ERROR")]
    assert "Traceback" not in log and "BrokenPipeError" not in log and "exited unexpectedly" not in log, log[-3000:]


def test_nothing_is_left_running(run: dict[str, Any]) -> None:
    assert run["active jobs"] == []
    assert run["shuffle threads"] == []
    assert run["worker sockets"] == {"listening": [], "between workers": []}
    assert run["threads left"] == []
