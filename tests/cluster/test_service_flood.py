"""The issue's flood on the cluster service: many connections each holding a large unfinished frame
spend the shared read budget, yet two real nodes' renewals are still read and neither leaves OK.

Before each connection kept its own share, the service paused every connection that sent once the
budget was spent, so the nodes' renewals went unread and both went PFAIL."""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

from conformance.cluster.harness import Recorder
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import read_message
from reference.cluster.config import open_backend
from reference.cluster.service import ClusterService, ServiceLimits
from spec.cluster import wire
from spec.cluster.detector import FailurePolicy
from spec.cluster.types import NodeId, NodeState

HANG_GUARD = 30.0
"""Only ends a broken run."""
POLICY = FailurePolicy(heartbeat_interval=0.05, fail_after=2.0)
"""Hoarders are closed as silent only after fail_bound (> 2 s), well after the renewals counted below."""
BUDGET = 4 * 1024 * 1024
HOARDERS = 24
RENEWALS = 5
"""Renewals each real node must get answered while the budget is spent."""


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + HANG_GUARD
    while not predicate():
        assert time.monotonic() < end, f"not within {HANG_GUARD} s: {what}"
        time.sleep(0.01)


def hoard(service: ClusterService, node: str) -> socket.socket:
    """A node that announces a full-size request and sends what TCP takes of it, never finishing."""
    sock = socket.create_connection((service.host, service.port), timeout=HANG_GUARD)
    sock.sendall(wire.encode(wire.ServiceKind.HELLO, 1, node_id=node, secret="", takeover="", resume=False,
                             resume_after=0))
    welcome = read_message(sock)
    assert welcome is not None and welcome.kind is wire.ServiceKind.WELCOME
    sock.sendall(wire.MAX_REQUEST_BYTES.to_bytes(4, "big"))
    sock.setblocking(False)
    return sock


def test_a_flood_of_unfinished_frames_stalls_only_its_own_connections_and_no_node_leaves_ok() -> None:
    cluster = InProcessCluster(POLICY)
    service = ClusterService(cluster, limits=ServiceLimits(max_buffered_bytes=BUDGET))
    observer = Recorder()
    watching = cluster.open_node(NodeId("observer"), observer)
    watching.join_cluster("observer:1")
    backend = open_backend(service.url)
    real = {name: Recorder() for name in ("node-a", "node-b")}
    nodes = [backend.open_node(NodeId(name), recorder) for name, recorder in real.items()]
    for node in nodes:
        node.join_cluster("h:1")
    hoarders = [hoard(service, f"hoarder{i}") for i in range(HOARDERS)]
    stop = threading.Event()

    def flood() -> None:
        chunk = bytes(256 * 1024)
        while not stop.is_set():
            for sock in hoarders:
                try:
                    sock.send(chunk)
                except (BlockingIOError, OSError):
                    pass  # paused by the service (TCP pushes back), or closed as silent
            time.sleep(0.001)

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        wait_until(lambda: service.held_bytes() > BUDGET, "the flood spending the read budget")
        counts = {name: len(recorder.heartbeats) for name, recorder in real.items()}
        wait_until(lambda: all(len(r.heartbeats) >= counts[n] + RENEWALS for n, r in real.items()),
                   f"{RENEWALS} more renewals of each real node answered during the flood")
    finally:
        stop.set()
        flooder.join(HANG_GUARD)
        for sock in hoarders:
            sock.close()
        for node in nodes:
            node.close()
        backend.close()
        watching.close()
        service.close()
        cluster.close()
    states = [info.state for _, snapshot in observer.snapshots for name, info in snapshot.nodes().items()
              if name in real]
    assert states and all(state is NodeState.OK for state in states)
