"""``streamwire monitor --pid``: the connections of a process tree, found through /proc, watched live;
Ctrl-C (SIGINT) ends the capture and writes the reports; the process's exit ends it too. The process
here is a child holding a scripted streaming-shuffle conversation with itself on loopback; another
process's connection beside it is not watched. Live capture needs root (a raw AF_PACKET socket)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from conformance.proc_sockets import ProcessConnections, ProcessGone, process_tree

ROOT = Path(__file__).resolve().parents[2]
PATIENCE_S = 30.0

CONVERSATION = r"""
import socket, sys
from spec.shuffle import encode_frame
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.records import encode_records
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
sys.stdin.readline()
reader = socket.create_connection(server.getsockname())
writer, _ = server.accept()
payload = encode_records([b"a", b"bc"])
reader.sendall(encode_frame(CreditMessage(writer_id=4, reader_id=1)))
writer.recv(64)
writer.sendall(encode_frame(DataMessage(seq=0, writer_id=0, reader_id=1, checksum=payload_checksum(payload),
                                        payload=payload)))
reader.recv(64)
reader.sendall(encode_frame(CreditMessage(writer_id=0, reader_id=1)))
writer.recv(64)
writer.sendall(encode_frame(TerminationControlMessage(seq=1, writer_id=0, reader_id=1)))
reader.recv(64)
reader.sendall(encode_frame(TerminationAckMessage(seq=1, writer_id=0, reader_id=1)))
writer.recv(64)
writer.close(); reader.close()
print("done", flush=True)
sys.stdin.readline()
"""


def _line(stream: IO[str]) -> str:
    ready, _, _ = select.select([stream], [], [], PATIENCE_S)
    return stream.readline() if ready else ""


def test_the_process_tree_and_its_sockets_are_found_through_proc() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE)
        try:
            assert {os.getpid(), child.pid} <= process_tree(os.getpid())
            mine = ProcessConnections(os.getpid(), interval_s=None)
            assert mine.matches(("127.0.0.1", 50000), ("127.0.0.1", port), 0.0)
            assert not mine.matches(("127.0.0.1", 50000), ("127.0.0.1", 9), 0.0)
            with socket.create_server(("127.0.0.1", 0)) as later:  # opened after the last reading
                assert mine.matches(("127.0.0.1", 50000), later.getsockname(), time.time())
        finally:
            child.communicate(b"\n", timeout=PATIENCE_S)
    with pytest.raises(ProcessGone):
        ProcessConnections(child.pid, interval_s=None)


@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (a raw AF_PACKET socket)")
@pytest.mark.parametrize("ending", ["sigint", "process-exit"])
def test_monitor_pid_watches_only_that_process_and_writes_the_reports_when_it_ends(tmp_path: Path,
                                                                                     ending: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    job = subprocess.Popen([sys.executable, "-c", CONVERSATION], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env=env)
    monitor: subprocess.Popen[str] | None = None
    try:
        assert job.stdin is not None and job.stdout is not None
        _line(job.stdout)  # listening
        monitor = subprocess.Popen([sys.executable, "-m", "streamwire", "monitor", "-i", "lo", "--pid", str(job.pid),
                                    "--json-report", str(tmp_path / "report.json")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        assert monitor.stderr is not None
        assert "capturing on lo" in _line(monitor.stderr)
        with socket.create_server(("127.0.0.1", 0)) as other:  # another process's connection: not watched
            with socket.create_connection(other.getsockname()) as stranger:
                stranger.sendall(b"\0\0\0\0\0\0\0\x0f\x09\0\0\0\x02\0\0\0\x02")
        job.stdin.write("go\n")
        job.stdin.flush()
        assert _line(job.stdout) == "done\n"
        if ending == "sigint":
            monitor.send_signal(signal.SIGINT)
        else:
            job.stdin.write("exit\n")
            job.stdin.flush()
        out, err = monitor.communicate(timeout=PATIENCE_S)
    finally:
        for process in (job, monitor):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert monitor.returncode == 0, out + err
    assert "1 connection(s), 0 violation(s)" in out, out + err
    report = json.loads((tmp_path / "report.json").read_text())
    [connection] = report["connections"]
    assert (connection["status"], connection["writer_id"], connection["partition_id"], connection["records"]) == (
        "clean", 4, 0, 2)
    assert "1 connection(s), 0 violation(s)" in out
