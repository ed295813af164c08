"""The streaming shuffle on a real Spark standalone cluster (a master and two workers on loopback).

Tasks run in two executors (separate JVMs and Python daemons), so writer and reader tasks really
talk across processes through the coordinator in the driver.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.spark

SPARK_HOME = Path(__import__("pyspark").__file__).parent
HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, deadline: float, process: subprocess.Popen[bytes]) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"spark daemon exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port}")


@pytest.fixture(scope="module")
def standalone_master() -> Iterator[str]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("a standalone cluster needs a JDK (java on PATH or JAVA_HOME)")
    work = tempfile.mkdtemp(prefix="spark-standalone-")
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=work, SPARK_WORKER_DIR=work, PYSPARK_PYTHON=sys.executable)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    log = open(os.path.join(work, "daemons.log"), "wb")
    try:
        master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(free_port())],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        processes.append(master)
        wait_for_port(port, time.monotonic() + 60, master)
        url = f"spark://127.0.0.1:{port}"
        for _ in range(2):
            processes.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2",
                 "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", work],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        yield url
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def test_shuffle_across_two_executors(standalone_master: str) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent.parent), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(HERE / "standalone_job.py"), standalone_master], env=env,
                          capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    outcome = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert outcome["correct"] is True
    executors = set(outcome["writer_daemons"]) | set(outcome["reader_daemons"])
    assert len(executors) == 2, f"tasks ran in {len(executors)} executor(s), expected both: {outcome}"
