"""The monitor watching Spark 4.3.0's real-time mode on loopback: its own StreamingShuffleWriter/Reader
carry a few hundred rows through ``repartition`` (as ``benchmarks rtm`` runs it), and the monitor must
see every connection, decode every frame, count in DATA the rows delivered, and find no violation, also
once its map task ids no longer equal the partition ids (docs/spec/shuffle.md#channel-ids).

The session's servers listen on a loopback address of this run's own, and the monitor watches only
that address: nothing else on the machine is captured. Needs root (a raw socket).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Callable

import pytest

from conformance.shuffle.monitor import LiveMonitor, connection_filter

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (a raw AF_PACKET socket)")

ROWS = 300
WRITERS = READERS = 2
"""benchmarks/rtm.py's query: 2 source partitions (writers) repartitioned into 2 (readers)."""
BATCH = "5 seconds"
"""Real-time mode's shortest batch: when it ends, every writer terminates and every reader acks."""
PATIENCE_S = 120.0
HOST = f"127.91.{os.getpid() % 250 + 1}.{os.getpid() // 250 % 250 + 1}"
ROOT = Path(__file__).resolve().parents[2]


def run_query(host: str, rows: int) -> None:
    """The Spark side, in a process of its own: the arrival sink must be on the driver's class path when its
    JVM starts, and a pytest process may already have started one for another module."""
    from benchmarks.rtm import SparkRealTime, now_us, start_spark

    spark = start_spark(host)
    with tempfile.TemporaryDirectory(prefix="streamwire-monitor-rtm-") as work:
        query = SparkRealTime(spark, work, BATCH, shuffle=True)
        try:
            query.offer(0, rows, now_us())
            _wait(lambda: query.arrived() >= rows)
            print(f"arrived {query.arrived()}", flush=True)
            sys.stdin.readline()  # the monitor saw the batch that carried the rows end
        finally:
            query.stop()
            spark.stop()


def _wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def _read_line(stream: IO[str]) -> str:
    ready, _, _ = select.select([stream], [], [], PATIENCE_S)
    return stream.readline() if ready else ""


def _tail(path: Path, lines: int = 40) -> str:
    """The end of the query process's stderr, for an assertion's message."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def test_the_monitor_sees_every_frame_of_real_time_mode_with_no_violation(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    child: subprocess.Popen[str] | None = None
    stderr = tmp_path / "query.stderr"
    errors = stderr.open("w")
    try:
        with LiveMonitor("lo", connection_filter("", f"host {HOST}"), pcap=tmp_path / "rtm.pcap") as monitor:
            child = subprocess.Popen([sys.executable, __file__, HOST, str(ROWS)], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
            assert child.stdout is not None
            line = _read_line(child.stdout)
            assert line.startswith("arrived "), f"the Spark query did not report its rows:\n{_tail(stderr)}"
            delivered = int(line.split()[1])
            # the batch that carried the rows ends: every connection of it terminates and closes
            _wait(lambda: sum(c.records for c in monitor.ended) >= delivered)
        assert child.stdin is not None
        child.stdin.write("stop\n")
        child.stdin.flush()
        assert child.wait(PATIENCE_S) == 0, f"the Spark query's process failed:\n{_tail(stderr)}"
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        errors.close()
    report = monitor.report
    summaries = [c.summary() for c in report.connections]
    assert monitor.stats.dropped == 0, "the kernel dropped packets of the watched connections"
    assert delivered == ROWS
    assert sum(c.records for c in report.connections) == delivered, summaries
    ended = monitor.ended
    assert len(ended) >= WRITERS * READERS and {c.reader_id for c in ended} == set(range(READERS)), summaries
    for connection in report.connections:
        assert connection.status.value in ("clean", "violation", "open at end of capture"), summaries
        # A handshake CREDIT naming the writer by its map task id, which differs from the partition id the
        # writer names itself by in every batch but an application's first, is what Spark does
        # (docs/spec/shuffle.md#channel-ids): no violation.
        assert connection.violations == [], summaries
    for connection in ended:
        if not connection.violations:
            assert connection.frames["CREDIT_CONTROL"] == connection.frames["DATA"] + 1, summaries
            assert connection.frames["TERMINATION_CONTROL"] == connection.frames["TERMINATION_ACK"] == 1, summaries
    assert (tmp_path / "rtm.pcap").stat().st_size > 0


if __name__ == "__main__":
    run_query(sys.argv[1], int(sys.argv[2]))
