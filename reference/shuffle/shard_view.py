"""A directory node's Core: what the cluster provider notified it of (the shard log's newest
entries, the membership, whether this node is cut off), read without asking the provider."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, NamedTuple, Sequence

from reference.shuffle.directory_keys import readers_prefix, writers_prefix
from spec.cluster.types import Entry, Membership, NodeId, NodeInfo, NodeState, ShardId
from spec.shuffle.coordination import ShuffleKey


class TaskEntry(NamedTuple):
    """A task's shard-log record (a writer's location or a reader's node) and its node's health."""

    task_id: int
    record: dict[str, Any]
    state: NodeState | None
    """None once the node has left the cluster (a finished task leaves gracefully)."""
    address: str
    """The node's address in the membership (the task's host; "" when unknown or gone)."""

    @property
    def node(self) -> str:
        return str(self.record["node"])


class ShardView:
    """A node's Core: the newest entry of each shard-log key and the latest membership, as notified."""

    def __init__(self, on_entry: Callable[[Entry], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._log: dict[str, Entry] = {}
        self._membership: Membership | None = None
        self._nodes: dict[NodeId, NodeInfo] = {}
        self._on_entry = on_entry
        self._clock = clock
        self._renewed = clock()
        self._down = False

    def update_membership(self, snapshot: Membership) -> None:
        with self._lock:
            if self._membership is None or snapshot.epoch >= self._membership.epoch:
                self._membership, self._nodes = snapshot, snapshot.nodes()

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        """The shuffle keeps everything in its shard's log."""

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        fresh = self._keep(entries)
        if self._on_entry is not None:
            for entry in fresh:
                self._on_entry(entry)

    def remember(self, entry: Entry) -> None:
        """This node's own committed write, before its notification arrives (read your writes)."""
        self._keep([entry])

    def _keep(self, entries: Sequence[Entry]) -> list[Entry]:
        """Keep the newer entries (catch-ups and own writes may repeat, Q3); return those kept."""
        fresh = []
        with self._lock:
            for entry in entries:
                known = self._log.get(entry.key)
                if known is None or entry.revision > known.revision:
                    self._log[entry.key] = entry
                    fresh.append(entry)
        return fresh

    def cluster_heartbeat(self, ttl: float) -> None:
        """A renewal: this node is in the cluster again (or still)."""
        with self._lock:
            self._renewed, self._down = self._clock(), False

    def cluster_down(self) -> None:
        """Cut off: the task keeps streaming until ``cut_off_for`` exceeds the provider's bound."""
        with self._lock:
            self._down = True

    def cut_off_for(self) -> float | None:
        """Seconds since the last renewal while the provider says this node is down; None when up."""
        with self._lock:
            return self._clock() - self._renewed if self._down else None

    def entry(self, key: str) -> Entry | None:
        with self._lock:
            return self._log.get(key)

    def writers(self, key: ShuffleKey) -> list[TaskEntry]:
        """Registered writers of an attempt, by writer id."""
        return self._tasks(writers_prefix(key))

    def readers(self, key: ShuffleKey) -> list[TaskEntry]:
        """Readers that joined an attempt, by reader id."""
        return self._tasks(readers_prefix(key))

    def _tasks(self, prefix: str) -> list[TaskEntry]:
        with self._lock:
            out = []
            for name, entry in self._log.items():
                if name.startswith(prefix) and entry.value:
                    record = json.loads(entry.value)
                    info = self._nodes.get(NodeId(record["node"]))
                    out.append(TaskEntry(int(name[len(prefix):]), record, None if info is None else info.state,
                                         "" if info is None else info.address))
            return sorted(out)

    def failed_members(self, shard: ShardId) -> list[NodeId]:
        with self._lock:
            members = () if self._membership is None else self._membership.shards.get(shard, ())
            return [n.node_id for n in members if n.state is NodeState.FAIL]
