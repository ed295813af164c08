"""The pipeline's control plane on the cluster-provider interface.

Every process of a run (the driver, each sink task attempt) is a cluster node.  Gossip (GLOBAL
scope) carries what the others need to find and watch: the sync server's location, which the
driver rewrites when it restarts the server, and each sink's progress, which the driver's
progress line reads.  Membership says who is alive: a re-run sink waits until its previous
attempt is no longer OK before it replays, so two attempts never push the same origin at once.
Every value is written with compare-and-swap on the revision last seen (spec/cluster/cas.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reference.cluster.cas import write_with_cas
from spec.cluster.cas import CasWrite, KeptChanging
from spec.cluster.errors import RevisionMismatch
from spec.cluster.interface import ClusterBackend, ClusterProvider
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, NodeInfo, NodeState, Scope, ShardId
from spec.errors import RuntimeFailure

T = TypeVar("T")


class CoordinationTimeout(RuntimeFailure):
    """Something expected from the cluster (a value, a member leaving) did not happen in time."""

    condition = "PIPELINE_COORDINATION_TIMEOUT"


class PipelineCore:
    """The Core side of a node: keeps the latest gossip and membership and wakes waiters."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._gossip: dict[str, Entry] = {}
        self._membership: Membership | None = None

    def update_membership(self, snapshot: Membership) -> None:
        with self._cond:
            if self._membership is None or snapshot.epoch >= self._membership.epoch:
                self._membership = snapshot
            self._cond.notify_all()

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        with self._cond:
            for entry in entries:
                known = self._gossip.get(entry.key)
                if known is None or entry.revision > known.revision:
                    self._gossip[entry.key] = entry
            self._cond.notify_all()

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        """The pipeline keeps nothing in shard logs."""

    def cluster_heartbeat(self, ttl: float) -> None:
        """Liveness is the provider's business; the pipeline only reads others' states."""

    def cluster_down(self) -> None:
        """A node cut off keeps waiting on what it last saw; every wait has a deadline."""

    def entry(self, key: str) -> Entry | None:
        """The latest value of a gossip key seen here."""
        with self._cond:
            return self._gossip.get(key)

    def entries(self, prefix: str) -> dict[str, Entry]:
        """Every gossip key under ``prefix`` seen here."""
        with self._cond:
            return {k: e for k, e in self._gossip.items() if k.startswith(prefix)}

    def nodes(self) -> dict[NodeId, NodeInfo]:
        """The members of the latest membership snapshot."""
        with self._cond:
            return self._membership.nodes() if self._membership is not None else {}

    def wait(self, check: Callable[[], T | None], timeout: float, what: str) -> T:
        """Block until ``check()`` returns a value (re-checked on every notification)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (result := check()) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CoordinationTimeout(f"no {what} within {timeout:.0f}s")
                self._cond.wait(min(left, 0.5))
            return result


class Member:
    """A joined node of one run: publishes gossip values with CAS and reads others' values."""

    def __init__(self, backend: ClusterBackend, node_id: str, address: str) -> None:
        self.core = PipelineCore()
        self.node: ClusterProvider = backend.open_node(NodeId(node_id), self.core)
        self.node.join_cluster(address)
        self._written: dict[str, Entry] = {}
        """Per key, this node's last write: what its next write expects, even before it is notified."""

    def publish(self, key: str, value: dict[str, Any]) -> None:
        """Set gossip ``key`` to ``value`` (JSON), retrying CAS against the revision actually found."""
        data = json.dumps(value, sort_keys=True).encode()
        current = self._written.get(key)
        if current is None:
            current = self.core.entry(key)
        try:
            written = write_with_cas(CasWrite(key, current, lambda _found: data),
                                     lambda op: self.node.update_gossip([op], Scope.GLOBAL))
        except KeptChanging as kept:
            raise CoordinationTimeout(f"gossip key {kept.message}") from None
        assert written is not None  # the value does not depend on what was found
        self._written[key] = written

    def claim(self, key: str, value: dict[str, Any]) -> bool:
        """Create ``key`` if no node has: True for exactly one claimant."""
        data = json.dumps(value).encode()
        try:
            revision = self.node.update_gossip([MetadataOp(key=key, value=data, expected=None)], Scope.GLOBAL)
            self._written[key] = Entry(key=key, value=data, revision=revision)
            return True
        except RevisionMismatch:
            return False

    def value(self, key: str) -> dict[str, Any] | None:
        """The latest JSON value of ``key`` seen here."""
        entry = self.core.entry(key)
        return json.loads(entry.value) if entry is not None and entry.value else None

    def wait_value(self, key: str, timeout: float) -> dict[str, Any]:
        """The value of ``key``, waiting until some node has published it."""
        return self.core.wait(lambda: self.value(key), timeout, f"value of {key}")

    def wait_alone(self, prefix: str, timeout: float) -> None:
        """Wait until no other OK member's id starts with ``prefix`` (a previous attempt is gone)."""
        me = self.node.node_id

        def alone() -> bool | None:
            others = [n for n, info in self.core.nodes().items()
                      if n != me and n.startswith(prefix) and info.state is NodeState.OK]
            return True if not others else None

        self.core.wait(alone, timeout, f"end of the previous attempts of {prefix}*")

    def leave(self) -> None:
        """Leave the cluster gracefully (no FAIL is reported) and close the handle."""
        try:
            self.node.remove_from_cluster(self.node.node_id)
        finally:
            self.node.close()


class RunKeys:
    """The gossip keys of one run (runs sharing an etcd namespace never collide)."""

    def __init__(self, run_id: str) -> None:
        self.prefix = f"pipeline/{run_id}/"
        self.sync_server = f"{self.prefix}sync-server"
        self.progress = f"{self.prefix}progress/"
        self.chaos_kill = f"{self.prefix}chaos/task-killed"

    def sink_progress(self, reader: int) -> str:
        return f"{self.progress}sink{reader}"
