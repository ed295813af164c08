"""The cluster service bounds strangers: no thread per connection, bounded memory, a deadline for
HELLO, a cap on waiting strangers, a frame cap before allocation, and a shared secret when
configured. Counts are of what the service entered in its ledger and of the test's own sockets."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator

import pytest

from conformance.cluster.harness import Recorder
from reference.cluster.config import (FAIL_AFTER_CONF_KEY, HEARTBEAT_CONF_KEY, JOB_FAILURE_POLICY, SECRET_CONF_KEY,
                                      DriverCluster, failure_policy, open_backend, service_secret)
from reference.cluster.memory import DEFAULT_POLICY, InProcessCluster
from reference.cluster.remote import RemoteCluster, read_message
from reference.cluster.service import ClusterService, PollerStalled, ServiceLimits
from reference.shuffle.cluster_directory import driver_directory_from_conf
from reference.net.ledger import ResourceLedger
from reference.net.reactor import ConnectionLimits
from spec.cluster import wire
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import FrameTooLarge, MalformedMessage, NodeIdInUse, ProviderUnavailable, Unauthenticated
from spec.cluster.types import MAX_BATCH_OPS, MAX_VALUE_BYTES, MetadataOp, NodeId, Scope

HANG_GUARD = 20.0


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    cluster = InProcessCluster()
    yield cluster
    cluster.close()


def connect(service: ClusterService) -> socket.socket:
    return socket.create_connection((service.host, service.port), timeout=HANG_GUARD)


def hello(node: str, secret: str = "") -> bytes:
    return wire.encode(wire.ServiceKind.HELLO, 1, node_id=node, secret=secret, takeover="", resume=False, resume_after=0)


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + HANG_GUARD
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"not within {HANG_GUARD} s: {what}")
        time.sleep(0.02)


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the service closed ``sock`` (after any last words)."""
    sock.settimeout(HANG_GUARD)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def test_stalled_and_oversized_connections_hold_no_thread_and_bounded_memory(cluster: InProcessCluster) -> None:
    ledger = ResourceLedger()
    limits = ServiceLimits(connections=ConnectionLimits(max_pending=512, bind_timeout_s=60.0))
    service = ClusterService(cluster, limits=limits, ledger=ledger)
    stalled: list[socket.socket] = []
    try:
        for _ in range(300):
            sock = connect(service)
            sock.sendall(b"\x00\x00")  # half a frame header, then nothing
            stalled.append(sock)
        hostile = [connect(service) for _ in range(8)]
        for sock in hostile:  # announce 16 MiB and start sending it
            sock.sendall(wire.MAX_FRAME_BYTES.to_bytes(4, "big") + bytes(60_000))
        for sock in hostile:
            sock.settimeout(HANG_GUARD)
            reply = read_message(sock)
            assert reply is not None and reply.kind is wire.ServiceKind.ERROR
            assert reply.payload["code"] == FrameTooLarge.code
            assert closed_by_peer(sock)
            sock.close()
        wait_until(lambda: service.connection_count == 300, "300 stalled connections held")
        assert ledger.threads_started == 1 and len(ledger.live_threads()) == 1, "a thread per connection"
        assert service.held_bytes() <= 300 * 4, "stalled connections hold more than their partial header"
    finally:
        for sock in stalled:
            sock.close()
        service.close()
    assert ledger.open_sockets() == [] and ledger.live_threads() == []


def test_hello_deadline_closes_silent_connections(cluster: InProcessCluster) -> None:
    limits = ServiceLimits(connections=ConnectionLimits(max_pending=64, bind_timeout_s=0.3))
    service = ClusterService(cluster, limits=limits)
    try:
        silent = [connect(service) for _ in range(20)]
        for sock in silent:
            assert closed_by_peer(sock)
            sock.close()
        wait_until(lambda: service.connection_count == 0, "silent connections released")
    finally:
        service.close()


def test_waiting_strangers_are_capped_and_nodes_too(cluster: InProcessCluster) -> None:
    limits = ServiceLimits(connections=ConnectionLimits(max_pending=5, bind_timeout_s=30.0), max_sessions=2)
    service = ClusterService(cluster, limits=limits)
    held = [connect(service) for _ in range(5)]
    remote = RemoteCluster(service.url)
    try:
        wait_until(lambda: service.connection_count == 5, "5 strangers accepted")
        newest = connect(service)
        assert closed_by_peer(held[0]), "the oldest stranger was not evicted"
        wait_until(lambda: service.connection_count == 5, "the cap holds")
        remote.open_node(NodeId("n1"), Recorder())
        remote.open_node(NodeId("n2"), Recorder())
        with pytest.raises(ProviderUnavailable):
            RemoteCluster(service.url).open_node(NodeId("n3"), Recorder())
        newest.close()
    finally:
        remote.close()
        for sock in held:
            sock.close()
        service.close()


def test_shared_secret_is_required_when_configured(cluster: InProcessCluster) -> None:
    service = ClusterService(cluster, secret="s3cret")
    try:
        assert service.url == f"tcp://:s3cret@{service.host}:{service.port}"
        with pytest.raises(Unauthenticated):
            RemoteCluster(f"tcp://{service.host}:{service.port}").open_node(NodeId("n1"), Recorder())
        with pytest.raises(Unauthenticated):
            RemoteCluster(f"tcp://:wrong@{service.host}:{service.port}").open_node(NodeId("n1"), Recorder())
        remote = RemoteCluster(service.url)
        node = remote.open_node(NodeId("n1"), Recorder())
        node.join_cluster("h:1")
        assert node.update_shard_log([MetadataOp(key="k", value=b"v")]) > 0
        remote.close()
    finally:
        service.close()


def test_a_secret_with_url_delimiters_travels_in_the_url(cluster: InProcessCluster) -> None:
    service = ClusterService(cluster, secret="a:b@c/d?e")
    try:
        remote = RemoteCluster(service.url)
        remote.open_node(NodeId("n1"), Recorder()).join_cluster("h:1")
        remote.close()
    finally:
        service.close()


def test_unauthenticated_hello_is_one_error_line_then_close(cluster: InProcessCluster) -> None:
    service = ClusterService(cluster, secret="s3cret")
    try:
        sock = connect(service)
        sock.sendall(hello("n1", "guess"))
        reply = read_message(sock)
        assert reply is not None and reply.kind is wire.ServiceKind.ERROR and reply.request_id == 1
        assert reply.payload["code"] == Unauthenticated.code and "\n" not in reply.payload["message"]
        assert closed_by_peer(sock)
        sock.close()
    finally:
        service.close()


@pytest.mark.parametrize("kind", [16, 17, 18, 19, 39, 40, 41])
@pytest.mark.parametrize("after_hello", [False, True])
def test_the_old_test_control_kinds_are_unknown_on_the_production_wire(cluster: InProcessCluster, kind: int,
                                                                      after_hello: bool) -> None:
    """Anyone may connect: no frame stops the detector's clock, restarts or probes the cluster. The kinds
    that were a test mode's CLOCK, RESTART, DURABLE, HELD and their replies are unknown, refused like any
    other (a conformance harness offers those controls on its own channel)."""
    service = ClusterService(cluster)
    try:
        sock = connect(service)
        if after_hello:
            sock.sendall(hello("n1", ""))
            welcome = read_message(sock)
            assert welcome is not None and welcome.kind is wire.ServiceKind.WELCOME
        body = bytes([kind]) + (1).to_bytes(8, "big") + bytes(5)  # request id 1; a CLOCK's payload was 5 bytes
        sock.sendall(len(body).to_bytes(wire.FRAME_HEADER.sizeof(), "big") + body)
        reply = read_message(sock)
        assert reply is not None and reply.kind is wire.ServiceKind.ERROR and reply.request_id == 0
        assert reply.payload["code"] == MalformedMessage.code and f"unknown message kind {kind}" in reply.payload["message"]
        assert closed_by_peer(sock)
        sock.close()
    finally:
        service.close()


def test_impersonation_over_tcp_is_refused_and_the_holder_keeps_working(cluster: InProcessCluster) -> None:
    service = ClusterService(cluster)
    remote = RemoteCluster(service.url)
    try:
        core = Recorder()
        holder = remote.open_node(NodeId("n1"), core)
        holder.join_cluster("h:1")
        with pytest.raises(NodeIdInUse):
            RemoteCluster(service.url).open_node(NodeId("n1"), Recorder())
        assert holder.update_shard_log([MetadataOp(key="k", value=b"v")]) > 0
    finally:
        remote.close()
        service.close()


def test_a_hello_fits_the_first_frame_bound() -> None:
    assert len(hello("n" * 128, "s" * 200)) < wire.MAX_HELLO_BYTES


def test_driver_host_takes_the_secret_from_spark_authenticate() -> None:
    conf = {"spark.authenticate": "true", "spark.authenticate.secret": "from-spark"}
    assert service_secret(conf) == "from-spark"
    assert service_secret({"spark.authenticate.secret": "off"}) is None
    assert service_secret(conf | {SECRET_CONF_KEY: "own"}) == "own"
    host = DriverCluster("memory", secret=service_secret(conf))
    try:
        assert ":from-spark@" in host.executor_url
        backend = open_backend(host.executor_url)
        backend.open_node(NodeId("executor-1"), Recorder()).join_cluster("h:1")
        backend.close()
        with pytest.raises(Unauthenticated):
            open_backend(host.executor_url.replace(":from-spark@", "")).open_node(NodeId("e2"), Recorder())
    finally:
        host.close()


def identified(service: ClusterService, node: str) -> socket.socket:
    sock = connect(service)
    sock.sendall(hello(node))
    welcome = read_message(sock)
    assert welcome is not None and welcome.kind is wire.ServiceKind.WELCOME
    return sock


def test_an_identified_node_is_bounded_by_the_largest_request(cluster: InProcessCluster) -> None:
    service = ClusterService(cluster)
    try:
        sock = identified(service, "big")
        sock.sendall((wire.MAX_REQUEST_BYTES + 1).to_bytes(4, "big"))
        reply = read_message(sock)
        assert reply is not None and reply.kind is wire.ServiceKind.ERROR and reply.payload["code"] == FrameTooLarge.code
        assert closed_by_peer(sock)
        sock.close()
    finally:
        service.close()


def test_partial_requests_of_all_nodes_share_one_budget_and_silent_nodes_are_closed(
        cluster: InProcessCluster) -> None:
    budget = 2 * 1024 * 1024
    service = ClusterService(cluster, limits=ServiceLimits(max_buffered_bytes=budget))
    senders = [identified(service, f"hoarder{i}") for i in range(4)]
    try:
        for sock in senders:  # each announces a full-size request and sends 1 MiB of it, then stalls
            sock.sendall(wire.MAX_REQUEST_BYTES.to_bytes(4, "big"))
        chunk = bytes(64 * 1024)
        for _ in range(16):
            for sock in senders:
                sock.setblocking(False)
                try:
                    sock.send(chunk)
                except BlockingIOError:
                    pass  # the service stopped reading this one: TCP pushes back
        wait_until(lambda: service.held_bytes() > budget, "the service reading up to its budget")
        assert service.held_bytes() <= budget + 4 * 64 * 1024
        for sock in senders:  # no complete frame within fail_bound: each silent node is closed
            sock.setblocking(True)
            assert closed_by_peer(sock)
        wait_until(lambda: service.held_bytes() == 0, "buffers released")
    finally:
        for sock in senders:
            sock.close()
        service.close()


def test_spark_driver_coordinator_requires_spark_authenticate_secret() -> None:
    coordinator = driver_directory_from_conf({"spark.authenticate": "true", "spark.authenticate.secret": "sparks"})
    try:
        assert ":sparks@" in coordinator.task_url
        with pytest.raises(Unauthenticated):
            open_backend(coordinator.task_url.replace(":sparks@", "")).open_node(NodeId("e1"), Recorder())
    finally:
        coordinator.stop()


def test_a_spark_drivers_cluster_declares_the_job_failure_policy_and_takes_its_settings() -> None:
    coordinator = driver_directory_from_conf({})
    try:
        assert coordinator.backend.timing == JOB_FAILURE_POLICY.timing()
        assert JOB_FAILURE_POLICY.fail_bound > DEFAULT_POLICY.fail_bound
    finally:
        coordinator.stop()
    chosen = failure_policy({HEARTBEAT_CONF_KEY: "100", FAIL_AFTER_CONF_KEY: "800"})
    assert (chosen.heartbeat_interval, chosen.pfail_after, chosen.fail_after) == (0.1, 0.4, 0.8)


@pytest.mark.parametrize("conf, complaint", [
    ({FAIL_AFTER_CONF_KEY: "5s"}, "whole number of milliseconds"),
    ({HEARTBEAT_CONF_KEY: "0"}, "must be positive"),
    ({HEARTBEAT_CONF_KEY: "1000", FAIL_AFTER_CONF_KEY: "1500"}, "at least twice"),
    ({FAIL_AFTER_CONF_KEY: str(2**32)}, "wire's bound"),  # WELCOME carries it as u32 milliseconds
])
def test_a_bad_failure_policy_is_refused_naming_the_key(conf: dict[str, str], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint) as refused:
        failure_policy(conf)
    assert "spark.streamwire.cluster." in str(refused.value)


@pytest.mark.parametrize("flags", [["--fail-after", "nan"], ["--heartbeat", "0.0001"], ["--fail-after", "1e10"]])
def test_the_service_refuses_a_failure_policy_it_cannot_run_in_one_line(flags: list[str]) -> None:
    """Before, NaN passed the policy and the detector's own check raised a traceback, and a fail_after
    too large for WELCOME's u32 milliseconds started a service that could not greet anyone."""
    done = subprocess.run([sys.executable, "-m", "reference.cluster.service", *flags], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "error:" in done.stderr and "Traceback" not in done.stderr


def test_a_join_catch_up_larger_than_a_frame_reaches_the_joiner_whole(cluster: InProcessCluster) -> None:
    """Five full batches (20 MB) in a shard's log, more than one frame may carry: a node joining that
    shard over the service is told every entry, each batch in one notification."""
    service = ClusterService(cluster)
    remote = RemoteCluster(service.url)
    try:
        writer, joiner = Recorder(), Recorder()
        a = remote.open_node(NodeId("a"), writer)
        shard = a.join_cluster("10.0.0.1:1")
        revisions = [a.update_shard_log([MetadataOp(key=f"k{b}-{i}", value=bytes(MAX_VALUE_BYTES), expected=None)
                                         for i in range(MAX_BATCH_OPS)]) for b in range(5)]
        b = remote.open_node(NodeId("b"), joiner)
        b.join_cluster("10.0.0.2:1")
        b.join_shard(shard)
        wait_until(lambda: sum(len(batch) for _, batch in joiner.shard_log) >= 5 * MAX_BATCH_OPS, "the whole log")
        holding = {r: [sum(e.revision == r for e in batch) for _, batch in joiner.shard_log
                       if any(e.revision == r for e in batch)] for r in revisions}
        assert holding == {r: [MAX_BATCH_OPS] for r in revisions}  # each batch whole, in one notification
    finally:
        remote.close()
        service.close()


def test_a_displaced_session_closing_leaves_its_successor_counted(cluster: InProcessCluster) -> None:
    """A takeover closes the displaced session; that close must not free its successor's place."""
    service = ClusterService(cluster, limits=ServiceLimits(max_sessions=2))
    remotes = [RemoteCluster(service.url) for _ in range(4)]
    try:
        first = remotes[0].open_node(NodeId("n1"), Recorder())
        remotes[1].open_node(NodeId("n1"), Recorder(), takeover=first.takeover_token)
        wait_until(lambda: service.connection_count == 1, "the displaced session closed")
        remotes[2].open_node(NodeId("n2"), Recorder())
        with pytest.raises(ProviderUnavailable):  # n1's successor and n2 are the two sessions served
            remotes[3].open_node(NodeId("n3"), Recorder())
    finally:
        for remote in remotes:
            remote.close()
        service.close()


def test_a_node_that_reads_its_events_is_never_disconnected_for_them(cluster: InProcessCluster) -> None:
    """Events written to a node leave its queue: only unread events count against max_queued_bytes."""
    service = ClusterService(cluster, limits=ServiceLimits(max_queued_bytes=16 * 1024))
    remote = RemoteCluster(service.url)
    try:
        core = Recorder()
        reader = remote.open_node(NodeId("reader"), core)
        reader.join_cluster("h:1")
        writer = remote.open_node(NodeId("writer"), Recorder())
        writer.join_cluster("h:2")
        for i in range(64):  # 64 events of 1 KiB: four times the queue bound, each read at once
            writer.update_gossip([MetadataOp(key=f"k{i}", value=b"v" * 1024)], Scope.GLOBAL)
            wait_until(lambda: len(core.gossip) > i, f"gossip event {i}")
        assert core.downs == [] and reader.reconnects == 0
    finally:
        remote.close()
        service.close()


def test_a_stranger_may_announce_no_more_than_a_hello(cluster: InProcessCluster) -> None:
    """Before HELLO the bound is MAX_HELLO_BYTES, not a node's largest request."""
    service = ClusterService(cluster)
    try:
        with connect(service) as sock:
            sock.sendall((wire.MAX_HELLO_BYTES + 1).to_bytes(wire.FRAME_HEADER.sizeof(), "big"))
            reply = read_message(sock)
            assert reply is not None and reply.payload["code"] == FrameTooLarge.code
            assert closed_by_peer(sock)
    finally:
        service.close()


@pytest.fixture
def patient() -> Iterator[InProcessCluster]:
    """A cluster whose fail_bound is longer than any wait here: no session ends for silence."""
    cluster = InProcessCluster(FailurePolicy(heartbeat_interval=1.0, fail_after=60.0))
    yield cluster
    cluster.close()


def test_a_node_that_does_not_read_its_events_is_disconnected(patient: InProcessCluster) -> None:
    service = ClusterService(patient, limits=ServiceLimits(max_queued_bytes=64 * 1024))
    remote = RemoteCluster(service.url)
    try:
        with connect(service) as deaf:
            deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            deaf.sendall(hello("deaf"))
            deaf.sendall(wire.encode(wire.ServiceKind.JOIN_CLUSTER, 2, address="h:1"))
            writer = remote.open_node(NodeId("writer"), Recorder())
            writer.join_cluster("h:2")
            value = b"v" * (MAX_VALUE_BYTES // 2)
            for i in range(256):  # far more than the socket buffers and the queue bound hold
                writer.update_gossip([MetadataOp(key=f"k{i}", value=value)], Scope.GLOBAL)
                if service.connection_count < 2:
                    break
            wait_until(lambda: service.connection_count == 1, "the deaf node disconnected")
    finally:
        remote.close()
        service.close()


def test_a_displaced_session_is_told_and_closed(patient: InProcessCluster) -> None:
    """The service closes it, whatever its client does with the news."""
    service = ClusterService(patient)
    remote = RemoteCluster(service.url)
    try:
        with connect(service) as first:
            first.sendall(hello("n1"))
            welcome = read_message(first)
            assert welcome is not None and welcome.kind is wire.ServiceKind.WELCOME
            remote.open_node(NodeId("n1"), Recorder(), takeover=welcome.payload["session"])
            told = read_message(first)
            assert told is not None and told.kind is wire.ServiceKind.ERROR
            assert closed_by_peer(first)
    finally:
        remote.close()
        service.close()


def test_a_node_that_renews_is_never_taken_for_silent() -> None:
    """Every frame counts as a sign of life, not only HELLO: past fail_bound a renewing node stays connected."""
    cluster = InProcessCluster(FailurePolicy(heartbeat_interval=0.1, fail_after=0.3))
    service = ClusterService(cluster)
    remote = RemoteCluster(service.url)
    try:
        core = Recorder()
        node = remote.open_node(NodeId("n1"), core)
        node.join_cluster("h:1")
        time.sleep(4 * cluster.timing.fail_bound)  # four bounds of renewals only
        assert node.reconnects == 0 and core.downs == []
    finally:
        remote.close()
        service.close()
        cluster.close()


def test_a_refusal_queued_behind_a_large_event_reaches_a_node_before_the_close(patient: InProcessCluster) -> None:
    """A node that has not yet read its gossip events (megabytes queued in the service, beyond what
    the socket buffers hold) sends a frame over the bound: the FRAME_TOO_LARGE line is written after
    the events, then the connection closes. Before, the close dropped the queue and the line with it."""
    service = ClusterService(patient)
    try:
        with socket.socket() as node:
            node.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
            node.settimeout(HANG_GUARD)
            node.connect((service.host, service.port))
            node.sendall(hello("unhurried"))
            node.sendall(wire.encode(wire.ServiceKind.JOIN_CLUSTER, 2, address="h:1"))
            for batch in range(2):  # two events of 4 MiB each: more than any socket buffer takes
                ops = [{"key": f"b{batch}-{i}", "value": bytes(MAX_VALUE_BYTES), "expected": 0}
                       for i in range(MAX_BATCH_OPS)]
                node.sendall(wire.encode(wire.ServiceKind.UPDATE_GOSSIP, 3 + batch, scope=Scope.SHARD.value, ops=ops))
            wait_until(lambda: service.held_bytes() > 0, "the node's events queued in the service")
            node.sendall((wire.MAX_REQUEST_BYTES + 1).to_bytes(4, "big"))
            kinds = []
            while (message := read_message(node)) is not None:
                kinds.append(message.kind)
                last = message
            assert wire.ServiceKind.GOSSIP_UPDATE in kinds and kinds[-1] is wire.ServiceKind.ERROR
            assert last.payload["code"] == FrameTooLarge.code and last.request_id == 0
    finally:
        service.close()


class SteppedClock:
    """The cluster's time (its detector's and its service's sessions'), moved by the test; not stopped, so
    the service looks for silence on its own."""

    stopped = False

    def __init__(self) -> None:
        self.at = 0.0

    def now(self) -> float:
        return self.at


def test_silent_sessions_are_found_in_deadline_order_and_a_frame_moves_a_session_back() -> None:
    """a, b and c say HELLO at 0, 1 and 2; a sends a frame at 3: past b's deadline only b is closed
    (a's frame moved it behind c; the service looks at the earliest deadlines only)."""
    clock = SteppedClock()
    patient = InProcessCluster(FailurePolicy(heartbeat_interval=1.0, fail_after=60.0), clock=clock)
    service = ClusterService(patient)
    fail_bound = patient.timing.fail_bound
    socks = {}
    try:
        for at, node in enumerate("abc"):
            clock.at = float(at)
            socks[node] = identified(service, node)
        clock.at = 3.0
        socks["a"].sendall(wire.encode(wire.ServiceKind.RENEW, 2))
        assert read_message(socks["a"]) is not None
        clock.at = 1.0 + fail_bound + 0.5
        assert closed_by_peer(socks["b"])
        wait_until(lambda: service.connection_count == 2, "b's session released")
        clock.at = 2.0 + fail_bound + 0.5
        assert closed_by_peer(socks["c"])
        wait_until(lambda: service.connection_count == 1, "c's session released")
    finally:
        for sock in socks.values():
            sock.close()
        service.close()
        patient.close()


def test_a_hold_of_reads_that_no_poller_round_carries_out_raises_instead_of_returning(
        cluster: InProcessCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """PAUSE and RESUME (and a stopped clock's silence judgement) return once a poller round carried them out; a
    poller stuck in a round (here held inside its poll) makes them raise when their limit passes, so a harness answers
    ERROR rather than PAUSED (or CLOCKED)."""
    service = ClusterService(cluster)
    stuck, release = threading.Event(), threading.Event()
    poll = service._reactor.poll

    def stuck_poll(timeout: float) -> None:
        stuck.set()
        release.wait(HANG_GUARD)
        poll(timeout)

    sock = identified(service, "held")
    try:
        monkeypatch.setattr(service._reactor, "poll", stuck_poll)
        assert stuck.wait(HANG_GUARD)
        with pytest.raises(PollerStalled):
            service.hold_reads(NodeId("held"), True, limit=0.2)
        with pytest.raises(PollerStalled):
            service.hold_reads(NodeId("held"), False, limit=0.2)
        with pytest.raises(PollerStalled):
            service.judge_silence(limit=0.2)
        release.set()
        service.judge_silence()
        service.hold_reads(NodeId("held"), True)
        service.hold_reads(NodeId("held"), False)
    finally:
        release.set()
        sock.close()
        service.close()
