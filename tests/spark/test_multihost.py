"""The streaming shuffle across real hosts, then a worker's link goes down mid-stream; and the drill.

Each of the Spark master (with the driver), two workers and etcd runs in its own network namespace
(tests/spark/netlab.py), so every address a task advertises is used from another host's stack, and
taking a worker's link down cuts it off as a crashed switch port would: no FIN, no RST, its sockets
stay open on both sides. Only the cluster provider's FAIL can end the job then, and it must, with
the writer-node-failed root cause, within the provider's declared bound. Everything the run started
lives in the lab's namespaces, which are emptied and deleted whatever happens.

Run as a script, this file is the drill: the same lab, the CDC pipeline across it first
(``python -m reference.pipeline --master spark://... --provider etcd://... --host ...``), then the
same shuffle and cut, with the figures printed (about 2 more minutes, so not part of the suite).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Iterator

import netlab
import pytest

from conformance.cluster.etcd_server import etcd_binary
from reference.shuffle.task import FAILURE_POLL_S

pytestmark = [pytest.mark.spark, pytest.mark.etcd]

SPARK_HOME = Path(__import__("pyspark").__file__).parent
HERE = Path(__file__).parent
REPO = HERE.parent.parent
HOSTS = ("master", "worker1", "worker2", "etcd")
WORKERS = ("worker1", "worker2")
MASTER_PORT, ETCD_PORT = 7077, 2379
"""Fixed: every lab is a network of its own."""
JOB_TIMEOUT_S = 240.0
"""Only ends a hung run."""
PROPAGATION_S = 5.0
"""Allowance, beyond the provider's bound and one task poll, for the FAIL to reach a task through
etcd's watch and for its report to come back the same way (a loaded machine delays both)."""
SPARK_REACTION_S = 30.0
"""Allowance, after the root cause is recorded, for Spark to fail the job: the failed reader's
status update (the job runs with spark.task.maxFailures=1, see docs/shuffle-runtime.md). A liveness
bound, generous for a loaded machine: without the provider's FAIL the job would wait for TCP's
retransmission timeout (about 15 minutes) or for writerConnectionTimeout (1 hour)."""


@pytest.fixture(scope="module")
def lab() -> Iterator[netlab.NetLab]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("a standalone cluster needs a JDK (java on PATH or JAVA_HOME)")
    if etcd_binary() is None:
        pytest.skip("etcd binary not on PATH (Debian package etcd-server; .ci/run installs it)")
    reason = netlab.unavailable()
    if reason is not None:
        pytest.skip(f"multi-host test needs network namespaces: {reason}")
    work = Path(tempfile.mkdtemp(prefix="spark-multihost-"))
    log = open(work / "daemons.log", "wb")
    try:
        with netlab.NetLab(HOSTS) as hosts:
            start_daemons(hosts, work, log)
            yield hosts
        assert hosts.namespaces_left() == []
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def host_env(lab: netlab.NetLab, host: str, work: Path) -> dict[str, str]:
    return dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP=lab.hosts[host].address,
                SPARK_LOG_DIR=str(work), SPARK_WORKER_DIR=str(work), PYSPARK_PYTHON=sys.executable,
                PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))


def start_daemons(lab: netlab.NetLab, work: Path, log: IO[bytes]) -> None:
    """etcd, the master and two workers; each waits for what it needs by itself."""
    etcd = f"http://{lab.hosts['etcd'].address}"
    lab.start("etcd", [str(etcd_binary()), "--name", "lab", "--data-dir", str(work / "etcd"),
                       "--listen-client-urls", f"{etcd}:{ETCD_PORT}", "--advertise-client-urls", f"{etcd}:{ETCD_PORT}",
                       "--listen-peer-urls", f"{etcd}:2380", "--initial-advertise-peer-urls", f"{etcd}:2380",
                       "--initial-cluster", f"lab={etcd}:2380", "--heartbeat-interval", "10",
                       "--election-timeout", "100"], os.environ, log)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master = lab.hosts["master"].address
    lab.start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", master,
                         "--port", str(MASTER_PORT), "--webui-port", "8080"], host_env(lab, "master", work), log)
    for worker in ("worker1", "worker2"):
        lab.start(worker, [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://{master}:{MASTER_PORT}",
                           "--host", lab.hosts[worker].address, "--cores", "2", "--memory", "1g",
                           "--webui-port", "8081", "--work-dir", str(work / worker)],
                  host_env(lab, worker, work), log)


def run_pipeline(lab: netlab.NetLab) -> str:
    """``python -m reference.pipeline`` on the master's host against the workers and etcd; its last line."""
    env = host_env(lab, "master", Path(tempfile.gettempdir()))
    done = lab.run("master", [sys.executable, "-m", "reference.pipeline", "--master", master_url(lab),
                              "--provider", f"{etcd_url(lab)}/pipeline", "--host", lab.hosts["master"].address,
                              "--changes", "1000", "--keys", "200"], env, JOB_TIMEOUT_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout.splitlines()[-1]


def master_url(lab: netlab.NetLab) -> str:
    return f"spark://{lab.hosts['master'].address}:{MASTER_PORT}"


def etcd_url(lab: netlab.NetLab) -> str:
    return f"etcd://{lab.hosts['etcd'].address}:{ETCD_PORT}"


def shuffle_then_cut_a_worker(lab: netlab.NetLab) -> tuple[dict[str, Any], dict[str, Any], str, float]:
    """Run multihost_job.py; when it streams, take down the link of the worker hosting no reader.

    Returns the job's outcome, where the tasks ran, the worker cut off, and when (monotonic)."""
    work = Path(tempfile.mkdtemp(prefix="multihost-driver-"))
    try:
        with open(work / "driver.log", "wb") as log:
            driver = subprocess.Popen(["ip", "netns", "exec", lab.hosts["master"].namespace, sys.executable,
                                       str(HERE / "multihost_job.py"), master_url(lab), f"{etcd_url(lab)}/shuffle"],
                                      env=host_env(lab, "master", work), stdout=subprocess.PIPE, stderr=log, text=True)
            try:
                assert driver.stdout is not None
                streaming = driver.stdout.readline()
                assert streaming.startswith("STREAMING "), (streaming, (work / "driver.log").read_text()[-4000:])
                placement = json.loads(streaming.split(" ", 1)[1])
                doomed = next(h for h in WORKERS if lab.hosts[h].address not in placement["reader_hosts"])
                lab.link_down(doomed)
                down_at = time.monotonic()
                out, _ = driver.communicate(timeout=JOB_TIMEOUT_S)
            finally:
                if driver.poll() is None:
                    driver.kill()
                    driver.wait()
        assert driver.returncode == 0, (work / "driver.log").read_text()[-4000:]
        return json.loads(out.strip().splitlines()[-1]), placement, doomed, down_at
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_shuffle_across_hosts_then_a_lost_worker_fails_the_job_with_the_writer_node_failed(lab: netlab.NetLab) -> None:
    outcome, placement, doomed, down_at = shuffle_then_cut_a_worker(lab)

    assert outcome["correct"] is True
    assert outcome["reader_hosts"] == sorted(lab.hosts[w].address for w in WORKERS)  # both hosts served
    error = outcome["drill_error"]
    assert "STREAMING_SHUFFLE_WRITER_NODE_FAILED" in error, error[-3000:]
    lost = [node for node, host in placement["writers"].items() if host == lab.hosts[doomed].address]
    assert lost and any(node in error for node in lost), (lost, error[-3000:])  # a writer of the worker cut off
    detected = outcome["root_cause_at"] - down_at
    failed = outcome["drill_failed_at"] - down_at
    print(f"after {doomed}'s link went down: root cause recorded in {detected:.2f} s, job failed in {failed:.2f} s; "
          f"provider's bound {outcome['fail_bound']} s")
    assert detected < outcome["fail_bound"] + FAILURE_POLL_S + PROPAGATION_S
    assert failed < detected + SPARK_REACTION_S
    assert outcome["leftover_threads"] == []


def drill() -> None:
    """``python tests/spark/test_multihost.py``: the same run with the pipeline first, figures printed."""
    reason = netlab.unavailable()
    if reason is not None:
        sys.exit(f"multi-host drill needs network namespaces: {reason}")
    work = Path(tempfile.mkdtemp(prefix="spark-multihost-"))
    try:
        with open(work / "daemons.log", "wb") as log, netlab.NetLab(HOSTS) as hosts:
            start_daemons(hosts, work, log)
            started = time.monotonic()
            print(f"pipeline across hosts: {run_pipeline(hosts)} ({time.monotonic() - started:.1f} s)", flush=True)
            outcome, placement, doomed, down_at = shuffle_then_cut_a_worker(hosts)
            print(json.dumps({"placement": placement, "cut_off": doomed, **outcome,
                              "root_cause_after_s": round(outcome["root_cause_at"] - down_at, 2),
                              "failed_after_s": round(outcome["drill_failed_at"] - down_at, 2)}, indent=1))
        print(f"namespaces left: {hosts.namespaces_left()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    drill()
