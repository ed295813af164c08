"""etcd-specific behaviour the suite cannot provoke: a lost lease, and backend selection."""

from __future__ import annotations

import time


import pytest

from conformance.cluster_harness import Recorder
from conformance.framework import CaseContext, RunOptions
from reference.cluster.config import open_backend
from reference.cluster.etcd import EtcdCluster
from reference.cluster.etcd_server import EtcdServer
from reference.cluster.memory import InProcessCluster
from spec.cluster.types import NodeId, NodeState


def context() -> CaseContext:
    return CaseContext(options=RunOptions(suite="cluster", target="etcd"), deadline=time.monotonic() + 20)


@pytest.mark.etcd
def test_lost_lease_reports_cluster_down_then_node_is_ok_again(etcd_server: EtcdServer) -> None:
    cluster = EtcdCluster(etcd_server.url, "lease-loss")
    try:
        core, watcher_core = Recorder(), Recorder()
        node = cluster.open_node(NodeId("a"), core)
        watcher = cluster.open_node(NodeId("w"), watcher_core)
        node.join_cluster("h:1")
        watcher.join_cluster("h:2")
        lease = node._ensure_lease()
        cluster.gateway.lease_revoke(lease)  # as if the lease had expired during a long pause
        ctx = context()
        core.wait(ctx, "cluster_down", lambda: bool(core.downs))
        watcher_core.wait(ctx, "a FAIL", lambda: any(
            (i := snap.nodes().get(NodeId("a"))) is not None and i.state is NodeState.FAIL
            for _, snap in watcher_core.snapshots))
        watcher_core.wait(ctx, "a OK again", lambda: watcher_core.state_of(NodeId("a")) is NodeState.OK)
    finally:
        cluster.close()


@pytest.mark.etcd
def test_backend_selected_by_setting(etcd_server: EtcdServer) -> None:
    backend = open_backend(f"etcd://127.0.0.1:{etcd_server.client_port}/selected")
    try:
        assert isinstance(backend, EtcdCluster) and backend.prefix == "/selected/"
    finally:
        backend.close()
    memory = open_backend()
    assert isinstance(memory, InProcessCluster)
    memory.close()
    with pytest.raises(ValueError):
        open_backend("zookeeper://x")
