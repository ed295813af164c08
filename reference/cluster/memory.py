"""The in-process cluster provider (the embedded default): the model under a lock, a failure
detector on a ticker thread, one dispatcher per node, and an optional journal for durability.

The journal records every committed model call as a JSON line (fsynced before the call returns);
since the model is deterministic, replaying it rebuilds the state after a restart of the process
hosting the cluster. Without ``data_dir`` nothing survives the process, as for any embedded store.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from reference.cluster.dispatch import Dispatcher, Heartbeat
from spec.cluster.detector import FailureDetector
from spec.cluster.errors import ProviderClosed
from spec.cluster.interface import ClusterCore, FailureTiming
from spec.cluster.model import ClusterModel, Delivery
from spec.cluster.types import MetadataOp, NodeId, Revision, Scope, ShardId, check_id




@dataclass(frozen=True, slots=True)
class DetectorSettings:
    """Small defaults keep failover fast in a Spark job and the tests quick."""

    heartbeat_interval: float = 0.2
    pfail_after: float = 0.5
    fail_after: float = 1.0

    @property
    def check_interval(self) -> float:
        return self.heartbeat_interval / 2

    def timing(self) -> FailureTiming:
        return FailureTiming(self.heartbeat_interval, self.fail_after,
                             self.fail_after + 2 * self.check_interval)


def new_shard_id() -> ShardId:
    return ShardId(f"s-{uuid.uuid4().hex[:16]}")


class _Journal:
    """Append-only record of committed model calls, replayed on open."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file = open(path, "a", encoding="utf-8")

    def replay(self, model: ClusterModel) -> None:
        with open(self._path, encoding="utf-8") as lines:
            for line in lines:
                if line.endswith("\n"):  # a torn last line was never acknowledged
                    method, args = json.loads(line)
                    getattr(model, method)(*_decode(args))

    def append(self, method: str, args: Sequence[Any]) -> None:
        self._file.write(json.dumps([method, _encode(args)]) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _encode(args: Sequence[Any]) -> list[Any]:
    def one(a: Any) -> Any:
        if isinstance(a, Scope):
            return {"scope": a.value}
        if isinstance(a, (list, tuple)):
            return [{"key": o.key, "value": base64.b64encode(o.value).decode(), "expected": o.expected}
                    for o in a]
        return a
    return [one(a) for a in args]


def _decode(args: Sequence[Any]) -> list[Any]:
    def one(a: Any) -> Any:
        if isinstance(a, dict):
            return Scope(a["scope"])
        if isinstance(a, list):
            return [MetadataOp(o["key"], base64.b64decode(o["value"]),
                               None if o["expected"] is None else Revision(o["expected"])) for o in a]
        return a
    return [one(a) for a in args]


class InProcessCluster:
    """A cluster living in this process; ``open_node`` hands out per-node providers."""

    def __init__(self, settings: DetectorSettings = DetectorSettings(), data_dir: Path | None = None) -> None:
        self.settings = settings
        self._lock = threading.RLock()
        self._nodes: dict[NodeId, InProcessNode] = {}
        self._data_dir = data_dir
        self._model, self._detector, self._journal = self._load()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, name="cluster-detector", daemon=True)
        self._ticker.start()

    @property
    def timing(self) -> FailureTiming:
        return self.settings.timing()

    def _load(self) -> tuple[ClusterModel, FailureDetector, _Journal | None]:
        model = ClusterModel()
        detector = FailureDetector(self.settings.pfail_after, self.settings.fail_after)
        journal = None
        if self._data_dir is not None:
            self._data_dir.mkdir(parents=True, exist_ok=True)
            journal = _Journal(self._data_dir / "cluster.journal")
            journal.replay(model)
        now = time.monotonic()
        for node_id in model.members:  # a restart grants every member a fresh period
            detector.renew(node_id, now)
        return model, detector, journal

    def open_node(self, node_id: NodeId, core: ClusterCore, *, autorenew: bool = True) -> InProcessNode:
        """``autorenew=False`` leaves renewals to the caller (the TCP service renews on request)."""
        check_id("node", node_id)
        node = InProcessNode(self, node_id, core, autorenew)
        with self._lock:
            previous = self._nodes.get(node_id)
            self._nodes[node_id] = node
        if previous is not None:
            previous.close()
        return node

    def restart(self) -> None:
        """Drop the in-memory state and rebuild it from the journal, as a process restart would."""
        with self._lock:
            if self._journal is not None:
                self._journal.close()
            self._model, self._detector, self._journal = self._load()

    def close(self) -> None:
        self._stop.set()
        self._ticker.join(5.0)
        with self._lock:
            nodes = list(self._nodes.values())
        for node in nodes:
            node.close()
        if self._journal is not None:
            self._journal.close()

    # -- used by node handles --------------------------------------------------------------

    def commit(self, method: str, *args: Any) -> Any:
        """Run one model call atomically, journal it, and hand out its notifications."""
        with self._lock:
            result = getattr(self._model, method)(*args)
            deliveries: list[Delivery] = result[1] if isinstance(result, tuple) else result
            if self._journal is not None:
                self._journal.append(method, args)
            for recipient, notification in deliveries:
                node = self._nodes.get(recipient)
                if node is not None:
                    node.dispatcher.post(notification)
            if method == "join_cluster":
                self._detector.renew(args[0], time.monotonic())
            elif method == "remove_from_cluster":
                self._detector.forget(args[1])
            return result[0] if isinstance(result, tuple) else None

    def renew(self, node_id: NodeId) -> None:
        with self._lock:
            if node_id in self._model.members:
                self._detector.renew(node_id, time.monotonic())

    def detach(self, node: InProcessNode) -> None:
        with self._lock:
            if self._nodes.get(node.node_id) is node:
                del self._nodes[node.node_id]

    def _tick_loop(self) -> None:
        while not self._stop.wait(self.settings.check_interval):
            with self._lock:
                for node_id, state in self._detector.tick(time.monotonic()).items():
                    self.commit("set_state", node_id, state)


class InProcessNode:
    """One node's provider on an :class:`InProcessCluster`."""

    def __init__(self, cluster: InProcessCluster, node_id: NodeId, core: ClusterCore, autorenew: bool) -> None:
        self._cluster = cluster
        self._node_id = node_id
        self.dispatcher = Dispatcher(node_id, core)
        self._closed = threading.Event()
        self._heartbeats: threading.Thread | None = None
        if autorenew:
            self._heartbeats = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                                name=f"cluster-heartbeat {node_id}")
            self._heartbeats.start()

    @property
    def node_id(self) -> NodeId:
        return self._node_id

    @property
    def timing(self) -> FailureTiming:
        return self._cluster.timing

    def renew(self) -> float:
        """Renew this node's liveness; returns the TTL the Core may count on."""
        self._check_open()
        self._cluster.renew(self._node_id)
        return self.timing.ttl

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self._cluster.settings.heartbeat_interval):
            self.dispatcher.post(Heartbeat(self.renew()))

    def _call(self, method: str, *args: Any) -> Any:
        self._check_open()
        return self._cluster.commit(method, *args)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise ProviderClosed(f"node {self._node_id} was closed")

    def join_cluster(self, address: str) -> ShardId:
        shard = new_shard_id()
        self._call("join_cluster", self._node_id, address, shard)
        self.dispatcher.post(Heartbeat(self.timing.ttl))
        return shard

    def remove_from_cluster(self, node_id: NodeId) -> None:
        self._call("remove_from_cluster", self._node_id, node_id)

    def join_shard(self, shard_id: ShardId) -> None:
        self._call("join_shard", self._node_id, shard_id)

    def remove_from_shard(self, node_id: NodeId) -> ShardId:
        shard = new_shard_id()
        self._call("remove_from_shard", self._node_id, node_id, shard)
        return shard

    def update_gossip(self, ops: Sequence[MetadataOp], scope: Scope) -> Revision:
        revision: Revision = self._call("update_gossip", self._node_id, list(ops), scope)
        return revision

    def update_shard_log(self, ops: Sequence[MetadataOp]) -> Revision:
        revision: Revision = self._call("update_shard_log", self._node_id, list(ops))
        return revision

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._cluster.detach(self)
        self.dispatcher.close()
        if self._heartbeats is not None and self._heartbeats is not threading.current_thread():
            self._heartbeats.join(5.0)


