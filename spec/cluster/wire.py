"""Byte layouts of the cluster service: how a process without the provider reaches a driver-hosted
one over TCP (a Spark executor, or another language's node).

A frame is a u32 big-endian length then a body of at most ``MAX_FRAME_BYTES``; the length is
checked before anything is allocated. A body is ``kind:u8 request_id:u64 payload``. Requests carry
a non-zero request id that the reply repeats; events pushed by the service carry 0. Revisions are
u64 with 0 meaning "none" (an insert's expected revision), since real revisions are > 0.

HELLO names the node, carries the service's shared secret (empty when the client has none), the
takeover token of a session it succeeds (empty: none) and, for a reconnecting client, the last
revision it was notified of (``resume``); WELCOME returns the timing and the new session's
takeover token. A connection-level error is an ERROR sent just before the service closes the
connection: with request id 0 for a frame that breaks the wire (its request id is not to be trusted),
with the frame's own request id for a well-formed frame refused before a session is open (a refused
HELLO, a request before HELLO). A service configured with a
secret admits a HELLO only if it carries that secret (:func:`check_hello_secret`); the configured
secret is never empty (``spec.shared_secret``), so a HELLO without one is never admitted by it.

Membership reaches a node as a whole MEMBERSHIP snapshot once (its first, and after a resume), then
as MEMBERSHIP_DELTA events: the records of the members consecutive commits changed, in commit order
(``present`` false: it left), up to ``epoch`` and valid only on the snapshot of epoch ``base`` (the
last membership the node was told), so a join costs each member a few bytes instead of the whole
membership.

A kind ``ServiceKind`` does not list is unknown: MALFORMED_MESSAGE and the connection closed, like
any other malformed frame. That includes 16-19 and 39-41, once a test mode's clock, restart and
probe messages: a conformance harness offers those on its own channel, never on this wire
(docs/conformance.md, "Cluster target harness").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Iterator, Sequence, TypeVar

import construct as c

from spec.cluster.errors import FrameTooLarge, MalformedMessage, Unauthenticated
from spec.cluster.interface import FailureTiming
from spec.cluster.model import MemberRecord, MembershipChange
from spec.cluster.types import (
    MAX_ADDRESS_BYTES,
    MAX_BATCH_OPS,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_MEMBERS,
    MAX_VALUE_BYTES,
    Entry,
    Membership,
    MetadataOp,
    NodeId,
    NodeInfo,
    NodeState,
    Revision,
    Scope,
    ShardId,
)
from spec.shared_secret import secret_matches

E = TypeVar("E", NodeState, Scope)
MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_HELLO_BYTES = 4096
"""Bound on frames before HELLO is accepted (a stranger's first frame); HELLO needs ~600 bytes."""
FRAME_HEADER = c.Int32ub
MAX_REQUEST_BYTES = 1 + 8 + 1 + 2 + MAX_BATCH_OPS * (2 + MAX_KEY_BYTES + 4 + MAX_VALUE_BYTES + 8)
"""Bound on any request a node sends (the largest is a full batch); replies and events, which
carry whole membership snapshots and shard logs, may use up to ``MAX_FRAME_BYTES``."""
MAX_MEMBERSHIP_BYTES = 1 + 8 + 8 + 4 + MAX_MEMBERS * ((2 + MAX_ID_BYTES + 2) + (2 + MAX_ID_BYTES + 2 + MAX_ADDRESS_BYTES + 1))
"""Bound on a MEMBERSHIP body (header, epoch, shard count, then per member the worst case: alone in
its shard, id, shard id and address at their bounds): 12.7 MB, so a snapshot always fits a frame."""


class ServiceKind(IntEnum):
    # client -> service requests
    HELLO = 1
    JOIN_CLUSTER = 2
    REMOVE_FROM_CLUSTER = 3
    JOIN_SHARD = 4
    REMOVE_FROM_SHARD = 5
    UPDATE_GOSSIP = 6
    UPDATE_SHARD_LOG = 7
    RENEW = 8
    # service -> client replies
    OK = 32
    WELCOME = 33
    SHARD = 34
    REVISION = 35
    RENEWED = 36
    ERROR = 37
    CAS_ERROR = 38
    # service -> client events (request_id 0)
    MEMBERSHIP = 64
    GOSSIP_UPDATE = 65
    SHARD_LOG_UPDATE = 66
    CLUSTER_DOWN = 67
    MEMBERSHIP_DELTA = 68


Text = c.PascalString(c.Int16ub, "utf8")
Blob = c.Prefixed(c.Int32ub, c.GreedyBytes)
OpLayout = c.Struct("key" / Text, "value" / Blob, "expected" / c.Int64ub)
EntryLayout = c.Struct("key" / Text, "value" / Blob, "revision" / c.Int64ub)
StateLayout = c.Enum(c.Int8ub, OK=0, PFAIL=1, FAIL=2)
NodeLayout = c.Struct("node_id" / Text, "address" / Text, "state" / StateLayout)
ShardLayout = c.Struct("shard_id" / Text, "nodes" / c.PrefixedArray(c.Int16ub, NodeLayout))
ScopeLayout = c.Enum(c.Int8ub, SHARD=0, GLOBAL=1)
RecordLayout = c.Struct("shard_id" / Text, "address" / Text, "state" / StateLayout)
ChangeLayout = c.Struct("node_id" / Text, "present" / c.Flag, "record" / c.If(c.this.present, RecordLayout))
Empty = c.Struct()

PAYLOADS: dict[ServiceKind, c.Construct] = {
    ServiceKind.HELLO: c.Struct("node_id" / Text, "secret" / Text, "takeover" / Text, "resume" / c.Flag,
                         "resume_after" / c.Int64ub),
    ServiceKind.JOIN_CLUSTER: c.Struct("address" / Text),
    ServiceKind.REMOVE_FROM_CLUSTER: c.Struct("node_id" / Text),
    ServiceKind.JOIN_SHARD: c.Struct("shard_id" / Text),
    ServiceKind.REMOVE_FROM_SHARD: c.Struct("node_id" / Text),
    ServiceKind.UPDATE_GOSSIP: c.Struct("scope" / ScopeLayout, "ops" / c.PrefixedArray(c.Int16ub, OpLayout)),
    ServiceKind.UPDATE_SHARD_LOG: c.Struct("ops" / c.PrefixedArray(c.Int16ub, OpLayout)),
    ServiceKind.RENEW: Empty,
    ServiceKind.OK: Empty,
    ServiceKind.WELCOME: c.Struct("heartbeat_ms" / c.Int32ub, "ttl_ms" / c.Int32ub, "fail_bound_ms" / c.Int32ub,
                           "session" / Text),
    ServiceKind.SHARD: c.Struct("shard_id" / Text),
    ServiceKind.REVISION: c.Struct("revision" / c.Int64ub),
    ServiceKind.RENEWED: c.Struct("ttl_ms" / c.Int32ub),
    ServiceKind.ERROR: c.Struct("code" / c.Int16ub, "message" / Text),
    ServiceKind.CAS_ERROR: c.Struct("key" / Text, "expected" / c.Int64ub, "found" / c.Flag,
                             "actual" / c.If(c.this.found, EntryLayout)),
    ServiceKind.MEMBERSHIP: c.Struct("epoch" / c.Int64ub, "shards" / c.PrefixedArray(c.Int32ub, ShardLayout)),
    ServiceKind.GOSSIP_UPDATE: c.Struct("entries" / c.PrefixedArray(c.Int32ub, EntryLayout)),
    ServiceKind.SHARD_LOG_UPDATE: c.Struct("shard_id" / Text, "entries" / c.PrefixedArray(c.Int32ub, EntryLayout)),
    ServiceKind.CLUSTER_DOWN: Empty,
    ServiceKind.MEMBERSHIP_DELTA: c.Struct("base" / c.Int64ub, "epoch" / c.Int64ub,
                                           "changes" / c.PrefixedArray(c.Int32ub, ChangeLayout)),
}
Header = c.Struct("kind" / c.Int8ub, "request_id" / c.Int64ub)
_EXACT = {kind: c.FocusedSeq("payload", "payload" / layout, c.Terminated) for kind, layout in PAYLOADS.items()}
_EMPTY = frozenset(kind for kind, layout in PAYLOADS.items() if layout is Empty)
assert Header.sizeof() == 9, "encode and decode pack the header by hand"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceMessage:
    """One decoded body: its kind, the request it answers (0 for an event) and its fields."""

    kind: ServiceKind
    request_id: int
    payload: dict[str, Any]


def encode(kind: ServiceKind, request_id: int, **payload: Any) -> bytes:
    """A whole frame (length prefix included) for one message. Every message the service or a client
    sends is bounded by construction (MAX_REQUEST_BYTES, MAX_MEMBERSHIP_BYTES, one batch, or an
    update event split by :func:`update_frames`), so none exceeds MAX_FRAME_BYTES. The header is
    packed by hand (construct's would cost more than a RENEW's whole handling)."""
    fields = b"" if kind in _EMPTY else PAYLOADS[kind].build(payload)
    return (9 + len(fields)).to_bytes(4, "big") + kind.to_bytes(1, "big") + request_id.to_bytes(8, "big") + fields


def update_frames(kind: ServiceKind, entries: Sequence[Entry], limit: int = MAX_FRAME_BYTES, **fields: Any) -> list[bytes]:
    """The frames of one GOSSIP_UPDATE or SHARD_LOG_UPDATE event: one, or, when its entries do not fit
    a body of ``limit`` bytes, several, each holding whole batches (entries sharing a revision) in
    revision order. Only a catch-up (a join's whole shard log or visible gossip) gets that large; one
    batch always fits, since a request carrying it fit MAX_REQUEST_BYTES."""
    frame = encode(kind, 0, entries=entries_to_wire(entries), **fields)
    if len(frame) - FRAME_HEADER.sizeof() <= limit:
        return [frame]
    overhead = len(encode(kind, 0, entries=[], **fields)) - FRAME_HEADER.sizeof()
    batches: dict[int, list[Entry]] = {}
    for entry in entries:
        batches.setdefault(entry.revision, []).append(entry)
    frames: list[bytes] = []
    run: list[Entry] = []
    size = overhead
    for revision in sorted(batches):
        batch = batches[revision]
        grown = sum(len(EntryLayout.build(e)) for e in entries_to_wire(batch))
        if run and size + grown > limit:
            frames.append(encode(kind, 0, entries=entries_to_wire(run), **fields))
            run, size = [], overhead
        run += batch
        size += grown
    frames.append(encode(kind, 0, entries=entries_to_wire(run), **fields))
    return frames


def check_hello_secret(presented: str, required: str | None) -> None:
    """HELLO's admission by secret: a service that requires none (``None``) admits any HELLO; one
    that requires a secret admits only a HELLO carrying it, and a blank one admits nobody."""
    if required is not None and not secret_matches(presented, required):
        raise Unauthenticated("HELLO does not carry the cluster service's shared secret")


def checked_length(length: int, bound: int = MAX_FRAME_BYTES) -> int:
    """The one home of a frame's size rules: a body of ``length`` bytes is refused when it is longer
    than ``bound`` (FrameTooLarge) or shorter than a message header (MalformedMessage)."""
    if length > bound:
        raise FrameTooLarge(f"frame announces {length} bytes, bound is {bound}")
    if length < Header.sizeof():
        raise MalformedMessage(f"frame of {length} bytes is shorter than a message header")
    return length


def body_length(header: bytes, bound: int = MAX_FRAME_BYTES) -> int:
    """The body size announced by a 4-byte frame header, checked against ``bound`` (the service's:
    MAX_HELLO_BYTES before HELLO, MAX_REQUEST_BYTES after) before anything is allocated."""
    return checked_length(FRAME_HEADER.parse(header), bound)


class FrameReader:
    """Splits a byte stream into frame bodies, for every end of the wire (the service, the client, a
    test's raw socket): at most one partial frame is held, its announced size checked against
    ``bound`` (which the owner may change between frames: HELLO's bound, then a node's) before any
    of its body is kept."""

    def __init__(self, bound: int = MAX_FRAME_BYTES) -> None:
        self.bound = bound
        self._header = bytearray()
        self._body: bytearray | None = None
        self._size = 0

    @property
    def held_bytes(self) -> int:
        return len(self._header) + (0 if self._body is None else len(self._body))

    @property
    def wanted(self) -> int:
        """The bytes that complete the header or body being read (what a blocking reader asks for,
        so it never reads past the frame)."""
        return FRAME_HEADER.sizeof() - len(self._header) if self._body is None else self._size - len(self._body)

    def feed(self, data: bytes | memoryview) -> Iterator[bytes]:
        """The complete bodies in ``data``, each yielded before the next header is checked;
        FrameTooLarge / MalformedMessage from a bad header."""
        header_size = FRAME_HEADER.sizeof()
        while data:
            if self._body is None:
                take = header_size - len(self._header)
                self._header += data[:take]
                data = data[take:]
                if len(self._header) < header_size:
                    return
                self._size = body_length(bytes(self._header), self.bound)
                self._body = bytearray()
            take = self._size - len(self._body)
            self._body += data[:take]
            data = data[take:]
            if len(self._body) == self._size:
                body = bytes(self._body)
                self._header, self._body = bytearray(), None
                yield body


def decode(body: bytes) -> ServiceMessage:
    """Parse one frame body; anything that does not match the layouts is MalformedMessage."""
    checked_length(len(body))
    try:
        kind = ServiceKind(body[0])
    except ValueError:
        raise MalformedMessage(f"unknown message kind {body[0]}") from None
    request_id = int.from_bytes(body[1:9], "big")
    if kind in _EMPTY and len(body) == 9:  # RENEW and its like: nothing to parse
        return ServiceMessage(kind=kind, request_id=request_id, payload={})
    try:
        parsed = _EXACT[kind].parse(body[9:])
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"{kind.name} payload does not parse: {exc}") from None
    return ServiceMessage(kind=kind, request_id=request_id, payload={k: v for k,
                                                                     v in parsed.items() if not k.startswith("_")})


# -- conversions between typed values and layout dicts ---------------------------------------

def ops_to_wire(ops: Sequence[MetadataOp]) -> list[dict[str, Any]]:
    return [{"key": o.key, "value": o.value, "expected": o.expected or 0} for o in ops]


def ops_from_wire(items: Sequence[Any]) -> list[MetadataOp]:
    return [MetadataOp(key=i.key, value=bytes(i.value),
                       expected=Revision(i.expected) if i.expected else None) for i in items]


def entries_to_wire(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    return [{"key": e.key, "value": e.value, "revision": e.revision} for e in entries]


def entries_from_wire(items: Sequence[Any]) -> tuple[Entry, ...]:
    return tuple(Entry(key=i.key, value=bytes(i.value), revision=Revision(i.revision)) for i in items)


def membership_to_wire(snapshot: Membership) -> dict[str, Any]:
    return {"epoch": snapshot.epoch, "shards": [
        {"shard_id": s, "nodes": [{"node_id": n.node_id, "address": n.address, "state": n.state.value}
                                  for n in nodes]}
        for s, nodes in snapshot.shards.items()]}


def membership_from_wire(payload: dict[str, Any]) -> Membership:
    return Membership(epoch=payload["epoch"], shards={
        ShardId(s.shard_id): tuple(NodeInfo(node_id=NodeId(n.node_id), address=n.address,
                                            state=enum_from_wire(NodeState, n.state))
                                   for n in s.nodes)
        for s in payload["shards"]})


def shard_block(shard: ShardId, nodes: Sequence[NodeInfo]) -> bytes:
    """One shard of a MEMBERSHIP body, so a sender can keep the blocks of unchanged shards."""
    block: bytes = ShardLayout.build({"shard_id": shard, "nodes": [
        {"node_id": n.node_id, "address": n.address, "state": n.state.value} for n in nodes]})
    return block


def membership_frame(epoch: int, blocks: Sequence[bytes]) -> bytes:
    """The MEMBERSHIP event of ``epoch`` assembled from :func:`shard_block` blocks (the same bytes
    :func:`encode` builds from the snapshot, shards in the blocks' order)."""
    body = b"".join([Header.build({"kind": ServiceKind.MEMBERSHIP, "request_id": 0}), c.Int64ub.build(epoch),
                     c.Int32ub.build(len(blocks)), *blocks])
    header: bytes = FRAME_HEADER.build(len(body))
    return header + body


def membership_changes_to_wire(changes: Sequence[MembershipChange], base: int) -> dict[str, Any]:
    return {"base": base, "epoch": changes[-1].epoch, "changes": [
        {"node_id": c.node_id, "present": c.record is not None, "record": None if c.record is None else
         {"shard_id": c.record.shard, "address": c.record.address, "state": c.record.state.value}}
        for c in changes]}


def membership_changes_from_wire(payload: dict[str, Any]) -> tuple[int, list[MembershipChange]]:
    """The epoch the changes apply on, and the changes (each stamped with the event's epoch: only
    the last one's is known, and only the last is what a Core sees)."""
    changes = []
    for item in payload["changes"]:
        r = item.record
        record = None if r is None else MemberRecord(ShardId(r.shard_id), r.address, enum_from_wire(NodeState, r.state))
        changes.append(MembershipChange(epoch=payload["epoch"], node_id=NodeId(item.node_id), record=record))
    return payload["base"], changes


def enum_from_wire(cls: type[E], value: Any) -> E:
    """A construct enum value as the typed enum; an undefined number is MalformedMessage."""
    try:
        return cls(str(value))
    except ValueError:
        raise MalformedMessage(f"{int(value)} is not a {cls.__name__}") from None


def cas_actual_from_wire(payload: dict[str, Any]) -> Entry | None:
    found = payload["actual"]
    return None if found is None else Entry(key=found.key, value=bytes(found.value), revision=Revision(found.revision))


def timing_to_wire(timing: FailureTiming) -> dict[str, int]:
    return {"heartbeat_ms": round(timing.heartbeat_interval * 1000), "ttl_ms": round(timing.ttl * 1000),
            "fail_bound_ms": round(timing.fail_bound * 1000)}


def timing_from_wire(payload: dict[str, Any]) -> FailureTiming:
    return FailureTiming(heartbeat_interval=payload["heartbeat_ms"] / 1000, ttl=payload["ttl_ms"] / 1000,
                         fail_bound=payload["fail_bound_ms"] / 1000)
