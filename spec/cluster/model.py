"""The sequential specification of a cluster provider: the oracle every backend is judged by.

One global commit counter orders every change (membership, health, batches); each shard log is a
CAS register per key; a batch commits all of its ops at one revision or none; gossip is one
CAS store whose entries reach at least their scope. Each operation returns the notifications the
provider owes, as ``(recipient, notification)`` pairs in delivery order, except membership: a
change of membership is owed to every member, so it is returned once, as a
:class:`MembershipChange` (one member's record after the commit), not as a snapshot per member;
providers keep a :class:`MembershipView` to tell each Core the snapshot it shows (or send the
change itself, as the cluster service's MEMBERSHIP_DELTA does), and :meth:`ClusterModel.told`
spells a result out per recipient. So a join costs the model the same at 10 or 10,000 members;
indexes (the members of each shard) replace scans. The in-process backend runs this machine under
a lock; the conformance suite and the stateful tests compare backends with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Container, Iterable, Sequence

from spec.cluster.errors import ClusterFull, NodeIdInUse, NotAMember, RevisionMismatch, UnknownNode, UnknownShard
from spec.cluster.types import (
    MAX_MEMBERS,
    Entry,
    Membership,
    MetadataOp,
    NodeId,
    NodeInfo,
    NodeState,
    Revision,
    Scope,
    ShardId,
    check_address,
    check_batch,
    check_id,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipUpdate:
    snapshot: Membership


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """What a snapshot shows of one member."""

    shard: ShardId
    address: str
    state: NodeState


@dataclass(frozen=True, slots=True, kw_only=True)
class MembershipChange:
    """One commit's change of membership, at ``epoch``: ``node_id``'s record afterwards (None: it left
    the cluster). Owed to every member at ``epoch`` (sorted by id) and then to ``node_id`` if it is
    no longer one (a removed node hears of its removal): each is owed the snapshot at ``epoch``."""

    epoch: int
    node_id: NodeId
    record: MemberRecord | None


def owed_membership(members: Collection[NodeId], changed: Iterable[NodeId]) -> list[NodeId]:
    """Who is told a run of membership changes (the one home of this rule): every member after them,
    sorted by id, then each node the run ``changed`` that is no longer one (a removed node hears of
    its removal)."""
    return [*sorted(members), *dict.fromkeys(n for n in changed if n not in members)]


class MembershipView:
    """The membership as a sequence of :class:`MembershipChange` builds it, for providers that tell
    many Cores: applying a change is constant work, the snapshot is built once per epoch it is
    asked for (a Core's ``update_membership`` takes a whole snapshot)."""

    def __init__(self, snapshot: Membership | None = None) -> None:
        self.epoch = 0 if snapshot is None else snapshot.epoch
        self.records: dict[NodeId, MemberRecord] = {} if snapshot is None else {
            n.node_id: MemberRecord(shard, n.address, n.state) for shard, nodes in snapshot.shards.items() for n in nodes}
        self._snapshot = snapshot

    def apply(self, change: MembershipChange) -> None:
        if change.record is None:
            self.records.pop(change.node_id, None)
        else:
            self.records[change.node_id] = change.record
        self.epoch = change.epoch
        self._snapshot = None

    def owed(self, node_id: NodeId, changed: Container[NodeId]) -> bool:
        """Whether a run of changes just applied, which changed the nodes ``changed``, is owed to
        ``node_id``: :func:`owed_membership`'s rule for one node, in constant work."""
        return node_id in self.records or node_id in changed

    def snapshot(self) -> Membership:
        if self._snapshot is None:
            self._snapshot = _snapshot(self.epoch, self.records)
        return self._snapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class GossipUpdate:
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardLogUpdate:
    shard: ShardId
    entries: tuple[Entry, ...]


Notification = MembershipUpdate | GossipUpdate | ShardLogUpdate
Delivery = tuple[NodeId, Notification]
Owed = Delivery | MembershipChange
"""What an operation owes: a notification to one recipient, or a membership change owed to every
member (:meth:`ClusterModel.told` spells it out)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinCluster:
    node_id: NodeId
    address: str
    new_shard: ShardId


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveFromCluster:
    requester: NodeId
    node_id: NodeId


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinShard:
    node_id: NodeId
    shard: ShardId


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveFromShard:
    requester: NodeId
    node_id: NodeId
    new_shard: ShardId


@dataclass(frozen=True, slots=True, kw_only=True)
class SetState:
    """The failure detector's verdict on a member."""

    node_id: NodeId
    state: NodeState


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateShardLog:
    node_id: NodeId
    ops: tuple[MetadataOp, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateGossip:
    node_id: NodeId
    ops: tuple[MetadataOp, ...]
    scope: Scope


Operation = JoinCluster | RemoveFromCluster | JoinShard | RemoveFromShard | SetState | UpdateShardLog | UpdateGossip
"""A change asked of the model, as data: what a backend commits, journals and replays
(:meth:`ClusterModel.apply`)."""


@dataclass(slots=True)
class Member:
    """A member's record in the model (what a snapshot reports of it)."""

    address: str
    shard: ShardId
    state: NodeState = NodeState.OK
    shard_since: int = 0
    """The revision that put the member in its shard (a reconnecting node that saw less missed
    the shard's earlier writes)."""

    def record(self) -> MemberRecord:
        return MemberRecord(self.shard, self.address, self.state)


@dataclass(frozen=True, slots=True)
class GossipRecord:
    """A gossip value with the scope it was written for and the writer's shard."""

    entry: Entry
    scope: Scope
    origin: ShardId


@dataclass(slots=True)
class ClusterModel:
    """Pure state; callers supply fresh shard ids (never one in use or used before: the backends
    draw 64 random bits, no request names one) and session tokens so the machine stays
    deterministic.

    ``sessions`` maps a node id to the token of the live handle that claimed it. Sessions are not
    durable state (they are not membership): a handle claims its id when it opens and releases it
    when it ends; membership outlives sessions (a node whose session ended is still a member until
    it is removed, and turns FAIL when nothing renews it).
    """

    revision: int = 0
    members: dict[NodeId, Member] = field(default_factory=dict)
    shard_logs: dict[ShardId, dict[str, Entry]] = field(default_factory=dict)
    gossip: dict[str, GossipRecord] = field(default_factory=dict)
    sessions: dict[NodeId, str] = field(default_factory=dict)
    shard_index: dict[ShardId, set[NodeId]] = field(default_factory=dict)
    """The members of each shard (an index of ``members``, kept by :meth:`_place`)."""

    def __post_init__(self) -> None:
        for node_id, member in self.members.items():
            self.shard_index.setdefault(member.shard, set()).add(node_id)

    # -- queries ---------------------------------------------------------------------------

    def snapshot(self) -> Membership:
        return _snapshot(self.revision, {n: m.record() for n, m in self.members.items()})

    def shard_members(self, shard: ShardId) -> list[NodeId]:
        return sorted(self.shard_index.get(shard, ()))

    def told(self, owed: Iterable[Owed]) -> list[Delivery]:
        """``owed`` (what an operation just returned) per recipient, a membership change as the
        snapshot every recipient is owed; call it right after the operation (the snapshot is now's)."""
        out: list[Delivery] = []
        for item in owed:
            if isinstance(item, MembershipChange):
                note = MembershipUpdate(snapshot=self.snapshot())
                out += [(n, note) for n in owed_membership(self.members, [item.node_id])]
            else:
                out.append(item)
        return out

    def global_gossip(self) -> tuple[Entry, ...]:
        """What a node joining the cluster is shown: its shard is fresh, so no SHARD gossip is its."""
        return tuple(g.entry for _, g in sorted(self.gossip.items()) if g.scope is Scope.GLOBAL)

    def catch_up(self, node_id: NodeId, after: int) -> list[Notification]:
        """What a node that saw every notification up to revision ``after`` needs to be current:
        the membership snapshot, then its shard's log and its visible gossip written after
        ``after`` (the whole log and the shard's gossip if it was moved to its shard since), one
        notification per committed batch (entries sharing a revision), in revision order. Values
        overwritten meanwhile are not replayed: only the winner is."""
        out: list[Notification] = [MembershipUpdate(snapshot=self.snapshot())]
        member = self.members.get(node_id)
        if member is None:
            return out
        moved = member.shard_since > after
        newer: list[tuple[int, Notification]] = []
        log = (e for e in self.shard_logs[member.shard].values() if moved or e.revision > after)
        for revision, entries in _batches(log):
            newer.append((revision, ShardLogUpdate(shard=member.shard, entries=entries)))
        gossip = (g.entry for g in self.gossip.values()
                  if g.scope is Scope.GLOBAL and g.entry.revision > after
                  or g.scope is Scope.SHARD and g.origin == member.shard and (moved or g.entry.revision > after))
        for revision, entries in _batches(gossip):
            newer.append((revision, GossipUpdate(entries=entries)))
        return out + [note for _, note in sorted(newer, key=lambda item: item[0])]

    def apply(self, operation: Operation) -> tuple[Revision, list[Owed]]:
        """Run one operation: the revision the model stands at afterwards (a batch's own) and the
        deliveries it owes."""
        match operation:
            case JoinCluster(node_id=node_id, address=address, new_shard=new_shard):
                deliveries = self.join_cluster(node_id, address, new_shard)
            case RemoveFromCluster(requester=requester, node_id=node_id):
                deliveries = self.remove_from_cluster(requester, node_id)
            case JoinShard(node_id=node_id, shard=shard):
                deliveries = self.join_shard(node_id, shard)
            case RemoveFromShard(requester=requester, node_id=node_id, new_shard=new_shard):
                deliveries = self.remove_from_shard(requester, node_id, new_shard)
            case SetState(node_id=node_id, state=state):
                deliveries = self.set_state(node_id, state)
            case UpdateShardLog(node_id=node_id, ops=ops):
                return self.update_shard_log(node_id, ops)
            case UpdateGossip(node_id=node_id, ops=ops, scope=scope):
                return self.update_gossip(node_id, ops, scope)
        return Revision(self.revision), deliveries

    # -- identity ----------------------------------------------------------------------------

    def claim(self, node_id: NodeId, session: str, takeover: str | None = None) -> str | None:
        """Claim ``node_id`` for ``session``; returns the session it displaced (only with the
        displaced session's own token as ``takeover``). A live id is never taken silently."""
        check_id("node", node_id)
        held = self.sessions.get(node_id)
        if held is not None and takeover != held:
            raise NodeIdInUse(f"node {node_id} is held by a live session; it is free when that session "
                              f"ends, or to the holder of its takeover token")
        self.sessions[node_id] = session
        return held

    def release(self, node_id: NodeId, session: str) -> None:
        """End ``session``'s claim (no-op if it was displaced meanwhile)."""
        if self.sessions.get(node_id) == session:
            del self.sessions[node_id]

    # -- membership ------------------------------------------------------------------------

    def join_cluster(self, node_id: NodeId, address: str, new_shard: ShardId) -> list[Owed]:
        check_id("node", node_id)
        check_id("shard", new_shard)
        check_address(address)
        if node_id in self.members:
            self._leave_shard(node_id)
        elif len(self.members) >= MAX_MEMBERS:
            raise ClusterFull(f"the cluster has {MAX_MEMBERS} members, its bound")
        self.members[node_id] = Member(address, new_shard)
        self._place(node_id, new_shard)
        self.shard_logs[new_shard] = {}
        out = self._commit_membership(node_id)
        self.members[node_id].shard_since = self.revision
        visible = self.global_gossip()
        if visible:
            out.append((node_id, GossipUpdate(entries=visible)))
        return out

    def remove_from_cluster(self, requester: NodeId, node_id: NodeId) -> list[Owed]:
        self._require_member(requester)
        self._require_known(node_id)
        self._leave_shard(node_id)
        del self.members[node_id]
        return self._commit_membership(node_id)

    def join_shard(self, node_id: NodeId, shard: ShardId) -> list[Owed]:
        self._require_member(node_id)
        if shard not in self.shard_logs:
            raise UnknownShard(f"shard {shard} does not exist")
        if self.members[node_id].shard == shard:
            return []
        self._leave_shard(node_id)
        self.members[node_id].shard = shard
        self._place(node_id, shard)
        out = self._commit_membership(node_id)
        self.members[node_id].shard_since = self.revision
        return out + self._catch_up(node_id)

    def remove_from_shard(self, requester: NodeId, node_id: NodeId, new_shard: ShardId) -> list[Owed]:
        self._require_member(requester)
        self._require_known(node_id)
        check_id("shard", new_shard)
        self._leave_shard(node_id)
        self.members[node_id].shard = new_shard
        self._place(node_id, new_shard)
        self.shard_logs[new_shard] = {}
        out = self._commit_membership(node_id)
        self.members[node_id].shard_since = self.revision
        return out

    def set_state(self, node_id: NodeId, state: NodeState) -> list[Owed]:
        """Health verdict of the failure detector; a no-op unless it changes the member's state (the
        one place that decides it: the detector gives every member's verdict on every tick), so an
        idle cluster commits nothing."""
        member = self.members.get(node_id)
        if member is None or member.state is state:
            return []
        member.state = state
        return self._commit_membership(node_id)

    # -- metadata --------------------------------------------------------------------------

    def update_shard_log(self, node_id: NodeId, ops: Sequence[MetadataOp]) -> tuple[Revision, list[Owed]]:
        self._require_member(node_id)
        batch = check_batch(ops)
        shard = self.members[node_id].shard
        log = self.shard_logs[shard]
        for op in batch:
            _compare(op, log.get(op.key))
        revision = self._next_revision()
        entries = tuple(Entry(key=op.key, value=op.value, revision=revision) for op in batch)
        log.update((e.key, e) for e in entries)
        return revision, [(n, ShardLogUpdate(shard=shard, entries=entries)) for n in self.shard_members(shard)]

    def update_gossip(self, node_id: NodeId, ops: Sequence[MetadataOp], scope: Scope) -> tuple[Revision, list[Owed]]:
        self._require_member(node_id)
        batch = check_batch(ops)
        for op in batch:
            current = self.gossip.get(op.key)
            _compare(op, None if current is None else current.entry)
        revision = self._next_revision()
        origin = self.members[node_id].shard
        entries = tuple(Entry(key=op.key, value=op.value, revision=revision) for op in batch)
        self.gossip.update((e.key, GossipRecord(e, scope, origin)) for e in entries)
        recipients = self.shard_members(origin) if scope is Scope.SHARD else sorted(self.members)
        return revision, [(n, GossipUpdate(entries=entries)) for n in recipients]

    # -- internals -------------------------------------------------------------------------

    def _next_revision(self) -> Revision:
        self.revision += 1
        return Revision(self.revision)

    def _commit_membership(self, node_id: NodeId) -> list[Owed]:
        self._next_revision()
        member = self.members.get(node_id)
        return [MembershipChange(epoch=self.revision, node_id=node_id, record=None if member is None else member.record())]

    def _catch_up(self, node_id: NodeId) -> list[Owed]:
        shard = self.members[node_id].shard
        out: list[Owed] = []
        log = tuple(e for _, e in sorted(self.shard_logs[shard].items()))
        if log:
            out.append((node_id, ShardLogUpdate(shard=shard, entries=log)))
        scoped = tuple(g.entry for _, g in sorted(self.gossip.items())
                       if g.scope is Scope.SHARD and g.origin == shard)
        if scoped:
            out.append((node_id, GossipUpdate(entries=scoped)))
        return out

    def _leave_shard(self, node_id: NodeId) -> None:
        """A shard and its log are destroyed with their last member (RFC: JoinShard)."""
        shard = self.members[node_id].shard
        members = self.shard_index[shard]
        members.discard(node_id)
        if not members:
            del self.shard_logs[shard]
            del self.shard_index[shard]

    def _place(self, node_id: NodeId, shard: ShardId) -> None:
        self.shard_index.setdefault(shard, set()).add(node_id)

    def _require_member(self, node_id: NodeId) -> None:
        if node_id not in self.members:
            raise NotAMember(f"node {node_id} is not a member")

    def _require_known(self, node_id: NodeId) -> None:
        if node_id not in self.members:
            raise UnknownNode(f"node {node_id} is not a member")


def _snapshot(epoch: int, records: dict[NodeId, MemberRecord]) -> Membership:
    shards: dict[ShardId, list[NodeInfo]] = {}
    for node_id in sorted(records):
        r = records[node_id]
        shards.setdefault(r.shard, []).append(NodeInfo(node_id=node_id, address=r.address, state=r.state))
    return Membership(epoch=epoch, shards={s: tuple(n) for s, n in sorted(shards.items())})


def _batches(entries: Iterable[Entry]) -> list[tuple[int, tuple[Entry, ...]]]:
    """Entries grouped by the revision that committed them (one group = one batch), sorted."""
    groups: dict[int, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.revision, []).append(entry)
    return [(r, tuple(sorted(groups[r], key=lambda e: e.key))) for r in sorted(groups)]


def _compare(op: MetadataOp, current: Entry | None) -> None:
    """CAS: an insert needs an absent key, an update the key's current revision."""
    actual = None if current is None else current.revision
    if actual != op.expected:
        raise RevisionMismatch(op.key, op.expected, current)
