"""Hypothesis stateful check: the in-process backend, driven through its public node handles with
real threads, returns what the model returns and delivers to every node exactly the model's
notifications in the model's order."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Sequence

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from reference.cluster.memory import InProcessCluster, InProcessNode
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import ClusterError
from spec.cluster.model import ClusterModel, GossipUpdate, MembershipUpdate, Notification, ShardLogUpdate
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, Revision, Scope, ShardId

NAMES = [NodeId(n) for n in ("n0", "n1", "n2", "n3")]
KEYS = ("k0", "k1", "k2")
# Health never changes during a run, so the model (which has no clock) stays comparable.
QUIET = FailurePolicy(heartbeat_interval=0.05, fail_after=600.0)


class Log:
    """A Core that keeps notifications in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.notes: list[Notification] = []

    def _add(self, note: Notification) -> None:
        with self.lock:
            self.notes.append(note)

    def update_membership(self, snapshot: Membership) -> None:
        self._add(MembershipUpdate(snapshot=snapshot))

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        self._add(GossipUpdate(entries=tuple(entries)))

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        self._add(ShardLogUpdate(shard=shard, entries=tuple(entries)))

    def cluster_heartbeat(self, ttl: float) -> None:
        pass

    def cluster_down(self) -> None:
        self._add(MembershipUpdate(snapshot=Membership(epoch=-1,
                                                       shards={})))  # never expected: makes the comparison fail


class ProviderMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = InProcessCluster(QUIET)
        self.model = ClusterModel()
        self.logs = {n: Log() for n in NAMES}
        self.nodes: dict[NodeId, InProcessNode] = {n: self.cluster.open_node(n, self.logs[n]) for n in NAMES}
        for name, node in self.nodes.items():
            self.model.claim(name, node.takeover_token)
        self.expected: dict[NodeId, list[Notification]] = {n: [] for n in NAMES}

    def both(self, actual: Callable[[], Any], expected: Callable[[Any], Any]) -> None:
        """Run on the backend, then the model with the backend's result; errors must match."""
        try:
            result = actual()
        except ClusterError as exc:
            try:
                expected(None)
            except ClusterError as model_exc:
                assert type(exc) is type(model_exc), (exc, model_exc)
                return
            raise AssertionError(f"backend raised {exc!r}, model succeeded")
        out = expected(result)
        deliveries, model_result = (out[1], out[0]) if isinstance(out, tuple) else (out, None)
        if model_result is not None:
            assert result == model_result
        for recipient, note in self.model.told(deliveries):
            self.expected[recipient].append(note)

    def current(self, node: NodeId, key: str, gossip: bool) -> Revision | None:
        if gossip:
            g = self.model.gossip.get(key)
            return None if g is None else g.entry.revision
        member = self.model.members.get(node)
        entry = None if member is None else self.model.shard_logs[member.shard].get(key)
        return None if entry is None else entry.revision

    @rule(node=st.sampled_from(NAMES))
    def join_cluster(self, node: NodeId) -> None:
        self.both(lambda: self.nodes[node].join_cluster(f"{node}:1"),
                  lambda shard: self.model.join_cluster(node, f"{node}:1", shard or ShardId("x")))

    @rule(node=st.sampled_from(NAMES), other=st.sampled_from(NAMES))
    def join_shard_of(self, node: NodeId, other: NodeId) -> None:
        member = self.model.members.get(other)
        shard = member.shard if member else ShardId("missing")
        self.both(lambda: self.nodes[node].join_shard(shard), lambda _: self.model.join_shard(node, shard))

    @rule(requester=st.sampled_from(NAMES), node=st.sampled_from(NAMES))
    def remove_from_shard(self, requester: NodeId, node: NodeId) -> None:
        self.both(lambda: self.nodes[requester].remove_from_shard(node),
                  lambda shard: self.model.remove_from_shard(requester, node, shard or ShardId("x")))

    @rule(requester=st.sampled_from(NAMES), node=st.sampled_from(NAMES))
    def remove_from_cluster(self, requester: NodeId, node: NodeId) -> None:
        self.both(lambda: self.nodes[requester].remove_from_cluster(node),
                  lambda _: self.model.remove_from_cluster(requester, node))

    @rule(node=st.sampled_from(NAMES), keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
          value=st.binary(max_size=4), fresh=st.booleans(), gossip=st.booleans(),
          scope=st.sampled_from(Scope))
    def update(self, node: NodeId, keys: list[str], value: bytes, fresh: bool, gossip: bool, scope: Scope) -> None:
        """``fresh``: CAS at the current revisions (should commit); else inserts (may conflict)."""
        ops = [MetadataOp(key=k, value=value, expected=self.current(node, k, gossip) if fresh else None) for k in keys]
        if gossip:
            self.both(lambda: self.nodes[node].update_gossip(ops, scope),
                      lambda _: self.model.update_gossip(node, ops, scope))
        else:
            self.both(lambda: self.nodes[node].update_shard_log(ops),
                      lambda _: self.model.update_shard_log(node, ops))

    @rule(node=st.sampled_from(NAMES), guess=st.sampled_from(["", "not-the-token"]))
    def impersonate(self, node: NodeId, guess: str) -> None:
        """A second claimant of a live id is refused by both, and the holder is not disturbed."""
        self.both(lambda: self.cluster.open_node(node, Log(), takeover=guess or None),
                  lambda _: self.model.claim(node, "impostor", guess or None))
        assert self.cluster._model.sessions == self.model.sessions

    @invariant()
    def snapshots_well_formed(self) -> None:
        self.model.snapshot().check_well_formed()

    def teardown(self) -> None:
        try:
            deadline = time.monotonic() + 10.0
            for node in NAMES:
                while time.monotonic() < deadline:
                    with self.logs[node].lock:
                        if len(self.logs[node].notes) >= len(self.expected[node]):
                            break
                    time.sleep(0.005)
                with self.logs[node].lock:
                    assert self.logs[node].notes == self.expected[node], node
        finally:
            self.cluster.close()


TestProviderMatchesModel = ProviderMatchesModel.TestCase
