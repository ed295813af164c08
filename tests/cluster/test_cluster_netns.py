"""A link that goes down and up again (no FIN, no RST: packets just stop) under a remote node in a
network namespace: it reports cluster_down, reconnects, and misses no notification.

Needs root and ``ip netns``; skipped with the reason otherwise. The namespace and veth pair use an
address from 198.18.0.0/15 (benchmarking range) and are always removed.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, Iterator

import pytest

from conformance.cluster.harness import Recorder
from reference.cluster.memory import InProcessCluster
from reference.cluster.service import ClusterService
from spec.cluster.types import MetadataOp, NodeId

HANG_GUARD = 60.0
REPO = Path(__file__).resolve().parents[2]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


class Link:
    """A namespace joined to this one by a veth pair: host side ``host_ip``, namespace side."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}"
        self.namespace, self.host_side, self.peer_side = f"swc{tag}", f"swh{tag}", f"swp{tag}"
        subnet = os.getpid() % 16384 * 4  # a /30 of 198.18.0.0/15
        base = f"198.{18 + subnet // 65536}.{subnet // 256 % 256}"
        self.host_ip, self.peer_ip = f"{base}.{subnet % 256 + 1}", f"{base}.{subnet % 256 + 2}"

    def create(self) -> None:
        ip("netns", "add", self.namespace)
        ip("link", "add", self.host_side, "type", "veth", "peer", "name", self.peer_side)
        ip("link", "set", self.peer_side, "netns", self.namespace)
        ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_side)
        ip("link", "set", self.host_side, "up")
        ip("-n", self.namespace, "addr", "add", f"{self.peer_ip}/30", "dev", self.peer_side)
        ip("-n", self.namespace, "link", "set", self.peer_side, "up")
        ip("-n", self.namespace, "link", "set", "lo", "up")

    def set(self, state: str) -> None:
        ip("link", "set", self.host_side, state)

    def remove(self) -> None:
        for args in (("netns", "del", self.namespace), ("link", "del", self.host_side)):
            subprocess.run(["ip", *args], capture_output=True, timeout=30)  # absent is fine


@pytest.fixture
def link() -> Iterator[Link]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (`ip netns`) to create a network namespace")
    link = Link()
    try:
        link.create()
    except subprocess.CalledProcessError as exc:
        link.remove()
        pytest.skip(f"cannot create a network namespace here: {exc.stderr.strip()}")
    try:
        yield link
    finally:
        link.remove()


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            out.put(line.strip())

    threading.Thread(target=pump, daemon=True).start()
    return out


def next_line(lines: queue.Queue[str]) -> str:
    try:
        return lines.get(timeout=HANG_GUARD)
    except queue.Empty:
        raise AssertionError(f"the watcher said nothing for {HANG_GUARD} s") from None


OUTAGE_S = 6.0
"""The outage: past the remote client's request patience (5 s) and the service's bound (1.2 s)."""


def test_link_down_and_up_loses_no_notification(link: Link) -> None:
    cluster = InProcessCluster()
    service = ClusterService(cluster, host="0.0.0.0")
    writer = cluster.open_node(NodeId("writer"), Recorder())
    shard = writer.join_cluster("writer:1")
    watcher = subprocess.Popen(
        ["ip", "netns", "exec", link.namespace, sys.executable, str(Path(__file__).with_name("netns_watcher.py")),
         f"tcp://{link.host_ip}:{service.port}", "watcher", shard],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert watcher.stdout is not None and watcher.stdin is not None
    lines = lines_of(watcher.stdout)
    committed: dict[str, int] = {}
    try:
        assert next_line(lines) == "ready"

        def write(first: int, count: int) -> None:
            for i in range(first, first + count):
                ops = [MetadataOp(key=f"b{i:03}/x", value=b"x"), MetadataOp(key=f"b{i:03}/y", value=b"y")]
                committed[f"b{i:03}"] = writer.update_shard_log(ops)
                time.sleep(0.01)

        write(0, 30)
        link.set("down")
        write(30, 150)
        time.sleep(OUTAGE_S)  # longer than the client's request patience, so it must reconnect
        link.set("up")
        write(180, 30)

        batches: list[list[list[object]]] = []
        while not any(k == "b209/y" for batch in batches for k, _ in batch):
            batches.append(json.loads(next_line(lines)))
        watcher.stdin.close()
        summary = json.loads(next_line(lines))
        watcher.wait(HANG_GUARD)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(HANG_GUARD)
        service.close()
        cluster.close()

    seen = Counter(str(k) for batch in batches for k, _ in batch)
    assert {k: n for k, n in seen.items() if n > 1} == {}, "an entry was notified twice"
    by_key = {str(k): (r, index) for index, batch in enumerate(batches) for k, r in batch}
    for name, revision in committed.items():
        x, y = by_key.get(f"{name}/x"), by_key.get(f"{name}/y")
        assert x is not None and y is not None, f"batch {name} was lost"
        assert x == y and x[0] == revision, f"batch {name} was not one notification at its revision"
    assert summary["downs"] >= 1, "no cluster_down while the link was down"
    assert summary["reconnects"] >= 1
