"""The etcd v3 cluster provider: membership, shard logs and gossip as keys under one prefix.

Layout under ``/<namespace>/``: ``members/<node>`` = JSON {address, shard} (durable),
``claims/<node>`` = the takeover token of the session holding the node id, attached to that
session's lease (so the id is free when the lease expires; every write of the node compares it,
so a taken-over session can write nothing), ``alive/<node>`` attached to the node's lease
(heartbeats; its expiry is FAIL), ``log/<shard>/<key>``
the shard logs, ``gossip/<key>`` the gossip store. CAS is a transaction comparing mod_revision (or
create_revision 0 for an insert); a batch is one transaction, so all its keys share one revision and
arrive in one watch response. The nodes of one process share one watch of the prefix and one
mirror of it (reference/cluster/etcd_watch.py) and each derives its notifications from every
committed revision, so all members see the same commit order and a write is decoded once per
process, not once per node.
"""

from __future__ import annotations

import base64
import functools
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from reference.cluster.dispatch import ClusterDown, Dispatcher, Heartbeat
from reference.cluster.etcd_gateway import EtcdEndpoint, EtcdGateway, KeyValue, b64, prefix_end
from reference.cluster.etcd_watch import CommittedRevision, SharedWatch
from reference.cluster.heartbeat import HeartbeatThread
from reference.cluster.ids import new_session_token, new_shard_id
from spec.cluster.errors import (
    ClusterFull,
    NodeIdInUse,
    NotAMember,
    ProviderClosed,
    ProviderUnavailable,
    RevisionMismatch,
    UnknownNode,
    UnknownShard,
)
from spec.cluster.interface import ClusterCore, FailureTiming
from spec.cluster.model import GossipUpdate, MembershipUpdate, Notification, ShardLogUpdate
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

MAX_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class EtcdSettings:
    """etcd's lessor revokes expired leases every 500 ms; ``fail_slack`` covers that and the watch."""

    lease_ttl: int = 1
    heartbeat_interval: float = 0.25
    request_timeout: float = 5.0
    fail_slack: float = 1.0


@dataclass(frozen=True, slots=True)
class _Member:
    address: str
    shard: ShardId
    joined: str = ""
    """The fresh shard its latest JoinCluster made: a member joining again is owed the gossip store again
    (spec.cluster.model's join_cluster), a member moving between shards is not."""


Members = dict[NodeId, _Member]


class EtcdCluster:
    """A cluster stored in the etcd at ``endpoint`` (or its URL), isolated from others by ``namespace``."""

    def __init__(self, endpoint: EtcdEndpoint | str, namespace: str = "streamwire",
                 settings: EtcdSettings = EtcdSettings()) -> None:
        check_id("namespace", namespace)
        self.settings = settings
        self.gateway = EtcdGateway(endpoint, settings.request_timeout)
        self.prefix = f"/{namespace}/"
        lease, granted = self.gateway.lease_grant(settings.lease_ttl)  # the server may raise the TTL
        self.gateway.lease_revoke(lease)
        self._timing = FailureTiming(heartbeat_interval=settings.heartbeat_interval, ttl=float(granted),
                                     fail_bound=granted + settings.fail_slack)
        self._nodes: list[EtcdNode] = []
        self.watch = SharedWatch(self.gateway, self.prefix)
        self._snapshot: tuple[int, Membership] | None = None

    @property
    def timing(self) -> FailureTiming:
        return self._timing

    def open_node(self, node_id: NodeId, core: ClusterCore, *, takeover: str | None = None) -> EtcdNode:
        node = EtcdNode(self, check_id("node", node_id), core, takeover)
        self._nodes.append(node)
        return node

    def close(self) -> None:
        for node in self._nodes:
            node.close()
        self.watch.close(self.settings.request_timeout + 1)

    def snapshot(self, change: CommittedRevision, mirror: Mapping[str, KeyValue]) -> Membership:
        """The membership after ``change``, built once for all the nodes told of it (watch thread)."""
        if self._snapshot is None or self._snapshot[0] != change.revision:
            shards: dict[ShardId, list[NodeInfo]] = {}
            for key in sorted(k for k in mirror if k.startswith("members/")):
                node = NodeId(key[len("members/"):])
                member = _member_of(mirror[key])
                state = NodeState.OK if f"alive/{node}" in mirror else NodeState.FAIL
                shards.setdefault(member.shard, []).append(NodeInfo(node_id=node, address=member.address, state=state))
            self._snapshot = change.revision, Membership(epoch=change.revision, shards={s: tuple(n) for s,
                                                                                        n in sorted(shards.items())})
        return self._snapshot[1]


class EtcdNode:
    """One node's provider on etcd."""

    def __init__(self, cluster: EtcdCluster, node_id: str, core: ClusterCore, takeover: str | None) -> None:
        self._cluster = cluster
        self._gw = cluster.gateway
        self._p = cluster.prefix
        self._node_id = NodeId(node_id)
        self._session = new_session_token()
        self._fenced = False
        self._lease: int | None = None
        self._claim(self._ensure_lease(), takeover)
        self.mailbox = Dispatcher(node_id, core)
        self._closed = threading.Event()
        self._mirror = cluster.watch.mirror
        cluster.watch.subscribe(self)
        self._heartbeats = HeartbeatThread(f"etcd-heartbeat {node_id}", self.timing.heartbeat_interval, self._renew,
                                           self.mailbox, self._closed)
        self.mailbox.start()
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

    # -- identity ----------------------------------------------------------------------------

    def _claim(self, lease: int, takeover: str | None) -> None:
        """Hold ``claims/<node>`` under this session's lease: if absent, or held by ``takeover``."""
        claim = self._key("claims", self._node_id)
        put = [self._put(claim, self._session.encode(), lease)]
        if self._gw.txn([{"key": b64(claim), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                        put, [])[0]:
            return
        if takeover and self._gw.txn([self._claim_compare(takeover)], put, [])[0]:
            self._reattach(lease)
            return
        self._gw.lease_revoke(lease)
        self._lease = None
        raise NodeIdInUse(f"node {self._node_id} is held by a live session; it is free when that session's "
                          f"lease expires, or to the holder of its takeover token")

    def _claim_compare(self, token: str | None = None) -> dict[str, Any]:
        return {"key": b64(self._key("claims", self._node_id)), "target": "VALUE", "result": "EQUAL",
                "value": b64(token or self._session)}

    def _check_claim(self) -> None:
        """After a failed transaction: PROVIDER_CLOSED if another session holds the id now."""
        kvs, _ = self._gw.range(self._key("claims", self._node_id))
        if kvs and kvs[0].value != self._session.encode():
            self._fenced = True
        self._check_open()

    # -- keys ------------------------------------------------------------------------------

    def _key(self, *parts: str) -> str:
        return self._p + "/".join(parts)

    def _put(self, key: str, value: bytes, lease: int | None = None) -> dict[str, Any]:
        request: dict[str, Any] = {"key": b64(key), "value": b64(value)}
        if lease is not None:
            request["lease"] = str(lease)
        return {"request_put": request}

    def _delete(self, key: str, prefix: bool = False) -> dict[str, Any]:
        request = {"key": b64(key)} | ({"range_end": b64(prefix_end(key))} if prefix else {})
        return {"request_delete_range": request}

    def _put_member(self, node: NodeId, member: _Member) -> dict[str, Any]:
        record = json.dumps({"address": member.address, "shard": member.shard, "joined": member.joined}).encode()
        return self._put(self._key("members", node), record)

    # -- membership operations --------------------------------------------------------------

    def _members(self) -> tuple[Members, int]:
        kvs, revision = self._gw.range(self._key("members", ""), prefix=True)
        members = {}
        for kv in kvs:
            members[NodeId(kv.key.rsplit("/", 1)[1])] = _member_of(kv)
        return members, revision

    def _membership_txn(self, build: Callable[[Members], list[dict[str, Any]]]) -> None:
        """Apply ``build(members)`` only if no member record changed since it was read."""
        self._check_open()
        members_prefix = self._key("members", "")
        for _ in range(MAX_ATTEMPTS):
            members, revision = self._members()
            guard = {"key": b64(members_prefix), "range_end": b64(prefix_end(members_prefix)),
                     "target": "MOD", "result": "LESS", "mod_revision": str(revision + 1)}
            if self._gw.txn([guard, self._claim_compare()], build(members), [])[0]:
                return
            self._check_claim()
        raise ProviderUnavailable(f"membership change kept conflicting ({MAX_ATTEMPTS} attempts)")

    def _leave_ops(self, members: Members, node: NodeId) -> list[dict[str, Any]]:
        """A shard's log is destroyed with its last member."""
        current = members.get(node)
        if current is None or any(m.shard == current.shard for n, m in members.items() if n != node):
            return []
        return [self._delete(self._key("log", current.shard, ""), prefix=True)]

    def _require(self, members: Members, node: NodeId, error: type[NotAMember] | type[UnknownNode]) -> _Member:
        if node not in members:
            raise error(f"node {node} is not a member")
        return members[node]

    def join_cluster(self, address: str) -> ShardId:
        check_address(address)
        shard = new_shard_id()
        lease = self._ensure_lease()

        def build(members: Members) -> list[dict[str, Any]]:
            if self._node_id not in members and len(members) >= MAX_MEMBERS:
                raise ClusterFull(f"the cluster has {MAX_MEMBERS} members, its bound")
            return self._leave_ops(members, self._node_id) + [
                self._put_member(self._node_id, _Member(address, shard, joined=shard)),
                self._put(self._key("alive", self._node_id), b"", lease)]
        self._membership_txn(build)
        self.mailbox.post(Heartbeat(self.timing.ttl))
        return shard

    def remove_from_cluster(self, node_id: NodeId) -> None:
        def build(members: Members) -> list[dict[str, Any]]:
            self._require(members, self._node_id, NotAMember)
            self._require(members, node_id, UnknownNode)
            return self._leave_ops(members, node_id) + [
                self._delete(self._key("members", node_id)), self._delete(self._key("alive", node_id))]
        self._membership_txn(build)

    def join_shard(self, shard_id: ShardId) -> None:
        def build(members: Members) -> list[dict[str, Any]]:
            me = self._require(members, self._node_id, NotAMember)
            if not any(m.shard == shard_id for m in members.values()):
                raise UnknownShard(f"shard {shard_id} does not exist")
            if me.shard == shard_id:
                return []
            return self._leave_ops(members, self._node_id) + [
                self._put_member(self._node_id, _Member(me.address, shard_id, me.joined))]
        self._membership_txn(build)

    def remove_from_shard(self, node_id: NodeId) -> ShardId:
        shard = new_shard_id()

        def build(members: Members) -> list[dict[str, Any]]:
            self._require(members, self._node_id, NotAMember)
            target = self._require(members, node_id, UnknownNode)
            return self._leave_ops(members, node_id) + [self._put_member(node_id, _Member(target.address, shard, target.joined))]
        self._membership_txn(build)
        return shard

    # -- metadata operations ----------------------------------------------------------------

    def update_shard_log(self, ops: Sequence[MetadataOp]) -> Revision:
        return self._cas_batch(ops, lambda shard: self._key("log", shard, ""))

    def update_gossip(self, ops: Sequence[MetadataOp], scope: Scope) -> Revision:
        """Gossip reaches every member whatever the scope (scope is a minimum guarantee)."""
        return self._cas_batch(ops, lambda shard: self._key("gossip", ""))

    def _cas_batch(self, ops: Sequence[MetadataOp], base_of: Callable[[ShardId], str]) -> Revision:
        """One transaction: my member record unchanged (so my shard is still mine) and every CAS."""
        self._check_open()
        batch = check_batch(ops)
        me_key = self._key("members", self._node_id)
        for _ in range(MAX_ATTEMPTS):
            kvs, _revision = self._gw.range(me_key)
            if not kvs:
                raise NotAMember(f"node {self._node_id} is not a member")
            base = base_of(ShardId(json.loads(kvs[0].value)["shard"]))
            compare = [self._claim_compare(), {"key": b64(me_key), "target": "MOD", "result": "EQUAL",
                                               "mod_revision": str(kvs[0].mod_revision)}]
            for op in batch:
                if op.expected is None:
                    compare.append({"key": b64(base + op.key), "target": "CREATE", "result": "EQUAL",
                                    "create_revision": "0"})
                else:
                    compare.append({"key": b64(base + op.key), "target": "MOD", "result": "EQUAL",
                                    "mod_revision": str(op.expected)})
            success = [self._put(base + op.key, op.value) for op in batch]
            failure = [{"request_range": {"key": b64(me_key)}}] + [
                {"request_range": {"key": b64(base + op.key)}} for op in batch]
            ok, responses, revision = self._gw.txn(compare, success, failure)
            if ok:
                return Revision(revision)
            self._check_claim()
            found = [r["response_range"].get("kvs", []) for r in responses]
            if not found[0] or int(found[0][0]["mod_revision"]) != kvs[0].mod_revision:
                continue  # moved or removed meanwhile: re-read and retry
            for op, current in zip(batch, found[1:]):
                actual = None if not current else Entry(key=op.key, value=_decode_value(current[0]),
                                                        revision=Revision(int(current[0]["mod_revision"])))
                if (None if actual is None else actual.revision) != op.expected:
                    raise RevisionMismatch(op.key, op.expected, actual)
        raise ProviderUnavailable(f"batch kept conflicting with membership changes ({MAX_ATTEMPTS} attempts)")

    # -- liveness ---------------------------------------------------------------------------

    def _ensure_lease(self) -> int:
        if self._lease is None:
            self._lease, _ = self._gw.lease_grant(int(self.timing.ttl))
        return self._lease

    def _renew(self) -> float | None:
        """One heartbeat (reference/cluster/heartbeat.py): keep the lease alive, or after it expired
        claim the id again under a new one; a member is told its TTL."""
        lease = self._lease
        if self._fenced:
            self._retire(lease)
            raise ProviderClosed(f"node {self._node_id} was taken over by another session")
        if lease is None:  # only after a lost lease, which was reported already
            raise ProviderUnavailable("no lease: the last one expired and none was granted since")
        if self._gw.lease_keepalive(lease) <= 0:
            self._lease = None
            self._reclaim(self._ensure_lease())
            raise ProviderUnavailable("lease expired")
        return self.timing.ttl if self._my_record() is not None else None

    def _reclaim(self, lease: int) -> None:
        """After a lost lease (and with it the claim): claim the id again unless another session
        took it meanwhile (then this handle is fenced), and be alive again if still a member."""
        claim = self._key("claims", self._node_id)
        if not self._gw.txn([{"key": b64(claim), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                            [self._put(claim, self._session.encode(), lease)], [])[0]:
            self._fenced = True
            return
        self._reattach(lease)

    def _retire(self, lease: int | None) -> None:
        """A taken-over handle stops: it tells its Core and frees what its lease still holds."""
        self.mailbox.post(ClusterDown())
        if lease is not None:
            try:
                self._gw.lease_revoke(lease)
            except ProviderUnavailable:
                pass  # it expires on its own

    def _reattach(self, lease: int) -> None:
        """After a lost lease, a still-member node is alive again under a new one."""
        me = self._key("members", self._node_id)
        self._gw.txn([{"key": b64(me), "target": "CREATE", "result": "GREATER", "create_revision": "0"}],
                     [self._put(self._key("alive", self._node_id), b"", lease)], [])

    # -- notifications ------------------------------------------------------------------------

    def _my_record(self) -> _Member | None:
        kv = self._mirror.get(f"members/{self._node_id}")
        return None if kv is None else _member_of(kv)

    def _entries(self, base: str, mirror: Mapping[str, KeyValue]) -> tuple[Entry, ...]:
        return tuple(Entry(key=k[len(base):], value=kv.value, revision=Revision(kv.mod_revision))
                     for k, kv in sorted(mirror.items()) if k.startswith(base))

    def apply(self, change: CommittedRevision, mirror: Mapping[str, KeyValue]) -> None:
        """Post what one committed revision means for this node, in model order (watch thread)."""
        me = f"members/{self._node_id}"
        after = self._my_record()
        if me in change.previous:
            previous = change.previous[me]
            before = None if previous is None else _member_of(previous)
        else:
            before = after
        claim = f"claims/{self._node_id}"
        if any(key == claim and not e.deleted and e.kv.value != self._session.encode() for key, e in change.events):
            self._fenced = True  # taken over: this handle can write nothing any more
        out: list[Notification] = []
        if (before or after) and change.touches("members/", "alive/"):
            out.append(MembershipUpdate(snapshot=self._cluster.snapshot(change, mirror)))
        if after is not None:
            out += self._data_notifications(change, mirror, before, after)
        for notification in out:
            self.mailbox.post(notification)

    def _data_notifications(self, change: CommittedRevision, mirror: Mapping[str, KeyValue], before: _Member | None,
                            after: _Member) -> list[Notification]:
        out: list[Notification] = []
        log_base = f"log/{after.shard}/"
        if before is None or before.shard != after.shard:
            log = self._entries(log_base, mirror)
            if log:
                out.append(ShardLogUpdate(shard=after.shard, entries=log))
        else:
            written = tuple(Entry(key=k[len(log_base):], value=e.kv.value, revision=Revision(e.kv.mod_revision))
                            for k, e in change.events if not e.deleted and k.startswith(log_base))
            if written:
                out.append(ShardLogUpdate(shard=after.shard, entries=written))
        if before is None or before.joined != after.joined:
            gossip = self._entries("gossip/", mirror)
        else:
            gossip = tuple(Entry(key=k[len("gossip/"):], value=e.kv.value, revision=Revision(e.kv.mod_revision))
                           for k, e in change.events if not e.deleted and k.startswith("gossip/"))
        if gossip:
            out.append(GossipUpdate(entries=gossip))
        return out

    def _check_open(self) -> None:
        if self._fenced:
            raise ProviderClosed(f"node {self._node_id} was taken over by another session")
        if self._closed.is_set():
            raise ProviderClosed(f"node {self._node_id} was closed")

    def close(self) -> None:
        """Crash semantics: stop renewing and listening; the lease expires on its own."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._cluster.watch.unsubscribe(self)
        self.mailbox.close()
        self._heartbeats.join(self._cluster.settings.request_timeout + 1)


def _decode_value(kv: dict[str, Any]) -> bytes:
    return base64.b64decode(kv.get("value", ""))


@functools.lru_cache(maxsize=4096)
def _member_of(kv: KeyValue) -> _Member:
    """A member record decoded once, however many nodes read it."""
    record = json.loads(kv.value)
    return _Member(record["address"], ShardId(record["shard"]), record.get("joined", ""))
