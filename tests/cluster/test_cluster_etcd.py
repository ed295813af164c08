"""etcd-specific behaviour the suite cannot provoke: a lost lease, and backend selection."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from conformance.cluster.harness import TARGET_HELP, Recorder
from conformance.framework import CaseContext, RunOptions
from reference.cluster.config import PROVIDER_SYNTAX, ProviderKind, open_backend, provider_kind
from reference.cluster.etcd import EtcdCluster
from reference.cluster.etcd_gateway import EtcdEndpoint
from conformance.cluster.etcd_server import EtcdServer, EtcdUser, make_test_pki
from reference.cluster.memory import InProcessCluster
from spec.cluster.errors import ClusterFull, NodeIdInUse, ProviderUnavailable, Unauthenticated
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
def test_a_full_cluster_refuses_a_new_node_and_keeps_its_members(etcd_server: EtcdServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_MEMBERS (16,384) lowered to 1 so that the test joins two nodes, not thousands."""
    monkeypatch.setattr("reference.cluster.etcd.MAX_MEMBERS", 1)
    cluster = EtcdCluster(etcd_server.url, "full")
    try:
        first = cluster.open_node(NodeId("a"), Recorder())
        second = cluster.open_node(NodeId("b"), Recorder())
        first.join_cluster("h:1")
        with pytest.raises(ClusterFull):
            second.join_cluster("h:2")
        first.join_cluster("h:3")  # a member may rejoin a full cluster
        assert set(first._members()[0]) == {NodeId("a")}
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


@pytest.mark.parametrize(("setting", "kind"), [
    ("memory", ProviderKind.MEMORY), ("etcd://u:p@127.0.0.1:2379/ns?ca=/x", ProviderKind.ETCD),
    ("tcp://:s@127.0.0.1:7000", ProviderKind.SERVICE), ("tcp://", None), ("etcd:", None), ("exec:x", None),
    ("zookeeper://h:1", None), ("memory:", None),
])
def test_one_table_names_the_provider_settings_jobs_and_the_conformance_runner_take(setting: str,
                                                                                     kind: ProviderKind | None) -> None:
    assert provider_kind(setting) is kind
    assert all(syntax in TARGET_HELP for syntax in PROVIDER_SYNTAX.values())


def test_etcd_setting_carries_credentials_and_tls_files(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-file\n")
    endpoint = EtcdEndpoint.parse(f"etcd://svc@etcd.example:2380/ns?ca=/ca.pem&cert=/c.pem&key=/k.pem"
                                  f"&password_file={tmp_path / 'pw'}")
    assert (endpoint.host, endpoint.port, endpoint.tls, endpoint.user, endpoint.password) == \
        ("etcd.example", 2380, True, "svc", "from-file")
    assert (endpoint.ca_file, endpoint.cert_file, endpoint.key_file) == ("/ca.pem", "/c.pem", "/k.pem")
    assert "from-file" not in repr(endpoint) + str(endpoint)
    plain = EtcdEndpoint.parse("etcd://u:p%40ss@127.0.0.1:2379")
    assert (plain.tls, plain.user, plain.password) == (False, "u", "p@ss")
    with pytest.raises(ValueError):
        EtcdEndpoint.parse("etcd://127.0.0.1:2379?tls_skip_verify=1")


@pytest.mark.etcd
def test_etcd_with_tls_and_auth_refuses_wrong_credentials(etcd_required: None, tmp_path: Path) -> None:
    pki = make_test_pki(tmp_path / "pki")
    server = EtcdServer(tmp_path / "etcd", tls=pki, user=EtcdUser("streamwire", "right"))
    server.start()
    try:
        good = server.endpoint
        with pytest.raises(Unauthenticated):
            EtcdCluster(dataclasses.replace(good, password="wrong"), "creds")
        with pytest.raises(ProviderUnavailable):  # no client certificate: the TLS handshake fails
            EtcdCluster(dataclasses.replace(good, cert_file=None, key_file=None), "creds")
        with pytest.raises(ProviderUnavailable):  # plain HTTP to a TLS port
            EtcdCluster(dataclasses.replace(good, tls=False), "creds")
        backend = open_backend(f"etcd://streamwire:right@127.0.0.1:{server.client_port}/creds"
                               f"?ca={pki.ca}&cert={pki.client_cert}&key={pki.client_key}")
        node = backend.open_node(NodeId("a"), Recorder())
        node.join_cluster("h:1")
        with pytest.raises(NodeIdInUse):
            backend.open_node(NodeId("a"), Recorder())
        backend.close()
    finally:
        server.stop()
