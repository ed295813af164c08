"""Churn: newcomers joining while members renew must not turn the renewing members PFAIL or FAIL.

The reproduction is a stalled poller, not load: every JoinCluster commit holds the service's
polling thread for ``STALL_PER_JOIN`` (as the fan-out and snapshot work of a large cluster did), and
a burst of newcomers joins at once, so one round of the poller lasts longer than ``fail_bound``
while the renewing members' RENEWs wait unread in their sockets. Only silence the service could
observe may count: the renewing members stay OK, their sessions stay open, every RENEW is answered.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Iterator

import pytest

from conformance.cluster.harness import Recorder
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import read_message
from reference.cluster.service import ClusterService
from spec.cluster import wire
from spec.cluster.detector import FailurePolicy
from spec.cluster.model import JoinCluster, Operation
from spec.cluster.types import NodeId, NodeState, Revision

POLICY = FailurePolicy(heartbeat_interval=0.1, fail_after=1.0)
"""PFAIL after 0.5 s, sessions silent for 1.1 s closed: a renewal every 0.1 s leaves 0.4 s of slack."""
NEWCOMERS = 8
STALL_PER_JOIN = 0.3
"""At least seven joins share one round (they arrive while the first stalls): 2.1 s > fail_bound."""
RENEWERS = 4
HANG_GUARD = 20.0


class StallingCluster(InProcessCluster):
    """Each JoinCluster holds its caller (the service's poller) for ``STALL_PER_JOIN`` first."""

    def commit(self, operation: Operation, *, fan_out_here: bool = True) -> Revision:
        if isinstance(operation, JoinCluster) and operation.node_id.startswith("newcomer"):
            time.sleep(STALL_PER_JOIN)
        return super().commit(operation, fan_out_here=fan_out_here)


@pytest.fixture
def service() -> Iterator[ClusterService]:
    cluster = StallingCluster(POLICY)
    service = ClusterService(cluster)
    yield service
    service.close()
    cluster.close()


def reply(sock: socket.socket) -> wire.ServiceKind:
    """The kind of the next reply on ``sock``, past the events (request id 0) before it."""
    while (message := read_message(sock)) is not None:
        if message.request_id:
            return message.kind
    raise AssertionError("the service closed the session")


def session(service: ClusterService, node: str) -> socket.socket:
    """A raw node session that said HELLO and joined."""
    sock = socket.create_connection((service.host, service.port), timeout=HANG_GUARD)
    sock.sendall(wire.encode(wire.ServiceKind.HELLO, 1, node_id=node, secret="", takeover="", resume=False,
                             resume_after=0))
    assert reply(sock) is wire.ServiceKind.WELCOME
    if not node.startswith("newcomer"):
        sock.sendall(wire.encode(wire.ServiceKind.JOIN_CLUSTER, 2, address=f"{node}:1"))
        assert reply(sock) is wire.ServiceKind.SHARD
    return sock


def replies(sock: socket.socket, kind: wire.ServiceKind) -> int:
    """How many ``kind`` replies arrive until the service has answered everything sent on ``sock``
    (up to a last RENEW as a marker) or closed it."""
    sock.settimeout(HANG_GUARD)
    sock.sendall(wire.encode(wire.ServiceKind.RENEW, 99))
    count = 0
    while (message := read_message(sock)) is not None and message.request_id != 99:
        count += message.kind is kind
    return count


def test_renewing_members_stay_ok_while_newcomers_join_on_a_stalled_poller(service: ClusterService) -> None:
    watcher_core = Recorder()
    watcher = service.cluster.open_node(NodeId("watcher"), watcher_core)  # renews in-process, not via the poller
    watcher.join_cluster("watcher:1")
    renewers = {f"renewer-{i}": session(service, f"renewer-{i}") for i in range(RENEWERS)}
    newcomers = [session(service, f"newcomer-{i}") for i in range(NEWCOMERS)]
    sent = 0
    stop = threading.Event()

    def renew() -> None:
        nonlocal sent
        while not stop.is_set():
            for sock in renewers.values():
                sock.sendall(wire.encode(wire.ServiceKind.RENEW, 3))
            sent += 1
            stop.wait(POLICY.heartbeat_interval)

    renewing = threading.Thread(target=renew)
    renewing.start()
    try:
        for i, sock in enumerate(newcomers):
            sock.sendall(wire.encode(wire.ServiceKind.JOIN_CLUSTER, 2, address=f"newcomer-{i}:1"))
        for sock in newcomers:
            assert reply(sock) is wire.ServiceKind.SHARD
        time.sleep(2 * POLICY.heartbeat_interval)  # renewals after the burst are read and answered too
    finally:
        stop.set()
        renewing.join(HANG_GUARD)
    for node, sock in renewers.items():
        assert replies(sock, wire.ServiceKind.RENEWED) == sent, f"{node}'s session was cut or a RENEW unanswered"
        sock.close()
    for sock in newcomers:
        sock.close()
    judged = [(node, info.state) for _, snapshot in watcher_core.snapshots
              for infos in snapshot.shards.values() for info in infos if info.node_id in renewers]
    assert judged and all(state is NodeState.OK for _, state in judged), \
        f"renewing members judged on silence the service did not read: {sorted(set(judged) - {(n, NodeState.OK) for n in renewers})}"
    watcher.close()
