"""Client of the cluster service: a node provider in another process (e.g. a Spark executor).

Requests are sent under a lock and answered in order; a reader thread routes replies to their
callers and events to the node's dispatcher; a heartbeat thread sends RENEW. A broken connection
fails pending and later calls with ProviderUnavailable and tells the Core ``cluster_down``.
"""

from __future__ import annotations

import itertools
import socket
import threading
from typing import Any, Sequence
from urllib.parse import urlsplit

from reference.cluster.dispatch import ClusterDown, Dispatcher, Heartbeat
from reference.cluster.service import read_message
from spec.cluster import wire
from spec.cluster.errors import (
    ERRORS_BY_CODE,
    ClusterError,
    ProviderClosed,
    ProviderUnavailable,
    RevisionMismatch,
)
from spec.cluster.interface import ClusterCore, FailureTiming
from spec.cluster.model import GossipUpdate, MembershipUpdate, ShardLogUpdate
from spec.cluster.types import MetadataOp, NodeId, Revision, Scope, ShardId, check_batch, check_id
from spec.cluster.wire import Kind, Message


def _error_from(message: Message) -> ClusterError:
    p = message.payload
    if message.kind is Kind.CAS_ERROR:
        return RevisionMismatch(p["key"], p["expected"] or None, wire.cas_actual_from_wire(p))
    cls = ERRORS_BY_CODE.get(p["code"], ClusterError)
    error = cls.__new__(cls)
    ClusterError.__init__(error, p["message"])
    return error


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: Message | None = None


class RemoteCluster:
    """A cluster served by :class:`reference.cluster.service.ClusterService` at ``tcp://host:port``."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(url if "://" in url else f"tcp://{url}")
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"cluster service url needs host and port: {url!r}")
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self._nodes: list[RemoteNode] = []
        self._timing: FailureTiming | None = None

    @property
    def timing(self) -> FailureTiming:
        if self._timing is None:
            raise ProviderUnavailable("timing is known once a node has connected")
        return self._timing

    def open_node(self, node_id: NodeId, core: ClusterCore) -> RemoteNode:
        node = RemoteNode(self, NodeId(check_id("node", node_id)), core)
        self._timing = node.timing
        self._nodes.append(node)
        return node

    def close(self) -> None:
        for node in self._nodes:
            node.close()


class RemoteNode:
    def __init__(self, cluster: RemoteCluster, node_id: NodeId, core: ClusterCore) -> None:
        self._node_id = node_id
        self._timeout = cluster.timeout
        try:
            self._sock = socket.create_connection((cluster.host, cluster.port), timeout=cluster.timeout)
        except OSError as exc:
            raise ProviderUnavailable(f"cluster service {cluster.host}:{cluster.port}: {exc}") from None
        self._sock.settimeout(None)  # the reader blocks until data or close(); calls have deadlines
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.dispatcher = Dispatcher(node_id, core)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._closed = threading.Event()
        self._broken: str | None = None
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name=f"cluster-remote {node_id}")
        self._reader.start()
        welcome = self._request(Kind.HELLO, node_id=node_id)
        self._timing = wire.timing_from_wire(welcome.payload)
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                            name=f"cluster-remote-heartbeat {node_id}")
        self._heartbeats.start()

    @property
    def node_id(self) -> NodeId:
        return self._node_id

    @property
    def timing(self) -> FailureTiming:
        return self._timing

    def _request(self, kind: Kind, **payload: Any) -> Message:
        if self._closed.is_set():
            raise ProviderClosed(f"node {self._node_id} was closed")
        pending = _Pending()
        with self._lock:
            if self._broken is not None:
                raise ProviderUnavailable(self._broken)
            request_id = next(self._ids)
            self._pending[request_id] = pending
            try:
                self._sock.sendall(wire.encode(kind, request_id, **payload))
            except OSError as exc:
                del self._pending[request_id]
                raise ProviderUnavailable(f"cluster service: {exc}") from None
        if not pending.done.wait(self._timeout) or pending.reply is None:
            with self._lock:
                self._pending.pop(request_id, None)
            raise ProviderUnavailable(self._broken or f"no reply to {kind.name} within {self._timeout} s")
        if pending.reply.kind in (Kind.ERROR, Kind.CAS_ERROR):
            raise _error_from(pending.reply)
        return pending.reply

    def _read_loop(self) -> None:
        reason = "cluster service closed the connection"
        try:
            while (message := read_message(self._sock)) is not None:
                if message.request_id == 0:
                    self._on_event(message)
                    continue
                with self._lock:
                    pending = self._pending.pop(message.request_id, None)
                if pending is not None:
                    pending.reply = message
                    pending.done.set()
        except (OSError, ClusterError) as exc:
            reason = f"cluster service connection broke: {exc}"
        with self._lock:
            self._broken = reason
            waiting, self._pending = list(self._pending.values()), {}
        for pending in waiting:
            pending.done.set()
        if not self._closed.is_set():
            self.dispatcher.post(ClusterDown())

    def _on_event(self, message: Message) -> None:
        p = message.payload
        match message.kind:
            case Kind.MEMBERSHIP:
                self.dispatcher.post(MembershipUpdate(wire.membership_from_wire(p)))
            case Kind.GOSSIP_UPDATE:
                self.dispatcher.post(GossipUpdate(wire.entries_from_wire(p["entries"])))
            case Kind.SHARD_LOG_UPDATE:
                self.dispatcher.post(ShardLogUpdate(ShardId(p["shard_id"]), wire.entries_from_wire(p["entries"])))
            case Kind.CLUSTER_DOWN:
                self.dispatcher.post(ClusterDown())

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self._timing.heartbeat_interval):
            try:
                reply = self._request(Kind.RENEW)
            except ClusterError:
                continue  # the reader reports cluster_down when the connection is gone
            self.dispatcher.post(Heartbeat(reply.payload["ttl_ms"] / 1000))

    def join_cluster(self, address: str) -> ShardId:
        return ShardId(self._request(Kind.JOIN_CLUSTER, address=address).payload["shard_id"])

    def remove_from_cluster(self, node_id: NodeId) -> None:
        self._request(Kind.REMOVE_FROM_CLUSTER, node_id=node_id)

    def join_shard(self, shard_id: ShardId) -> None:
        self._request(Kind.JOIN_SHARD, shard_id=shard_id)

    def remove_from_shard(self, node_id: NodeId) -> ShardId:
        return ShardId(self._request(Kind.REMOVE_FROM_SHARD, node_id=node_id).payload["shard_id"])

    def update_gossip(self, ops: Sequence[MetadataOp], scope: Scope) -> Revision:
        reply = self._request(Kind.UPDATE_GOSSIP, scope=scope.value, ops=wire.ops_to_wire(check_batch(ops)))
        return Revision(reply.payload["revision"])

    def update_shard_log(self, ops: Sequence[MetadataOp]) -> Revision:
        reply = self._request(Kind.UPDATE_SHARD_LOG, ops=wire.ops_to_wire(check_batch(ops)))
        return Revision(reply.payload["revision"])

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self.dispatcher.close()
        for thread in (self._reader, self._heartbeats):
            if thread is not threading.current_thread():
                thread.join(5.0)
