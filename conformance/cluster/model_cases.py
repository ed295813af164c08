"""Cases judged against the model (spec/cluster/model.py) in delivery order: every member is a raw
connection to the service (so it renews only when the case says, and keeps its session while it is
PFAIL or FAIL on a stopped clock) that records each shard-log and gossip notification together with the
membership it had been told when it arrived; the same operations run on a :class:`ClusterModel` fed
the target's shard ids, whose deliveries, spelled out per recipient (``ClusterModel.told``,
``ClusterModel.catch_up``), are what each member must have seen, in the same order.

Judged on this case's own nodes and keys (a service shared with earlier cases shows their nodes and
GLOBAL gossip too); revisions are compared by their order, not their numbers (the target's counter
also counts other cases' commits); membership is judged as the view a node holds when a data
notification reaches it and at the end (a service may tell consecutive membership changes in one
delta).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from conformance.cluster.harness import ClusterTarget, session, stopped_clock, verdict
from conformance.cluster.service_wire import RawConnection, ServiceAddress
from conformance.framework import CaseContext, CaseTimeout, Verdict
from spec.cluster import wire
from spec.cluster.errors import RevisionMismatch
from spec.cluster.model import (
    ClusterModel,
    GossipUpdate,
    JoinCluster,
    JoinShard,
    MembershipUpdate,
    MemberRecord,
    Notification,
    Operation,
    RemoveFromCluster,
    RemoveFromShard,
    SetState,
    ShardLogUpdate,
    UpdateGossip,
    UpdateShardLog,
)
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, NodeState, Revision, Scope, ShardId
from spec.cluster.wire import ServiceKind, ServiceMessage

JUDGED_WITHIN = 5.0
"""How long the members together may take to receive what the model owes them (a miss costs this)."""

Data = tuple[str, str, tuple[tuple[str, bytes], ...]]
"""("log", shard, entries) or ("gossip", "", entries): one notification, entries by key."""
View = tuple[tuple[str, str, str, str], ...]
"""The case's members as a node was told them: (node, shard, address, state), by node."""
Seen = tuple[Data, View]


def _data(kind: str, shard: str, entries: tuple[Entry, ...] | list[Entry], tag: str) -> Data | None:
    mine = sorted((e.key, bytes(e.value)) for e in entries if e.key.startswith(tag))
    return (kind, shard, tuple(mine)) if mine else None


def _view(records: dict[NodeId, MemberRecord], tag: str) -> View:
    return tuple(sorted((n, r.shard, r.address, r.state.value) for n, r in records.items() if n.startswith(tag)))


def _records(snapshot: Membership) -> dict[NodeId, MemberRecord]:
    return {n.node_id: MemberRecord(shard, n.address, n.state) for shard, nodes in snapshot.shards.items() for n in nodes}


class Member:
    """One node on its own connection: what it was notified, in delivery order."""

    def __init__(self, address: ServiceAddress, node_id: NodeId, tag: str) -> None:
        self.raw = RawConnection(address)
        self.id, self.tag = node_id, tag
        self.epoch: int | None = None
        self.records: dict[NodeId, MemberRecord] = {}
        self.seen: list[Seen] = []
        self.problems: list[str] = []
        self.token = ""
        self.shard = ShardId("")
        self._next = 2

    def view(self) -> View:
        return _view(self.records, self.tag)

    def _event(self, message: ServiceMessage) -> None:
        p = message.payload
        if message.kind is ServiceKind.MEMBERSHIP:
            snapshot = wire.membership_from_wire(p)
            self.epoch, self.records = snapshot.epoch, _records(snapshot)
        elif message.kind is ServiceKind.MEMBERSHIP_DELTA:
            base, changes = wire.membership_changes_from_wire(p)
            if base != self.epoch:
                self.problems.append(f"a MEMBERSHIP_DELTA on epoch {base} reached a node told epoch {self.epoch}")
            for change in changes:
                if change.record is None:
                    self.records.pop(change.node_id, None)
                else:
                    self.records[change.node_id] = change.record
            self.epoch = p["epoch"]
        elif message.kind in (ServiceKind.GOSSIP_UPDATE, ServiceKind.SHARD_LOG_UPDATE):
            log = message.kind is ServiceKind.SHARD_LOG_UPDATE
            data = _data("log" if log else "gossip", p["shard_id"] if log else "", wire.entries_from_wire(p["entries"]),
                         self.tag)
            if data is not None:
                self.seen.append((data, self.view()))

    def _read(self) -> ServiceMessage:
        message = self.raw.read()
        if message is None:
            raise CaseTimeout(f"the service closed {self.id}'s connection")
        if message.request_id == 0:
            self._event(message)
        return message

    def hello(self, takeover: str = "", resume_after: int | None = None, ignored_after: int = 0) -> None:
        """HELLO resuming after ``resume_after`` (None: not resuming, the frame's revision ``ignored_after``)."""
        resume = resume_after is not None
        self.raw.send(wire.encode(ServiceKind.HELLO, 1, node_id=self.id, secret=self.raw.address.secret,
                                  takeover=takeover, resume=resume, resume_after=resume_after if resume else ignored_after))
        while (message := self._read()).request_id != 1:
            pass
        if message.kind is not ServiceKind.WELCOME:
            raise CaseTimeout(f"{self.id}'s HELLO was answered {message.kind.name} {message.payload}")
        self.token = message.payload["session"]

    def call(self, kind: ServiceKind, **payload: Any) -> ServiceMessage:
        """Send one request; its reply (the events before it recorded)."""
        request_id, self._next = self._next, self._next + 1
        self.raw.request(kind, request_id, **payload)
        while (message := self._read()).request_id != request_id:
            pass
        return message

    def until(self, what: str, done: Callable[[], bool]) -> None:
        """Read events until ``done`` (CaseTimeout naming ``what`` when the connection stays quiet)."""
        try:
            while not done():
                self._read()
        except CaseTimeout as quiet:
            raise CaseTimeout(f"{self.id}: waited for {what} ({quiet})") from None


@dataclass
class Mirror:
    """The model run on the same operations, and what each recipient is owed, in order."""

    tag: str
    model: ClusterModel = field(default_factory=ClusterModel)
    owed: dict[NodeId, list[Seen]] = field(default_factory=dict)
    views: dict[NodeId, View] = field(default_factory=dict)
    revisions: dict[int, int] = field(default_factory=lambda: {0: 0})
    """The target's revision of each batch -> the model's (0: none, for either)."""

    def apply(self, operation: Operation) -> int:
        revision, owed = self.model.apply(operation)
        self._deliver(self.model.told(owed))
        return revision

    def resumed(self, node: NodeId, after: int) -> None:
        """``node`` starts a new session resuming after the target's revision ``after``."""
        self.owed[node] = []
        self._deliver([(node, note) for note in self.model.catch_up(node, self.revisions[after])])

    def taken_over(self, node: NodeId) -> None:
        """``node`` starts a new session without resuming: nothing is owed it until the next change, and it
        holds no membership until it is told one."""
        self.owed[node], self.views[node] = [], ()

    def _deliver(self, deliveries: list[tuple[NodeId, Notification]]) -> None:
        for node, note in deliveries:
            if isinstance(note, MembershipUpdate):
                self.views[node] = _view(_records(note.snapshot), self.tag)
                continue
            data = _data("log", note.shard, note.entries, self.tag) if isinstance(note, ShardLogUpdate) else \
                _data("gossip", "", note.entries, self.tag)
            if data is not None:
                self.owed.setdefault(node, []).append((data, self.views.get(node, ())))

    def expected_op(self, key: str, value: bytes, expected: int | None) -> MetadataOp:
        return MetadataOp(key=key, value=value, expected=None if expected is None else Revision(self.revisions[expected]))


class Scenario:
    """The case's members and the mirror, with each operation done on both."""

    def __init__(self, address: ServiceAddress, tag: str, limits: tuple[int, int], advance: Callable[[int], None],
                 restart: Callable[[], None]):
        self.address, self.tag = address, tag
        self._restart = restart
        self.mirror = Mirror(tag)
        self.members: dict[str, Member] = {}
        self.pfail_ms, self.fail_ms = limits
        self._advance = advance
        self.now = 0
        self.renewed: dict[NodeId, int] = {}
        self.problems: list[str] = []
        self.shard_keys: set[str] = set()
        """The keys written as SHARD gossip (a provider may deliver them beyond their shard)."""

    @property
    def latest(self) -> int:
        """The target's revision of the last batch written."""
        return max(self.mirror.revisions)

    def key(self, name: str) -> str:
        return f"{self.tag}:{name}"

    def join(self, name: str, address: str) -> Member:
        member = self.members.get(name)
        if member is None:
            member = self.members[name] = Member(self.address, NodeId(f"{self.tag}-{name}"), self.tag)
            member.hello()
        reply = member.call(ServiceKind.JOIN_CLUSTER, address=address)
        if reply.kind is not ServiceKind.SHARD:
            raise CaseTimeout(f"{name}'s JOIN_CLUSTER was answered {reply.kind.name} {reply.payload}")
        member.shard = ShardId(reply.payload["shard_id"])
        self.mirror.apply(JoinCluster(node_id=member.id, address=address, new_shard=member.shard))
        self.renewed[member.id] = self.now
        return member

    def write(self, writer: Member, name: str, value: bytes, scope: Scope | None = None,
              expected: int | None = None) -> int:
        """A one-op batch: :meth:`batch`."""
        return self.batch(writer, [(name, value, expected)], scope)

    def batch(self, writer: Member, ops: list[tuple[str, bytes, int | None]], scope: Scope | None = None) -> int:
        """A batch of ``(name, value, expected target revision)`` ops, in the order given (``scope`` None:
        the shard log); the target's revision, or 0 when refused by CAS (then the model must refuse it too,
        and the reply must name the current entry of the key it names)."""
        keys = [self.key(name) for name, _, _ in ops]
        if scope is Scope.SHARD:
            self.shard_keys.update(keys)
        wired = [{"key": key, "value": value, "expected": expected or 0} for key, (_, value, expected) in zip(keys, ops)]
        reply = writer.call(ServiceKind.UPDATE_SHARD_LOG, ops=wired) if scope is None else \
            writer.call(ServiceKind.UPDATE_GOSSIP, scope=scope.value, ops=wired)
        model_ops = tuple(self.mirror.expected_op(key, value, expected) for key, (_, value, expected) in zip(keys, ops))
        operation: Operation = UpdateShardLog(node_id=writer.id, ops=model_ops) if scope is None else \
            UpdateGossip(node_id=writer.id, ops=model_ops, scope=scope)
        where = f"{'the shard log' if scope is None else f'{scope.value} gossip'}: {[n for n, _, _ in ops]}"
        try:
            revision = self.mirror.apply(operation)
        except RevisionMismatch as refused:
            if reply.kind is not ServiceKind.CAS_ERROR:
                self.problems.append(f"{where} was answered {reply.kind.name}, the model refuses it ({refused})")
                return 0
            actual = wire.cas_actual_from_wire(reply.payload)
            found = None if actual is None else (self.mirror.revisions.get(actual.revision), actual.value)
            current = None if refused.actual is None else (refused.actual.revision, refused.actual.value)
            if reply.payload["key"] != refused.key or found != current:
                self.problems.append(f"{where}: the CAS_ERROR names {reply.payload['key']} at {actual}, not "
                                     f"{refused.key}'s current entry")
            return 0
        if reply.kind is not ServiceKind.REVISION:
            self.problems.append(f"{where} was answered {reply.kind.name} {reply.payload}, the model takes it")
            return 0
        self.mirror.revisions[reply.payload["revision"]] = revision
        return int(reply.payload["revision"])

    def join_shard(self, member: Member, shard: ShardId) -> None:
        self._ok(member, member.call(ServiceKind.JOIN_SHARD, shard_id=shard), "JOIN_SHARD")
        member.shard = shard
        self.mirror.apply(JoinShard(node_id=member.id, shard=shard))

    def remove_from_shard(self, requester: Member, member: Member) -> None:
        reply = requester.call(ServiceKind.REMOVE_FROM_SHARD, node_id=member.id)
        self._ok(requester, reply, "REMOVE_FROM_SHARD", ServiceKind.SHARD)
        member.shard = ShardId(reply.payload["shard_id"])
        self.mirror.apply(RemoveFromShard(requester=requester.id, node_id=member.id, new_shard=member.shard))

    def remove_from_cluster(self, requester: Member, member: Member) -> None:
        self._ok(requester, requester.call(ServiceKind.REMOVE_FROM_CLUSTER, node_id=member.id), "REMOVE_FROM_CLUSTER")
        self.mirror.apply(RemoveFromCluster(requester=requester.id, node_id=member.id))
        self.renewed.pop(member.id)

    def renew(self, *members: Member) -> None:
        for member in members:
            self._ok(member, member.call(ServiceKind.RENEW), "RENEW", ServiceKind.RENEWED)
            self.renewed[member.id] = self.now

    def restart(self) -> None:
        """The target restarted: what is durable stays (the model's state), the detector starts a fresh period
        for every member not FAIL (a FAIL one stays FAIL until it renews)."""
        self._restart()
        for node, member in self.mirror.model.members.items():
            if member.state is not NodeState.FAIL:
                self.renewed[node] = self.now

    def advance(self, ms: int) -> None:
        """The clock moved on and the detector ticked: the model commits each verdict that changes."""
        self._advance(ms)
        self.now += ms
        for node, last in sorted(self.renewed.items()):
            age = self.now - last
            state = NodeState.OK if age <= self.pfail_ms or not self.pfail_ms and age <= self.fail_ms else \
                NodeState.PFAIL if age <= self.fail_ms else NodeState.FAIL
            self.mirror.apply(SetState(node_id=node, state=state))

    def _ok(self, member: Member, reply: ServiceMessage, what: str, kind: ServiceKind = ServiceKind.OK) -> None:
        if reply.kind is not kind:
            raise CaseTimeout(f"{member.id}'s {what} was answered {reply.kind.name} {reply.payload}")

    def judge(self, last: Member) -> list[str]:
        """After a last GLOBAL gossip batch (every member is owed it after everything before), each
        member's notifications against the model's."""
        self.write(last, f"last-{len(self.mirror.revisions)}", b"")
        problems = list(self.problems)
        end = time.monotonic() + JUDGED_WITHIN
        for name, member in self.members.items():
            member.raw.wait_at_most(max(0.2, end - time.monotonic()))
            owed = self.mirror.owed.get(member.id, [])
            view = self.mirror.views.get(member.id, ())
            try:
                member.until(f"the {len(owed)} notifications the model owes it", lambda: member.view() == view and (
                    (alignment := _align(member.seen, owed, self.shard_keys))[0] == len(owed) or alignment[1] is not None))
            except CaseTimeout as late:
                problems.append(str(late))
            problems += [f"{name}: {p}" for p in member.problems]
            matched, wrong = _align(member.seen, owed, self.shard_keys)
            if wrong is not None:
                problems.append(f"{name}'s notification {wrong}: {_shown(member.seen[wrong - 1], self.tag)}; the "
                                f"model's: {_shown(owed[matched], self.tag) if matched < len(owed) else 'none'}")
            elif matched < len(owed):
                problems.append(f"{name} was not notified {[_shown(o, self.tag) for o in owed[matched:]]}")
            if member.view() != view:
                problems.append(f"{name} ends with the membership {_shown_view(member.view(), self.tag)}, the model "
                                f"{_shown_view(view, self.tag)}")
        return problems

    def close(self) -> None:
        for member in self.members.values():
            member.raw.close()


@contextmanager
def scenario(target: ClusterTarget, ctx: CaseContext, kind: type[Scenario] = Scenario) -> Iterator[Scenario]:
    """A scenario (of class ``kind``) on a fresh session of ``target``, its detector's clock stopped for the block."""
    assert target.url is not None
    address = ServiceAddress.parse(target.url)
    restart = target.restart
    with session(target, ctx) as s, stopped_clock(target, s) as (limits, advance):
        run = kind(address, s.tag, (limits.pfail_after_ms, limits.fail_after_ms), advance,
                       lambda: restart(s.cluster) if restart is not None else None)
        try:
            yield run
        finally:
            run.close()


def _align(seen: list[Seen], owed: list[Seen], shard_keys: set[str]) -> tuple[int, int | None]:
    """``seen`` against ``owed`` in order: how many owed notifications were matched, and the position
    (from 1) of the first seen one that matches neither the next owed one nor the scope's allowance (SHARD
    gossip is a minimum, docs/spec/cluster.md: entries of SHARD keys the model does not owe there may come
    too, alone or with what it owes)."""
    matched = 0
    for position, ((kind, shard, entries), view) in enumerate(seen, start=1):
        want = owed[matched] if matched < len(owed) else None
        if ((kind, shard, entries), view) == want:
            matched += 1
            continue
        if kind == "gossip":
            allowed = set(want[0][2]) if want is not None else set()
            kept = tuple(e for e in entries if e[0] not in shard_keys or e in allowed)
            if ((kind, shard, kept), view) == want:
                matched += 1
                continue
            if all(key in shard_keys for key, _ in entries):
                continue  # SHARD gossip beyond its shard, or before the member was owed it there
        return matched, position
    return matched, None


def _shown(seen: Seen, tag: str) -> str:
    (kind, shard, entries), view = seen
    keys = ",".join(f"{k[len(tag) + 1:]}={v[:8]!r}" for k, v in entries)
    return f"{kind}{'@' + shard[:6] if shard else ''}[{keys}] told {_shown_view(view, tag)}"


def _shown_view(view: View, tag: str) -> str:
    return "{" + " ".join(f"{n[len(tag) + 1:]}:{s[:6]}/{a[-4:]}/{st}" for n, s, a, st in view) + "}"


def every_operation_in_delivery_order(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Every operation's notifications, to every member in each health state, in delivery order, judged
    against the model (module docstring): a join (membership, then the GLOBAL gossip), JoinShard
    (membership, then the shard's log, then its SHARD gossip), writes to the shard log and to GLOBAL and
    SHARD gossip (inserts, updates, and a stale revision and a second insert refused in each), each
    notified to OK, PFAIL and FAIL members alike; a PFAIL and a FAIL member moving shards; a FAIL member
    joining again with a new address (a new shard, OK, the new address, the GLOBAL gossip shown again);
    RemoveFromShard, RemoveFromCluster (the removed one told); a restart (a PFAIL member renewed by it, a
    FAIL one not; the membership deltas after it on the epoch each node was told); equivalent inputs (ops in descending key
    order, a two-byte key, empty and binary values, an update among inserts; a batch with one stale op
    refused whole); then a node resuming its session after a revision followed by interleaved log and
    gossip batches, caught up in revision order, then after 0 and after the last batch; and a takeover
    that does not resume (its HELLO's revision set but its resume flag not) owed nothing of the past."""
    with scenario(target, ctx) as run:
        a = run.join("a", "127.0.0.1:7101")
        g1 = run.write(a, "g1", b"1", Scope.GLOBAL)
        b = run.join("b", "127.0.0.1:7102")
        k1 = run.write(a, "k1", b"1")
        s1 = run.write(a, "s1", b"1", Scope.SHARD)
        run.join_shard(b, a.shard)
        c = run.join("c", "127.0.0.1:7103")
        run.write(c, "c1", b"1")
        run.write(c, "cs1", b"1", Scope.SHARD)
        p = run.join("p", "127.0.0.1:7104")
        f = run.join("f", "127.0.0.1:7105")
        resume_after = run.write(a, "g2", b"1", Scope.GLOBAL)
        for name, first, scope in (("k1", k1, None), ("g1", g1, Scope.GLOBAL), ("s1", s1, Scope.SHARD)):
            run.write(b, name, b"2", scope, first)  # an update at the current revision
            run.write(b, name, b"3", scope, first)  # a stale revision: refused
            run.write(b, name, b"4", scope)  # a second insert: refused
        # equivalent inputs: ops in descending key order, a two-byte key, an empty and a binary value; an
        # update and inserts in one batch; a batch one of whose ops is stale refused whole
        run.batch(b, [("k9", b"", None), ("k8-\u00e9", bytes(range(256)), None), ("k6", b"6", None)])
        run.batch(a, [("g7", b"7", None), ("g2", b"2", resume_after), ("g6", b"", None)], Scope.GLOBAL)
        run.batch(a, [("s9", b"9", None), ("s1", b"5", s1)], Scope.SHARD)  # s1 was updated since: refused
        run.batch(a, [("s9", b"9", None), ("s8", b"", None)], Scope.SHARD)
        run.batch(b, [("k7", b"7", None), ("k6", b"stale", k1)])
        # health: f silent since it joined, p renewed 400 ms in, a, b and c renewed after the tick
        quiet = max(run.pfail_ms, 1)
        run.advance(min(400, quiet - 1))
        run.renew(p)
        run.advance(run.fail_ms + 1 - run.now)
        run.renew(a, b, c)
        run.advance(0)
        run.write(a, "g3", b"1", Scope.GLOBAL)
        run.write(a, "s2", b"1", Scope.SHARD)
        run.write(a, "k2", b"1")
        run.join_shard(p, c.shard)
        run.join_shard(f, a.shard)
        run.advance(0)  # a move renews nothing
        run.write(a, "k3", b"1")
        run.write(c, "cs2", b"1", Scope.SHARD)
        run.write(f, "g4", b"1", Scope.GLOBAL)
        run.join_shard(p, p.shard)  # the own shard: nothing
        run.restart()  # the PFAIL member OK again at the next tick, the FAIL one still FAIL
        run.advance(0)
        run.write(a, "g8", b"1", Scope.GLOBAL)
        run.join("f", "127.0.0.1:7999")
        run.advance(0)  # joining again renewed it
        run.remove_from_shard(a, b)
        run.write(b, "sb", b"1", Scope.SHARD)  # b's SHARD gossip written before its move stays with a's shard
        run.join_shard(f, b.shard)
        run.remove_from_cluster(a, c)
        run.write(a, "k4", b"1")
        run.write(b, "g5", b"1", Scope.GLOBAL)
        # a resumed session: the old one is judged up to here, the new one from its catch-up on
        old = a
        problems = run.judge(old)
        a = run.members["a"] = Member(run.address, old.id, run.tag)
        a.hello(takeover=old.token, resume_after=resume_after)
        a.shard = old.shard
        run.mirror.resumed(a.id, resume_after)
        old.raw.close()
        run.members.pop("c").raw.close()  # removed, judged above
        run.problems = []
        run.write(a, "k5", b"1")
        run.remove_from_cluster(b, p)  # a PFAIL member removed: told
        problems += run.judge(a)
        for after in (0, run.latest, None):  # resumed after nothing, after everything; not resumed
            old = a
            a = run.members["a"] = Member(run.address, old.id, run.tag)
            a.hello(takeover=old.token, resume_after=after, ignored_after=resume_after)
            a.shard = old.shard
            if after is None:
                run.mirror.taken_over(a.id)
            else:
                run.mirror.resumed(a.id, after)
            old.raw.close()
            run.write(b, f"after-{after}", b"1", Scope.SHARD)
            problems += run.judge(a)
    return verdict("each member's notifications, in delivery order, are the model's: joins, shard moves, log and "
                   "gossip writes (CAS at a stale revision refused in each namespace), to OK, PFAIL and FAIL members, "
                   "a FAIL member joining again with a new address, removals, and a resumed session's catch-up in "
                   "revision order", problems[:4])


def verdicts_per_node_at_their_instants(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Two silent members whose last frames are ``d`` ms apart, and an observer renewing before every
    step: the clock is moved to each one's PFAIL and FAIL instants (exactly at, then 1 ms past) in turn,
    a GLOBAL batch after each step; the membership the observer held at each batch is judged against the
    model fed the detector's verdicts (each node by its own last renewal, not the other's)."""
    with scenario(target, ctx) as run:
        observer = run.join("observer", "127.0.0.1:7201")
        run.join("early", "127.0.0.1:7202")
        late = run.join("late", "127.0.0.1:7203")
        step = min(100, max(1, (run.pfail_ms or run.fail_ms) // 2))
        run.advance(step)
        run.renew(late)
        instants = sorted({at + offset for threshold in (run.pfail_ms, run.fail_ms) if threshold
                           for at in (threshold, threshold + step) for offset in (0, 1)})
        for i, instant in enumerate(instants):
            run.renew(observer)
            run.advance(instant - run.now)
            run.write(observer, f"at-{i}", str(instant).encode(), Scope.GLOBAL)
        problems = run.judge(observer)
    return verdict(f"two members silent since instants {step} ms apart are each OK, PFAIL and FAIL by their own last "
                   "frame: unchanged exactly at each threshold, changed 1 ms past it", problems[:4])
