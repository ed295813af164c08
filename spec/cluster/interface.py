"""The Core <-> Cluster Provider contract of Valkey's Modular Clustering RFC, as typed Protocols.

``ClusterProvider`` is what the Core asks (one handle per node); ``ClusterCore`` is what the
provider tells the Core. The decisions on the RFC's open questions (revision order and lifetime,
callback threading, one batch = one notification, deletion, failure-detection bounds) are stated
on the members below and in docs/cluster.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, Revision, Scope, ShardId


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureTiming:
    """Failure-detection bounds a backend declares (the RFC sets none).

    - ``heartbeat_interval``: how often a live node renews its liveness;
    - ``ttl``: how long a Core may consider itself cluster-OK after a heartbeat callback, counted
      from the moment the renewal was sent; always <= the time the others need to declare FAIL;
    - ``fail_bound``: from a node's last renewal, time within which every live member has been
      told that node is FAIL.
    """

    heartbeat_interval: float
    ttl: float
    fail_bound: float


class ClusterCore(Protocol):
    """Provider-to-Core notifications.

    Threading (Q2): for one node, callbacks run one at a time on a thread owned by the provider,
    never on the thread of an operation call, in commit order. A callback may call the provider's
    operations (re-entrancy is allowed); their notifications are delivered after it returns.
    A callback must not block for long: it delays every later notification of that node.
    """

    def update_membership(self, snapshot: Membership) -> None:
        """Pushed after every topology or health change; the Core never polls."""

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        """Gossip values became visible here. At least once; never an older revision of a key
        than one already notified. One committed batch = one call (Q3)."""

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        """Shard-log values of this node's shard became visible here: a committed batch (one
        call, all entries with the batch's revision), or the catch-up of a shard on join."""

    def cluster_heartbeat(self, ttl: float) -> None:
        """This node's liveness was renewed; it is cluster-OK for ``ttl`` seconds from the
        renewal it answers (the Core should count from just before it expects renewals)."""

    def cluster_down(self) -> None:
        """Leave cluster-OK now: the provider lost its liveness (lease lost, backend gone)."""


class ClusterProvider(Protocol):
    """Core-to-provider operations of one node. Each call completes exactly once: it returns or
    raises a :class:`spec.cluster.errors.ClusterError` (ProviderUnavailable when the outcome is
    unknown after the backend's deadline)."""

    @property
    def node_id(self) -> NodeId: ...

    @property
    def timing(self) -> FailureTiming: ...

    @property
    def takeover_token(self) -> str:
        """The secret that lets a successor of this handle (the same node restarted before this
        session ended) claim its node id: ``open_node(node_id, core, takeover=token)``. The
        successor then holds the id and this handle raises PROVIDER_CLOSED."""

    def join_cluster(self, address: str) -> ShardId:
        """Join (or re-join) with this node id; the node is alone in a fresh shard, and its old
        shard is destroyed with its shard log if it was the last member. An address longer than
        MAX_ADDRESS_BYTES raises INVALID_ADDRESS, a new node in a cluster of MAX_MEMBERS members
        CLUSTER_FULL; either way nothing changed."""

    def remove_from_cluster(self, node_id: NodeId) -> None:
        """Remove a member; removing oneself is a graceful leave (no FAIL is reported)."""

    def join_shard(self, shard_id: ShardId) -> None:
        """Move this node into an existing shard; it is then notified of that shard's log."""

    def remove_from_shard(self, node_id: NodeId) -> ShardId:
        """Move a member out of its shard into a new empty shard, returned."""

    def update_gossip(self, ops: Sequence[MetadataOp], scope: Scope) -> Revision:
        """Atomically apply a batch of gossip writes (CAS per op, no durability promised)."""

    def update_shard_log(self, ops: Sequence[MetadataOp]) -> Revision:
        """Atomically and durably apply a batch to this node's shard log (CAS per op)."""

    def close(self) -> None:
        """Stop this handle as a crash would: no leave, no more heartbeats or callbacks. The
        others see the node FAIL within ``timing.fail_bound``."""


class ClusterBackend(Protocol):
    """A cluster (an in-process store, an etcd cluster, a remote service) that hands out node
    handles."""

    @property
    def timing(self) -> FailureTiming: ...

    def open_node(self, node_id: NodeId, core: ClusterCore, *, takeover: str | None = None) -> ClusterProvider:
        """A handle for ``node_id``; it is not a member until ``join_cluster``.

        The handle claims the id for its session: while another session holds it, this raises
        NODE_ID_IN_USE, unless ``takeover`` is that session's ``takeover_token``. The id is free
        again when the holding session ends (docs/cluster.md, "Identity")."""

    def close(self) -> None:
        """Close every handle opened here and release the backend's resources."""
