"""In-process backend: identities claimed once, notifications fanned out outside the cluster lock,
and a journal that is compacted yet restores the same state."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Sequence

import pytest

from conformance.cluster.clock import DetectorClock
from conformance.cluster.harness import Recorder
from reference.cluster.dispatch import ClusterDown, Dispatcher, Event, Heartbeat
from reference.cluster.heartbeat import HeartbeatThread
from reference.cluster.memory import InProcessCluster
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import NodeIdInUse, ProviderClosed, ProviderUnavailable
from spec.cluster.model import ClusterModel, GossipUpdate, ShardLogUpdate
from spec.cluster.types import Entry, MetadataOp, NodeId, NodeState, Revision, Scope, ShardId

HANG_GUARD = 10.0


def test_model_claims_an_id_once_and_hands_it_on_only_with_the_token() -> None:
    model = ClusterModel()
    assert model.claim(NodeId("n1"), "t1") is None
    with pytest.raises(NodeIdInUse):
        model.claim(NodeId("n1"), "t2")
    with pytest.raises(NodeIdInUse):
        model.claim(NodeId("n1"), "t2", takeover="guess")
    assert model.claim(NodeId("n1"), "t2", takeover="t1") == "t1"
    model.release(NodeId("n1"), "t1")  # the displaced session's release changes nothing
    assert model.sessions == {NodeId("n1"): "t2"}
    model.release(NodeId("n1"), "t2")
    assert model.claim(NodeId("n1"), "t3") is None


def test_catch_up_is_the_snapshot_then_one_notification_per_newer_batch() -> None:
    model = ClusterModel()
    model.join_cluster(NodeId("a"), "h:1", ShardId("s"))
    r1, _ = model.update_shard_log(NodeId("a"), [MetadataOp(key="x", value=b"1"), MetadataOp(key="y", value=b"1")])
    r2, _ = model.update_gossip(NodeId("a"), [MetadataOp(key="g", value=b"1")], Scope.GLOBAL)
    r3, _ = model.update_shard_log(NodeId("a"), [MetadataOp(key="x", value=b"2", expected=r1)])
    notes = model.catch_up(NodeId("a"), after=r1)
    assert [type(n).__name__ for n in notes] == ["MembershipUpdate", "GossipUpdate", "ShardLogUpdate"]
    gossip, log = notes[1], notes[2]
    assert isinstance(gossip, GossipUpdate) and gossip.entries == (Entry(key="g", value=b"1", revision=r2),)
    assert isinstance(log, ShardLogUpdate) and log.entries == (Entry(key="x", value=b"2", revision=r3),)


def test_catch_up_after_a_shard_move_the_client_did_not_hear_of_replays_that_shards_log() -> None:
    model = ClusterModel()
    model.join_cluster(NodeId("a"), "h:1", ShardId("s1"))
    model.join_cluster(NodeId("b"), "h:2", ShardId("s2"))
    r1, _ = model.update_shard_log(NodeId("b"), [MetadataOp(key="k", value=b"1")])
    seen = model.revision  # a heard everything up to here, then lost its connection
    model.join_shard(NodeId("a"), ShardId("s2"))  # committed, but its notifications never reached a
    notes = model.catch_up(NodeId("a"), after=seen)
    logs = [n for n in notes if isinstance(n, ShardLogUpdate)]
    assert [n.entries for n in logs] == [(Entry(key="k", value=b"1", revision=r1),)]


def test_in_process_open_of_a_live_id_is_refused_and_takeover_closes_the_holder() -> None:
    cluster = InProcessCluster()
    try:
        holder = cluster.open_node(NodeId("n1"), Recorder())
        holder.join_cluster("h:1")
        with pytest.raises(NodeIdInUse):
            cluster.open_node(NodeId("n1"), Recorder())
        holder.update_shard_log([MetadataOp(key="k", value=b"v")])
        successor = cluster.open_node(NodeId("n1"), Recorder(), takeover=holder.takeover_token)
        with pytest.raises(ProviderClosed):
            holder.update_shard_log([MetadataOp(key="k2", value=b"v")])
        successor.update_shard_log([MetadataOp(key="k2", value=b"v")])
        successor.close()
        cluster.open_node(NodeId("n1"), Recorder()).close()
    finally:
        cluster.close()


class BlockingCore(Recorder):
    """Blocks in its first shard-log callback until released."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        self.entered.set()
        self.release.wait(HANG_GUARD)
        super().notify_shard_log_update(shard, entries)


def test_notifications_are_delivered_outside_the_cluster_lock() -> None:
    cluster = InProcessCluster()
    core = BlockingCore()
    try:
        slow = cluster.open_node(NodeId("slow"), core, inline=True)
        shard = slow.join_cluster("h:1")
        writer = cluster.open_node(NodeId("writer"), Recorder())
        writer.join_cluster("h:2")
        writer.join_shard(shard)
        blocked = threading.Thread(target=writer.update_shard_log, args=([MetadataOp(key="a", value=b"1")],))
        blocked.start()  # its fan-out runs the slow Core inline and blocks there
        assert core.entered.wait(HANG_GUARD)
        other = cluster.open_node(NodeId("other"), Recorder())
        committed = threading.Event()

        def commit_meanwhile() -> None:
            other.join_cluster("h:3")
            other.update_gossip([MetadataOp(key="g", value=b"1")], Scope.SHARD)
            committed.set()

        threading.Thread(target=commit_meanwhile).start()
        assert committed.wait(HANG_GUARD / 2), "a commit waited for another commit's fan-out"
        core.release.set()
        blocked.join(HANG_GUARD)
    finally:
        core.release.set()
        cluster.close()


def test_a_thread_open_node_starts_may_use_the_cluster_as_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A starting thread can run code that needs the cluster (a finalizer the garbage collector ran
    there did, and the suite hung): open_node must not start its node's threads under the lock."""
    cluster = InProcessCluster()
    holder = cluster.open_node(NodeId("holder"), Recorder())
    holder.join_cluster("h:1")
    start = threading.Thread.start
    blocked: list[str] = []

    def start_after_using_the_cluster(thread: threading.Thread) -> None:
        if thread.name.startswith("cluster-"):  # the node's callback and heartbeat threads
            user = threading.Thread(target=cluster.renew, args=(NodeId("holder"),))
            start(user)
            user.join(HANG_GUARD)
            if user.is_alive():
                blocked.append(thread.name)
        start(thread)

    try:
        monkeypatch.setattr(threading.Thread, "start", start_after_using_the_cluster)
        node = cluster.open_node(NodeId("n"), Recorder())
        monkeypatch.undo()
        assert node.join_cluster("h:2")
        assert blocked == []
    finally:
        monkeypatch.undo()
        cluster.close()


def test_journal_is_compacted_and_restores_the_same_state(tmp_path: Path) -> None:
    cluster = InProcessCluster(data_dir=tmp_path, compact_after=8)
    try:
        node = cluster.open_node(NodeId("n1"), Recorder())
        node.join_cluster("h:1")
        known: Revision | None = None
        for i in range(40):
            known = node.update_shard_log([MetadataOp(key="k", value=str(i).encode(), expected=known)])
        node.update_gossip([MetadataOp(key="g", value=b"x")], Scope.GLOBAL)
        assert cluster.journal_generation >= 4
        journals = list(tmp_path.glob("journal-*.log"))
        assert len(journals) == 1 and len(journals[0].read_text().splitlines()) < 8
        before = cluster._model.snapshot(), dict(cluster._model.shard_logs), dict(cluster._model.gossip)
        cluster.restart()
        after = cluster._model.snapshot(), dict(cluster._model.shard_logs), dict(cluster._model.gossip)
        assert after == before
        assert known is not None and node.update_shard_log([MetadataOp(key="k", value=b"after",
                                                                       expected=known)]) > known
    finally:
        cluster.close()


def test_a_member_journaled_fail_returns_to_ok_when_it_renews_after_a_restart(tmp_path: Path) -> None:
    cluster = InProcessCluster(FailurePolicy(heartbeat_interval=0.05, fail_after=0.1), data_dir=tmp_path)
    try:
        core = Recorder()
        node = cluster.open_node(NodeId("n1"), core, autorenew=False)
        node.join_cluster("h:1")

        def state_of_n1() -> NodeState | None:
            latest = core.snapshots[-1][1] if core.snapshots else None
            states = [] if latest is None else [n.state for s in latest.shards.values() for n in s
                                                if n.node_id == "n1"]
            return states[0] if states else None

        wait_until(core, lambda: state_of_n1() is NodeState.FAIL)  # silent: FAIL is journaled
        cluster.restart()
        assert cluster._model.members[NodeId("n1")].state is NodeState.FAIL, "a restart resurrects nobody"
        seen = len(core.snapshots)
        node.renew()
        wait_until(core, lambda: len(core.snapshots) > seen)
        assert state_of_n1() is NodeState.OK
    finally:
        cluster.close()


def wait_until(core: Recorder, predicate: Callable[[], bool]) -> None:
    with core._cond:
        assert core._cond.wait_for(predicate, HANG_GUARD), "the awaited notification never came"


SLOW_POLICY = FailurePolicy(heartbeat_interval=1.0, fail_after=60.0)
"""No verdict within a test: every journal line is one of the test's own operations."""


def test_lines_replayed_at_a_restart_count_toward_the_next_compaction(tmp_path: Path) -> None:
    cluster = InProcessCluster(SLOW_POLICY, data_dir=tmp_path, compact_after=8)
    try:
        node = cluster.open_node(NodeId("n1"), Recorder(), autorenew=False)
        node.join_cluster("h:1")
        for i in range(5):
            node.update_gossip([MetadataOp(key=f"before{i}", value=b"x")], Scope.GLOBAL)
        assert cluster.journal_generation == 0  # six lines
        cluster.restart()
        for i in range(2):
            node.update_gossip([MetadataOp(key=f"after{i}", value=b"x")], Scope.GLOBAL)
        assert cluster.journal_generation == 1  # the eighth line compacted, counting the six replayed
    finally:
        cluster.close()


def test_a_torn_last_journal_line_was_never_acknowledged_and_is_not_replayed(tmp_path: Path) -> None:
    cluster = InProcessCluster(SLOW_POLICY, data_dir=tmp_path)
    try:
        node = cluster.open_node(NodeId("n1"), Recorder(), autorenew=False)
        node.join_cluster("h:1")
        node.update_gossip([MetadataOp(key="g", value=b"x")], Scope.GLOBAL)
        before = cluster._model.snapshot(), dict(cluster._model.gossip)
        (journal,) = tmp_path.glob("journal-*.log")
        with open(journal, "a", encoding="utf-8") as torn:
            torn.write('["update_gossip", [')  # a crash in the middle of an append
        cluster.restart()
        assert (cluster._model.snapshot(), dict(cluster._model.gossip)) == before
    finally:
        cluster.close()


class _Mailbox:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def start(self) -> None:
        """Nothing to start."""

    def post(self, event: Event) -> None:
        self.events.append(event)

    def close(self, timeout: float = 5.0) -> None:
        """Nothing to stop."""


def test_every_outage_is_reported_once_even_after_a_recovery() -> None:
    renewals: list[float | ProviderUnavailable] = [
        ProviderUnavailable("down"), ProviderUnavailable("still down"), 0.5, ProviderUnavailable("down again"), 0.5]
    stopped = threading.Event()
    mailbox = _Mailbox()

    def renew() -> float:
        outcome = renewals.pop(0)
        if not renewals:
            stopped.set()
        if isinstance(outcome, ProviderUnavailable):
            raise outcome
        return outcome

    beats = HeartbeatThread("test-heartbeat", 0.001, renew, mailbox, stopped)
    beats.start()
    beats.join(HANG_GUARD)
    assert mailbox.events == [ClusterDown(), Heartbeat(0.5), ClusterDown(), Heartbeat(0.5)]


def test_a_callback_that_raises_does_not_end_the_nodes_later_notifications() -> None:
    class Flaky(Recorder):
        def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
            super().notify_gossip_update(entries)
            if len(self.gossip) == 1:
                raise RuntimeError("a bug in the Core")

    core = Flaky()
    mailbox = Dispatcher("n1", core)
    mailbox.start()
    try:
        mailbox.post(GossipUpdate(entries=()))
        mailbox.post(GossipUpdate(entries=()))
        with core._cond:
            assert core._cond.wait_for(lambda: len(core.gossip) == 2, HANG_GUARD)
    finally:
        mailbox.close()


def test_a_renewal_of_a_node_that_is_no_member_is_not_held() -> None:
    """Handles renew from the moment they open: only members' renewals are kept, so opening and closing
    handles never makes the detector hold more (checked with the clock stopped: no tick prunes)."""
    clock = DetectorClock()
    clock.stop()
    cluster = InProcessCluster(SLOW_POLICY, clock=clock)
    try:
        for i in range(3):
            cluster.open_node(NodeId(f"visitor{i}"), Recorder(), autorenew=False).renew()
        assert cluster.judged_nodes == 0
    finally:
        cluster.close()


def test_a_handle_opened_after_a_commit_is_not_told_of_it_again() -> None:
    """A commit still in the outbox when a successor handle opens is not the successor's to hear: the
    state it opened on already holds it (nothing is notified twice)."""
    cluster = InProcessCluster(SLOW_POLICY)
    try:
        first = cluster.open_node(NodeId("n1"), Recorder(), autorenew=False)
        first.join_cluster("h:1")
        core = Recorder()
        with cluster._fan_out_lock:  # hold the fan-out: the next commit's notification waits in the outbox
            first.update_shard_log([MetadataOp(key="before", value=b"v")])
            successor = cluster.open_node(NodeId("n1"), core, takeover=first.takeover_token, autorenew=False)
        successor.update_shard_log([MetadataOp(key="after", value=b"w")])
        wait_until(core, lambda: bool(core.shard_log))
        assert [e.key for e in core.shard_log[0][1]] == ["after"]
    finally:
        cluster.close()
