"""The driver-hosted cluster service: an :class:`InProcessCluster` reachable over TCP.

One connection is one node: HELLO names it, then requests map one-to-one onto the provider's
operations and the node's notifications are pushed as events (layouts in spec/cluster/wire.py).
The client renews liveness with RENEW; a connection that dies stops renewing, so its node turns
FAIL within the declared bound, exactly like a crashed in-process node.

``python -m reference.cluster.service`` starts one on a free port and prints the port as its first
line (the conformance runner's ``exec:`` target uses this).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
from typing import Any, Sequence

from reference.cluster.memory import DetectorSettings, InProcessCluster, InProcessNode
from spec.cluster import wire
from spec.cluster.errors import ClusterError, MalformedMessage, RevisionMismatch
from spec.cluster.types import Entry, Membership, NodeId, Scope, ShardId, check_id
from spec.cluster.wire import Kind, Message

log = logging.getLogger(__name__)


def read_message(sock: socket.socket) -> Message | None:
    """The next message, or None at a clean end of stream; bounds are checked before reading."""
    header = _read_exactly(sock, wire.FRAME_HEADER.sizeof())
    if header is None:
        return None
    body = _read_exactly(sock, wire.body_length(header))
    if body is None:
        raise MalformedMessage("stream ended inside a frame")
    return wire.decode(body)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            if left == size:
                return None
            raise MalformedMessage("stream ended inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Connection:
    """Serves one node: the reader thread runs requests in order; events share the send lock."""

    def __init__(self, cluster: InProcessCluster, sock: socket.socket) -> None:
        self._cluster = cluster
        self._sock = sock
        self._send_lock = threading.Lock()
        self._node: InProcessNode | None = None

    def send(self, kind: Kind, request_id: int, **payload: Any) -> None:
        frame = wire.encode(kind, request_id, **payload)
        with self._send_lock:
            try:
                self._sock.sendall(frame)
            except OSError:
                pass  # the reader sees the broken connection and ends the node

    # ClusterCore, forwarding every notification as an event
    def update_membership(self, snapshot: Membership) -> None:
        self.send(Kind.MEMBERSHIP, 0, **wire.membership_to_wire(snapshot))

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        self.send(Kind.GOSSIP_UPDATE, 0, entries=wire.entries_to_wire(entries))

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        self.send(Kind.SHARD_LOG_UPDATE, 0, shard_id=shard, entries=wire.entries_to_wire(entries))

    def cluster_heartbeat(self, ttl: float) -> None:
        """Heartbeats reach the client as RENEWED replies, not as events."""

    def cluster_down(self) -> None:
        self.send(Kind.CLUSTER_DOWN, 0)

    def serve(self) -> None:
        try:
            while (message := read_message(self._sock)) is not None:
                self._answer(message)
        except (OSError, ClusterError) as exc:
            log.info("cluster service connection ended: %s", exc)
        finally:
            if self._node is not None:
                self._node.close()  # crash semantics: the node stops renewing
            self._sock.close()

    def _answer(self, message: Message) -> None:
        rid = message.request_id
        try:
            self._dispatch(message)
        except RevisionMismatch as exc:
            actual = exc.actual
            self.send(Kind.CAS_ERROR, rid, key=exc.key, expected=exc.expected or 0, found=actual is not None,
                      actual=None if actual is None else wire.entries_to_wire([actual])[0])
        except ClusterError as exc:
            self.send(Kind.ERROR, rid, code=exc.code, message=exc.detail)

    def _dispatch(self, message: Message) -> None:
        rid, p = message.request_id, message.payload
        if message.kind is Kind.HELLO:
            if self._node is not None:
                raise MalformedMessage("HELLO sent twice on one connection")
            self._node = self._cluster.open_node(NodeId(check_id("node", p["node_id"])), self, autorenew=False)
            self.send(Kind.WELCOME, rid, **wire.timing_to_wire(self._cluster.timing))
            return
        node = self._node
        if node is None:
            raise MalformedMessage(f"{message.kind.name} before HELLO")
        match message.kind:
            case Kind.JOIN_CLUSTER:
                self.send(Kind.SHARD, rid, shard_id=node.join_cluster(p["address"]))
            case Kind.REMOVE_FROM_CLUSTER:
                node.remove_from_cluster(NodeId(p["node_id"]))
                self.send(Kind.OK, rid)
            case Kind.JOIN_SHARD:
                node.join_shard(ShardId(p["shard_id"]))
                self.send(Kind.OK, rid)
            case Kind.REMOVE_FROM_SHARD:
                self.send(Kind.SHARD, rid, shard_id=node.remove_from_shard(NodeId(p["node_id"])))
            case Kind.UPDATE_GOSSIP:
                revision = node.update_gossip(wire.ops_from_wire(p["ops"]),
                                              wire.enum_from_wire(Scope, p["scope"]))
                self.send(Kind.REVISION, rid, revision=revision)
            case Kind.UPDATE_SHARD_LOG:
                self.send(Kind.REVISION, rid, revision=node.update_shard_log(wire.ops_from_wire(p["ops"])))
            case Kind.RENEW:
                self.send(Kind.RENEWED, rid, ttl_ms=round(node.renew() * 1000))
            case _:
                raise MalformedMessage(f"{message.kind.name} is not a request")


class ClusterService:
    """Accepts node connections on ``host:port`` (port 0: a free one, see ``port``)."""

    def __init__(self, cluster: InProcessCluster, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self._listener = socket.create_server((host, port))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept_loop, name="cluster-service", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def _accept_loop(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return  # listener closed
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._connections.append(sock)
            threading.Thread(target=_Connection(self.cluster, sock).serve, daemon=True,
                             name="cluster-service-conn").start()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(5.0)
        for sock in self._connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main(argv: list[str] | None = None) -> int:
    defaults = DetectorSettings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--heartbeat", type=float, default=defaults.heartbeat_interval)
    parser.add_argument("--fail-after", type=float, default=defaults.fail_after)
    args = parser.parse_args(argv)
    settings = DetectorSettings(args.heartbeat, min(args.fail_after, 2.5 * args.heartbeat), args.fail_after)
    service = ClusterService(InProcessCluster(settings), port=args.port)
    print(service.port, flush=True)
    try:
        sys.stdin.read()  # runs until stdin closes, so the parent's exit ends it
    finally:
        service.close()
        service.cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
