"""A remote node survives the network: it reports cluster_down, reconnects with backoff and resumes
its notifications from the last revision it saw, with nothing lost and nothing twice."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from conformance.cluster.harness import Recorder
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import Backoff, RemoteCluster, RemoteNode, read_message
from reference.cluster.service import ClusterService
from spec.cluster import wire
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import ProviderUnavailable, RevisionMismatch
from spec.cluster.types import MetadataOp, NodeId

HANG_GUARD = 30.0
BATCHES = 300


def write_batches(writer: RemoteNode, committed: dict[int, int], stop: threading.Event) -> None:
    """Batch i inserts b<i>/x and b<i>/y; a call whose outcome is unknown is retried (a mismatch
    on the retry means the first attempt committed, at the revision it reports)."""
    for i in range(BATCHES):
        ops = [MetadataOp(key=f"b{i:03}/x", value=b"x"), MetadataOp(key=f"b{i:03}/y", value=b"y")]
        while not stop.is_set():
            try:
                committed[i] = writer.update_shard_log(ops)
                break
            except ProviderUnavailable:
                time.sleep(0.01)
            except RevisionMismatch as exc:
                assert exc.actual is not None
                committed[i] = exc.actual.revision
                break


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + HANG_GUARD
    while not predicate():
        assert time.monotonic() < end, f"not within {HANG_GUARD} s: {what}"
        time.sleep(0.02)


def test_watch_resumes_across_a_service_restart_without_loss_or_duplicates(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    cluster = InProcessCluster(data_dir=data)
    service = ClusterService(cluster)
    remote = RemoteCluster(service.url, timeout=2.0, backoff=Backoff(first=0.02, limit=0.2))
    watcher_core = Recorder()
    committed: dict[int, int] = {}
    stop = threading.Event()
    try:
        writer = remote.open_node(NodeId("writer"), Recorder())
        shard = writer.join_cluster("h:1")
        watcher = remote.open_node(NodeId("watcher"), watcher_core)
        watcher.join_cluster("h:2")
        watcher.join_shard(shard)
        thread = threading.Thread(target=write_batches, args=(writer, committed, stop))
        thread.start()
        wait_for(lambda: len(committed) >= BATCHES // 3, "a third of the batches before the restart")
        service.close()
        cluster.close()
        restarted_at = time.monotonic()
        cluster = InProcessCluster(data_dir=data)
        service = ClusterService(cluster, port=service.port)
        thread.join(HANG_GUARD)
        assert len(committed) == BATCHES
        last = f"b{BATCHES - 1:03}/y"
        wait_for(lambda: last in watcher_core.latest("log"), "the last batch notified")

        batches = [entries for _, entries in watcher_core.shard_log]
        seen = Counter(e.key for batch in batches for e in batch)
        assert {k: n for k, n in seen.items() if n > 1} == {}, "an entry was notified twice"
        by_key = {e.key: (e.revision, batch) for batch in batches for e in batch}
        for i, revision in committed.items():
            x, y = by_key.get(f"b{i:03}/x"), by_key.get(f"b{i:03}/y")
            assert x is not None and y is not None, f"batch {i} was lost"
            assert x[0] == y[0] == revision and x[1] is y[1], f"batch {i} was not one notification"
        assert watcher_core.downs, "no cluster_down while the service was away"
        assert watcher.reconnects >= 1 and writer.reconnects >= 1
        wait_for(lambda: any(t > restarted_at for t, _ in watcher_core.heartbeats), "heartbeats again")
    finally:
        stop.set()
        remote.close()
        service.close()
        cluster.close()


def test_a_dropped_connection_resumes_on_the_same_service() -> None:
    cluster = InProcessCluster()
    service = ClusterService(cluster)
    remote = RemoteCluster(service.url, timeout=2.0, backoff=Backoff(first=0.02, limit=0.2))
    core = Recorder()
    try:
        node = remote.open_node(NodeId("n1"), core)
        node.join_cluster("h:1")
        r1 = node.update_shard_log([MetadataOp(key="before", value=b"1")])
        wait_for(lambda: "before" in core.latest("log"), "the first write notified")
        service.close()  # every connection drops; the cluster stays
        other = cluster.open_node(NodeId("n2"), Recorder())
        other.join_cluster("h:2")
        service = ClusterService(cluster, port=service.port)
        wait_for(lambda: node.reconnects >= 1, "reconnected")
        r2 = node.update_shard_log([MetadataOp(key="before", value=b"2", expected=r1)])
        wait_for(lambda: core.latest("log")["before"].revision == r2, "the second write notified")
        assert [e.revision for _, batch in core.shard_log for e in batch] == [r1, r2]
        snapshot = core.last_snapshot()
        assert snapshot is not None and NodeId("n2") in snapshot.nodes(), "missed the join made while away"
    finally:
        remote.close()
        service.close()
        cluster.close()


def test_reconnect_delays_double_up_to_the_limit_each_jittered_down_by_at_most_half() -> None:
    """A service that is down is dialled ever less often (first, 2x, 4x ... up to the limit), not at a fixed rate."""
    backoff = Backoff(first=0.05, limit=1.0)
    for delays in (list(zip(range(8), backoff.delays())) for _ in range(20)):
        for i, delay in delays:
            ceiling = min(0.05 * 2 ** i, 1.0)
            assert ceiling / 2 <= delay <= ceiling, (i, delay)


class MuteService:
    """A cluster service that welcomes each HELLO, then never answers: it stays silent (a link that
    went down sends no FIN) or, with ``hang_up``, closes the connection at the node's first request."""

    def __init__(self, policy: FailurePolicy, hang_up: bool = False) -> None:
        self.policy, self.hang_up = policy, hang_up
        self.hellos = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True, name="mute-service").start()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self._listener.getsockname()[1]}"

    def _serve(self) -> None:
        try:
            while True:
                sock, _ = self._listener.accept()
                self._held.append(sock)
                hello = read_message(sock)
                assert hello is not None and hello.kind is wire.ServiceKind.HELLO
                self.hellos += 1
                sock.sendall(wire.encode(wire.ServiceKind.WELCOME, hello.request_id, session="s",
                                         **wire.timing_to_wire(self.policy.timing())))
                if self.hang_up:
                    read_message(sock)
                    sock.close()
        except OSError:
            return  # closed by the test

    def close(self) -> None:
        self._listener.close()
        for sock in self._held:
            sock.close()


def test_a_connection_that_stops_answering_is_ended_and_connected_again() -> None:
    service = MuteService(FailurePolicy(heartbeat_interval=0.1, fail_after=0.2))
    remote = RemoteCluster(service.url, timeout=0.2)
    try:
        remote.open_node(NodeId("n1"), Recorder())  # its renewals go unanswered
        wait_for(lambda: service.hellos >= 2, "a second HELLO after the silent connection was given up")
    finally:
        remote.close()
        service.close()


def test_calls_waiting_on_a_connection_that_breaks_fail_at_once_not_at_their_timeout() -> None:
    service = MuteService(FailurePolicy(heartbeat_interval=10.0, fail_after=20.0), hang_up=True)
    remote = RemoteCluster(service.url, timeout=4 * HANG_GUARD)  # a call would wait four hang guards
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            node.join_cluster("h:1")
        except ProviderUnavailable as error:
            outcome.append(error)

    try:
        node = remote.open_node(NodeId("n1"), Recorder())
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(HANG_GUARD)
        assert len(outcome) == 1, "the call still waits although its connection closed"
    finally:
        remote.close()
        service.close()
