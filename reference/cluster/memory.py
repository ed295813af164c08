"""The in-process cluster provider (the embedded default): the model under a lock, a failure
detector on a ticker thread, one mailbox per node, and an optional journal for durability.

Costs stay linear in the nodes that must be told: a commit holds the lock only to run the model
and record its notifications in an outbox; the fan-out to the recipients' mailboxes happens after
the lock is released, by one committing thread at a time, in commit order. Commits of inline nodes
(the cluster service's sessions) leave their fan-out to the cluster's own fan-out thread, so the
service's poller goes back to reading instead of telling every member. Inline nodes are told a run
of consecutive membership changes at once (all the fan-out found queued, up to ``MAX_RUN``): when
joins come faster than every member can be told, each member is told them together instead of
falling further behind; other nodes are told every change.

The detector judges only silence it could observe: a reader of renewals (the cluster service)
registers how long renewals may have waited unread in it (:meth:`InProcessCluster.add_reader`),
and each tick subtracts the longest such wait (spec/cluster/detector.py).

The detector reads time only from the cluster's ``clock`` (real monotonic time unless a conformance
harness hands it one it moves by hand: conformance/cluster/clock.py).

With ``data_dir``, every committed operation is journaled before it returns (reference/cluster/
journal.py) and a restart replays it; without, nothing survives the process, as for any embedded
store.
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Final, Protocol, Sequence

from reference.cluster.dispatch import Dispatcher, Heartbeat, InlineMailbox, Mailbox
from reference.cluster.heartbeat import HeartbeatThread
from reference.cluster.ids import new_session_token, new_shard_id
from reference.cluster.journal import Journal
from spec.cluster.detector import FailureDetector, FailurePolicy
from spec.cluster.errors import ProviderClosed
from spec.cluster.interface import ClusterCore, FailureTiming
from spec.cluster.model import (
    ClusterModel,
    JoinCluster,
    JoinShard,
    MembershipChange,
    MembershipUpdate,
    MembershipView,
    Operation,
    Owed,
    owed_membership,
    RemoveFromCluster,
    RemoveFromShard,
    SetState,
    UpdateGossip,
    UpdateShardLog,
)
from spec.cluster.types import MetadataOp, NodeId, NodeState, Revision, Scope, ShardId, check_id


MAX_RUN: Final = 1024
"""The most membership changes an inline node is told at once (one MEMBERSHIP_DELTA: at most ~0.5 MB)."""

DEFAULT_POLICY: Final = FailurePolicy(heartbeat_interval=0.2, fail_after=1.0)
"""Small defaults keep failover fast and the tests quick: PFAIL after 0.5 s, FAIL after 1 s."""


class DetectorTime(Protocol):
    """The failure detector's time. While ``stopped``, its owner moves it (a conformance harness): the
    cluster's ticker leaves the ticks to :meth:`InProcessCluster.judge`, and the owner alone says what
    silence was observable: by its moves, and by the reads it holds (a reader counts only those then)."""

    def now(self) -> float: ...

    @property
    def stopped(self) -> bool: ...


class MonotonicTime:
    """Real time: ``time.monotonic``, never stopped."""

    stopped: Final = False

    def now(self) -> float:
        return time.monotonic()


@dataclass(frozen=True, slots=True)
class _Commit:
    """One commit's notifications, waiting in the outbox for the fan-out; or, after a restart, the
    membership the fan-out's view starts again from."""

    revision: int
    deliveries: list[Owed]
    reset: MembershipView | None = None


class InProcessCluster:
    """A cluster living in this process; ``open_node`` hands out per-node providers."""

    def __init__(self, policy: FailurePolicy = DEFAULT_POLICY, data_dir: Path | None = None,
                 compact_after: int = 10_000, clock: DetectorTime = MonotonicTime()) -> None:
        self.policy = policy
        self._lock = threading.RLock()
        self._nodes: dict[NodeId, InProcessNode] = {}
        self._data_dir = data_dir
        self._compact_after = compact_after
        self._outbox: collections.deque[_Commit] = collections.deque()
        self._clock = clock
        self._fan_out_lock = threading.Lock()
        self._fan_out_wanted = threading.Event()
        self._readers: dict[object, Callable[[], float]] = {}
        self._durable_writes = 0
        self._model, self._detector, self._journal = self._load()
        self._view = MembershipView(self._model.snapshot())
        """The membership as the fan-out has told it (commit order; only the draining thread moves it)."""
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, name="cluster-detector", daemon=True)
        self._ticker.start()
        self._fan_out_thread = threading.Thread(target=self._fan_out_loop, name="cluster-fan-out", daemon=True)
        self._fan_out_thread.start()

    @property
    def timing(self) -> FailureTiming:
        return self.policy.timing()

    @property
    def clock(self) -> DetectorTime:
        """The time this cluster's silences are judged on (its detector's; the cluster service's sessions')."""
        return self._clock

    @property
    def durable_writes(self) -> int:
        """How many committed operations this process has journaled (0 without a journal; a
        conformance harness reports it as its ``durable`` capability)."""
        return self._durable_writes

    @property
    def judged_nodes(self) -> int:
        """How many nodes the failure detector holds a renewal for (a conformance harness reports it
        as its ``held`` capability): after a tick, only members, so what churn leaves behind is bounded by MAX_MEMBERS."""
        with self._lock:
            return len(self._detector.last_renewal)

    @property
    def journal_generation(self) -> int:
        """How many times the journal was compacted (0 without a journal)."""
        return 0 if self._journal is None else self._journal.generation

    def _load(self) -> tuple[ClusterModel, FailureDetector, Journal | None]:
        detector = FailureDetector(self.policy)
        journal = None
        model = ClusterModel()
        if self._data_dir is not None:
            self._data_dir.mkdir(parents=True, exist_ok=True)
            journal = Journal(self._data_dir, self._compact_after)
            model = journal.load()
        now = self._clock.now()
        for node_id, member in model.members.items():
            if member.state is not NodeState.FAIL:  # a fresh period; a FAIL member stays FAIL until it renews
                detector.renew(node_id, now)
        return model, detector, journal

    def open_node(self, node_id: NodeId, core: ClusterCore, *, takeover: str | None = None,
                  autorenew: bool = True, inline: bool = False, resume_after: int | None = None) -> InProcessNode:
        """Claim ``node_id`` and hand out its provider (see ``ClusterBackend.open_node``).

        For the cluster service: ``autorenew=False`` leaves renewals to the caller, ``inline``
        delivers on the fan-out thread (``core`` must not block) and leaves the node's commits'
        fan-out to the cluster's fan-out thread, and ``resume_after`` first
        notifies what a node that saw everything up to that revision missed.
        """
        check_id("node", node_id)
        session = new_session_token()
        with self._lock:
            displaced_token = self._model.claim(node_id, session, takeover)
            displaced = self._nodes.get(node_id) if displaced_token is not None else None
            node = InProcessNode(self, node_id, core, session, self._model.revision,
                                 autorenew=autorenew, inline=inline)
            self._nodes[node_id] = node
            if resume_after is not None:
                for notification in self._model.catch_up(node_id, resume_after):
                    node.mailbox.post(notification)
        node.start()  # after the lock: a starting thread may need it (a finalizer the collector runs there did)
        if displaced is not None:
            displaced.close()
        return node

    def add_reader(self, reader: object, unread_for: Callable[[], float]) -> None:
        """Register a reader of renewals (a cluster service): ``unread_for`` says how long renewals
        may have been waiting unread in it, time the detector does not count as silence."""
        with self._lock:
            self._readers[reader] = unread_for

    def remove_reader(self, reader: object) -> None:
        with self._lock:
            self._readers.pop(reader, None)

    def restart(self) -> None:
        """Drop the in-memory state and rebuild it from the journal, as a process restart would;
        the open handles (and so their claims) stay."""
        with self._lock:
            sessions = self._model.sessions
            if self._journal is not None:
                self._journal.close()
            self._model, self._detector, self._journal = self._load()
            self._model.sessions = sessions
            self._outbox.append(_Commit(self._model.revision, [], reset=MembershipView(self._model.snapshot())))

    def close(self) -> None:
        self._stop.set()
        self._fan_out_wanted.set()
        self._ticker.join(5.0)
        self._fan_out_thread.join(5.0)
        with self._lock:
            nodes = list(self._nodes.values())
        for node in nodes:
            node.close()
        if self._journal is not None:
            self._journal.close()

    # -- used by node handles --------------------------------------------------------------

    def commit(self, operation: Operation, *, fan_out_here: bool = True) -> Revision:
        """Run one operation atomically; its notifications go out after the lock is released, on
        this thread or (``fan_out_here=False``) on the cluster's fan-out thread. Returns the
        revision it left the model at (a batch's own)."""
        with self._lock:
            revision = self._apply(operation)
        if fan_out_here:
            self._fan_out()
        else:
            self._fan_out_wanted.set()
        return revision

    def _apply(self, operation: Operation) -> Revision:
        """Under the lock: run ``operation`` on the model and :meth:`_record` it."""
        before = self._model.revision
        revision, deliveries = self._model.apply(operation)
        self._record(before, deliveries, lambda: operation)
        return revision

    def _record(self, before: int, deliveries: list[Owed], operation: Callable[[], Operation]) -> None:
        """Under the lock, after the model ran an operation: if it committed (the revision moved from
        ``before``), journal it and queue its notifications. What commits nothing (a verdict equal to
        the member's state, JoinShard into the own shard) writes nothing: an idle cluster is silent.
        ``operation`` builds the operation only then (a tick runs the model once per member)."""
        if self._model.revision == before:
            return
        committed = operation()
        if self._journal is not None:
            self._journal.append(committed, self._model)
            self._durable_writes += 1
        if deliveries:
            self._outbox.append(_Commit(self._model.revision, deliveries))
        if isinstance(committed, JoinCluster):
            self._detector.renew(committed.node_id, self._clock.now())

    def _fan_out(self) -> None:
        """Drain the outbox in commit order; one thread drains at a time, the others go on (the
        drainer picks up what they added before it lets go)."""
        while self._outbox:
            if not self._fan_out_lock.acquire(blocking=False):
                return
            try:
                run: list[tuple[MembershipChange, int]] = []
                while self._outbox:
                    commit = self._outbox.popleft()
                    if commit.reset is not None:
                        self._tell_membership(run)
                        self._view = commit.reset
                    nodes = self._nodes
                    for owed in commit.deliveries:
                        if isinstance(owed, MembershipChange):
                            run.append((owed, commit.revision))
                            if owed.record is None or len(run) >= MAX_RUN:  # a removed node hears its removal last
                                self._tell_membership(run)
                            continue
                        self._tell_membership(run)
                        recipient, notification = owed
                        node = nodes.get(recipient)
                        if node is not None and commit.revision > node.attached_at:
                            node.mailbox.post(notification)
                self._tell_membership(run)
            finally:
                self._fan_out_lock.release()

    def _tell_membership(self, run: list[tuple[MembershipChange, int]]) -> None:
        """Move the view by the ``run`` of (change, revision) and tell the attached nodes they are
        owed to: other nodes each change's snapshot, inline nodes the run at once. The fewer of the
        handles and the members are walked: telling costs the nodes told, not the cluster. Empties
        ``run``."""
        if not run:
            return
        view = self._view
        base = view.epoch
        handles = list(self._nodes.values())  # the poller may open a node meanwhile
        dispatched = [n for n in handles if n.inline_mailbox is None]
        for change, revision in run:
            view.apply(change)
            for node in dispatched:
                if revision > node.attached_at and view.owed(node.node_id, (change.node_id,)):
                    node.mailbox.post(MembershipUpdate(snapshot=view.snapshot()))
        changes = [change for change, _ in run]
        subjects = {change.node_id for change in changes}
        last = run[-1][1]
        run.clear()
        if len(handles) > len(view.records) + len(subjects):
            handles = [n for n in map(self._nodes.get, owed_membership(view.records, subjects)) if n is not None]
        for node in handles:
            inline = node.inline_mailbox
            if inline is not None and last > node.attached_at and view.owed(node.node_id, subjects):
                inline.post_membership(changes, base, view)

    def renew(self, node_id: NodeId) -> None:
        with self._lock:
            if node_id in self._model.members:
                self._detector.renew(node_id, self._clock.now())

    def detach(self, node: InProcessNode) -> None:
        """A handle ended: its session releases the node id."""
        with self._lock:
            self._model.release(node.node_id, node.takeover_token)
            if self._nodes.get(node.node_id) is node:
                del self._nodes[node.node_id]

    def _fan_out_loop(self) -> None:
        while not self._stop.is_set():
            self._fan_out_wanted.wait()
            self._fan_out_wanted.clear()
            self._fan_out()

    def _tick_loop(self) -> None:
        while not self._stop.wait(self.policy.check_interval):
            with self._lock:
                if not self._clock.stopped:
                    self._tick()
            self._fan_out()

    def _tick(self) -> None:
        """Under the lock: one detector tick over the members, every verdict put to the model in the
        same hold (so none meets a member that rejoined or left since); those that change nothing
        commit nothing. A stopped clock is the test's: its moves and held reads decide what was observable."""
        unread_for = max((r() for r in self._readers.values()), default=0.0)
        for node_id, state in self._detector.tick(self._clock.now(), self._model.members, unread_for).items():
            before = self._model.revision
            deliveries = self._model.set_state(node_id, state)
            self._record(before, deliveries, functools.partial(SetState, node_id=node_id, state=state))

    def judge(self) -> None:
        """One detector tick now, its verdicts committed and their notifications out before this
        returns: what the ticker does every ``check_interval`` while the clock runs, and what the
        owner of a stopped clock calls after each move."""
        with self._lock:
            self._tick()
        self._fan_out()


class InProcessNode:
    """One node's provider on an :class:`InProcessCluster`."""

    def __init__(self, cluster: InProcessCluster, node_id: NodeId, core: ClusterCore, session: str,
                 attached_at: int, *, autorenew: bool, inline: bool) -> None:
        self._cluster = cluster
        self._node_id = node_id
        self._session = session
        self.attached_at = attached_at
        """The revision at which this handle was opened: earlier commits are not its to hear."""
        self.inline_mailbox = InlineMailbox(core) if inline else None
        """Set for an inline node: membership changes reach it in runs (:meth:`InProcessCluster._fan_out`)."""
        self.mailbox: Mailbox = self.inline_mailbox or Dispatcher(node_id, core)
        self._closed = threading.Event()
        self._heartbeats = HeartbeatThread(f"cluster-heartbeat {node_id}", cluster.policy.heartbeat_interval,
                                           self.renew, self.mailbox, self._closed) if autorenew else None

    def start(self) -> None:
        """Start delivering and renewing (the cluster calls it once the node is registered)."""
        self.mailbox.start()
        if self._heartbeats is not None:
            self._heartbeats.start()

    @property
    def node_id(self) -> NodeId:
        return self._node_id

    @property
    def timing(self) -> FailureTiming:
        return self._cluster.timing

    @property
    def takeover_token(self) -> str:
        return self._session

    def renew(self) -> float:
        """Renew this node's liveness; returns the TTL the Core may count on."""
        self._check_open()
        self._cluster.renew(self._node_id)
        return self.timing.ttl

    def _commit(self, operation: Operation) -> Revision:
        self._check_open()
        return self._cluster.commit(operation, fan_out_here=self.inline_mailbox is None)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise ProviderClosed(f"node {self._node_id} was closed")

    def join_cluster(self, address: str) -> ShardId:
        shard = new_shard_id()
        self._commit(JoinCluster(node_id=self._node_id, address=address, new_shard=shard))
        self.mailbox.post(Heartbeat(self.timing.ttl))
        return shard

    def remove_from_cluster(self, node_id: NodeId) -> None:
        self._commit(RemoveFromCluster(requester=self._node_id, node_id=node_id))

    def join_shard(self, shard_id: ShardId) -> None:
        self._commit(JoinShard(node_id=self._node_id, shard=shard_id))

    def remove_from_shard(self, node_id: NodeId) -> ShardId:
        shard = new_shard_id()
        self._commit(RemoveFromShard(requester=self._node_id, node_id=node_id, new_shard=shard))
        return shard

    def update_gossip(self, ops: Sequence[MetadataOp], scope: Scope) -> Revision:
        return self._commit(UpdateGossip(node_id=self._node_id, ops=tuple(ops), scope=scope))

    def update_shard_log(self, ops: Sequence[MetadataOp]) -> Revision:
        return self._commit(UpdateShardLog(node_id=self._node_id, ops=tuple(ops)))

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._cluster.detach(self)
        self.mailbox.close()
        if self._heartbeats is not None:
            self._heartbeats.join(5.0)
