"""Values exchanged between a node's Core and its Cluster Provider (Valkey Modular Clustering RFC).

Identifiers, revisions, metadata operations and membership snapshots are plain frozen values so
that the model, both backends, the wire service and the conformance checks share one vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Mapping, NewType, Sequence

from spec.cluster.errors import InvalidAddress, InvalidBatch, InvalidIdentifier, MalformedMembership

NodeId = NewType("NodeId", str)
ShardId = NewType("ShardId", str)
Revision = NewType("Revision", int)
"""A u64, strictly increasing over the committed writes of one key (docs/cluster.md, Q1)."""

MAX_ID_BYTES = 128
MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 64 * 1024
MAX_BATCH_OPS = 64
MAX_ADDRESS_BYTES = 512
"""A member's address (UTF-8): a DNS name (253) with a port fits twice over."""
MAX_MEMBERS = 16_384
"""Members of one cluster: Valkey's hash slots, so a shard per slot fits. With the id and address
bounds it keeps the largest membership snapshot below a frame (spec/cluster/wire.py)."""
MAX_REVISION = 2**64 - 1
_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]+")


class NodeState(str, Enum):
    """Node health as the provider reports it; FAIL is canonical, PFAIL is a local suspicion."""

    OK = "OK"
    PFAIL = "PFAIL"
    FAIL = "FAIL"


class Scope(str, Enum):
    """Minimum propagation of a gossip batch; a backend may propagate further."""

    SHARD = "SHARD"
    GLOBAL = "GLOBAL"


class Namespace(str, Enum):
    """The two metadata stores; a key in one never appears in the other."""

    GOSSIP = "GOSSIP"
    SHARD_LOG = "SHARD_LOG"


def check_id(kind: str, text: str) -> str:
    """Node and shard ids are path-safe tokens so that every backend can embed them in keys."""
    if not _ID_PATTERN.fullmatch(text) or len(text.encode()) > MAX_ID_BYTES:
        raise InvalidIdentifier(kind, text)
    return text


def check_address(address: str) -> str:
    """A member's address is reported to every member in every snapshot: it is bounded."""
    size = len(address.encode())
    if size > MAX_ADDRESS_BYTES:
        raise InvalidAddress(f"address of {size} bytes exceeds {MAX_ADDRESS_BYTES}")
    return address


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataOp:
    """One write of a batch: ``expected`` is None for an insert, else the key's current revision.

    An empty value is the RFC's "disabled"; there is no delete (docs/cluster.md, Q4).
    """

    key: str
    value: bytes
    expected: Revision | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """A key's value as committed, with the revision that committed it."""

    key: str
    value: bytes
    revision: Revision


def check_batch(ops: Sequence[MetadataOp]) -> tuple[MetadataOp, ...]:
    """Bounds and uniqueness of a batch, checked before any backend sees it."""
    if not 1 <= len(ops) <= MAX_BATCH_OPS:
        raise InvalidBatch(f"a batch holds 1..{MAX_BATCH_OPS} ops, got {len(ops)}")
    seen: set[str] = set()
    for op in ops:
        size = len(op.key.encode())
        if not 1 <= size <= MAX_KEY_BYTES or "\x00" in op.key:
            raise InvalidBatch(f"key of {size} bytes (1..{MAX_KEY_BYTES}, no NUL): {op.key[:40]!r}")
        if len(op.value) > MAX_VALUE_BYTES:
            raise InvalidBatch(f"value of {len(op.value)} bytes for {op.key!r} exceeds {MAX_VALUE_BYTES}")
        if op.expected is not None and not 0 < op.expected <= MAX_REVISION:
            raise InvalidBatch(f"expected revision {op.expected} of {op.key!r} is not a u64 > 0")
        if op.key in seen:
            raise InvalidBatch(f"key {op.key!r} appears twice in one batch")
        seen.add(op.key)
    return tuple(ops)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    """A member as the provider reports it; primaryship is metadata, not membership."""

    node_id: NodeId
    address: str
    state: NodeState


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """A topology snapshot: shards to their members, stamped with a non-decreasing epoch."""

    epoch: int
    shards: Mapping[ShardId, tuple[NodeInfo, ...]]

    def nodes(self) -> dict[NodeId, NodeInfo]:
        return {n.node_id: n for members in self.shards.values() for n in members}

    def shard_of(self, node_id: NodeId) -> ShardId | None:
        for shard, members in self.shards.items():
            if any(n.node_id == node_id for n in members):
                return shard
        return None

    def check_well_formed(self) -> None:
        """Each node in exactly one shard, no empty shard, ids valid."""
        seen: set[str] = set()
        for shard, members in self.shards.items():
            check_id("shard", shard)
            if not members:
                raise MalformedMembership(f"shard {shard} has no member")
            for node in members:
                check_id("node", node.node_id)
                if node.node_id in seen:
                    raise MalformedMembership(f"node {node.node_id} appears twice")
                seen.add(node.node_id)
