"""Client of the cluster service: a node provider in another process (e.g. a Spark executor).

The session's rules are its :class:`spec.cluster.session.ClientSession`'s (HELLO and resume,
request deadlines of ``max(timeout, fail_bound)``, fencing, backoff); this module carries them out:
callers send requests under a lock and wait for their answer until the session's deadline, then
tick it; a reader thread feeds it what arrives and routes what comes of it (replies to their
callers, notifications to the node's mailbox), and dials again when it says so; a heartbeat thread
sends RENEW. Time is read from one injected clock.

The client survives the network: when the connection breaks (or stays silent: a request not
answered by its deadline ends it, since a link that went down sends no FIN; sends block at most the
timeout), pending and new calls fail with PROVIDER_UNAVAILABLE, the Core is told ``cluster_down``
once, and the reader reconnects with exponential backoff. Its HELLO presents the session's takeover
token (so a service that has not noticed the break yet hands the id over) and the last revision it
was notified of; the service first notifies what happened since (docs/cluster.md, "Reconnecting"),
so nothing is lost, nothing is notified twice, and a batch is still one notification. A HELLO
refused with NODE_ID_IN_USE means another session took the id over: this handle is closed for good
(PROVIDER_CLOSED).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any, Callable, Sequence
from urllib.parse import unquote, urlsplit

from reference.cluster.dispatch import Dispatcher
from reference.cluster.heartbeat import HeartbeatThread
from spec.cluster import wire
from spec.cluster.errors import ClusterError, MalformedMessage, ProviderUnavailable
from spec.cluster.interface import ClusterCore, FailureTiming
from spec.cluster.session import Backoff, ClientSession, ClientStep, Phase
from spec.cluster.types import MetadataOp, NodeId, Revision, Scope, ShardId, check_batch, check_id
from spec.cluster.wire import ServiceKind, ServiceMessage
from spec.shared_secret import configured_secret

__all__ = ["Backoff", "RemoteCluster", "RemoteNode", "read_message"]

READ_BYTES = 1 << 16


def read_message(sock: socket.socket) -> ServiceMessage | None:
    """The next message, or None at a clean end of stream; never reads past it (the frame reader
    asks for the rest of the header or body only, its bounds checked first)."""
    frames = wire.FrameReader()
    while True:
        chunk = sock.recv(min(frames.wanted, 1 << 20))
        if not chunk:
            if frames.held_bytes:
                raise MalformedMessage("stream ended inside a frame")
            return None
        for body in frames.feed(chunk):
            return wire.decode(body)


def _abandon(sock: socket.socket) -> None:
    """End a connection the session gave up on; the reader then sees it end."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: ServiceMessage | None = None
        self.error: ClusterError | None = None


class RemoteCluster:
    """A cluster served by :class:`reference.cluster.service.ClusterService` at
    ``tcp://[:SECRET@]host:port``."""

    def __init__(self, url: str, timeout: float = 5.0, backoff: Backoff = Backoff(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        parts = urlsplit(url)
        if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
            raise ValueError("cluster service url must be tcp://[:SECRET@]HOST:PORT")
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        secret = configured_secret(None if parts.password is None else unquote(parts.password), "the url's secret")
        self.secret = secret or ""  # what HELLO carries: empty when the url names none
        self.backoff = backoff
        self.clock = clock
        self._nodes: list[RemoteNode] = []
        self._timing: FailureTiming | None = None

    @property
    def timing(self) -> FailureTiming:
        if self._timing is None:
            raise ProviderUnavailable("timing is known once a node has connected")
        return self._timing

    def open_node(self, node_id: NodeId, core: ClusterCore, *, takeover: str | None = None) -> RemoteNode:
        node = RemoteNode(self, NodeId(check_id("node", node_id)), core, takeover)
        self._timing = node.timing
        self._nodes.append(node)
        return node

    def close(self) -> None:
        for node in self._nodes:
            node.close()


class RemoteNode:
    def __init__(self, cluster: RemoteCluster, node_id: NodeId, core: ClusterCore, takeover: str | None) -> None:
        self._cluster = cluster
        self._node_id = node_id
        self._clock = cluster.clock
        self._session = ClientSession(node_id, secret=cluster.secret, timeout=cluster.timeout, takeover=takeover,
                                      backoff=cluster.backoff)
        self._lock = threading.Lock()
        """Guards the session machine, the socket and the waiting callers."""
        self._waiting: dict[int, _Pending] = {}
        self._closed = threading.Event()
        self._released = False
        self._sock = self._connect()
        self.mailbox = Dispatcher(node_id, core)
        try:
            self._greet()
        except BaseException:
            self._sock.close()
            self.mailbox.close()
            raise
        timing = self.timing
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name=f"cluster-remote {node_id}")
        self._reader.start()
        self._heartbeats = HeartbeatThread(f"cluster-remote-heartbeat {node_id}", timing.heartbeat_interval,
                                           self._renew, self.mailbox, self._closed)
        self.mailbox.start()
        self._heartbeats.start()

    @property
    def node_id(self) -> NodeId:
        return self._node_id

    @property
    def timing(self) -> FailureTiming:
        timing = self._session.timing
        assert timing is not None, "known from the first WELCOME, before the handle is returned"
        return timing

    @property
    def takeover_token(self) -> str:
        return self._session.takeover or ""

    @property
    def reconnects(self) -> int:
        """How many times this handle reconnected (for tests and operators)."""
        return max(0, self._session.welcomes - 1)

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        address, timeout = (self._cluster.host, self._cluster.port), self._cluster.timeout
        try:
            sock = socket.create_connection(address, timeout=timeout)
        except OSError as exc:
            raise ProviderUnavailable(f"cluster service {address[0]}:{address[1]}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        seconds = int(timeout)  # sends block at most this long even on a dead link
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, int((timeout - seconds) * 1e6)))
        return sock

    def _greet(self) -> None:
        """Send HELLO on the fresh ``self._sock`` and read on this thread until the session is
        welcomed (the catch-up before WELCOME is delivered after it). Raises the refusal, or
        ProviderUnavailable when the connection ends or the session's HELLO deadline passes."""
        sock = self._sock
        with self._lock:
            hello = self._session.hello(self._clock())
        try:
            sock.sendall(hello)
            while True:
                with self._lock:
                    sock.settimeout(self._until(self._session.deadline))
                try:
                    data = sock.recv(READ_BYTES)
                except (TimeoutError, BlockingIOError):  # the HELLO deadline came (0 s left: non-blocking)
                    with self._lock:
                        step = self._session.tick(self._clock())
                    if step.close is not None:
                        raise ProviderUnavailable(f"cluster service HELLO: {step.close}") from None
                    continue
                if not data:
                    raise ProviderUnavailable("cluster service closed the connection during HELLO")
                with self._lock:
                    step = self._session.receive(data, self._clock())
                    self._carry_out(step)
                if step.welcomed:
                    break
        except OSError as exc:
            raise ProviderUnavailable(f"cluster service HELLO: {exc}") from None
        sock.settimeout(None)  # the reader blocks until data or close(); callers tick the deadlines

    def _until(self, deadline: float | None) -> float | None:
        return None if deadline is None else max(0.0, deadline - self._clock())

    def _carry_out(self, step: ClientStep) -> None:
        """Under the lock: answer the callers, tell the Core, end the connection if the step says so."""
        for request_id, reply in step.replies.items():
            self._answer(request_id, reply=reply)
        for request_id, error in step.failed.items():
            self._answer(request_id, error=error)
        for notification in step.notifications:
            self.mailbox.post(notification)
        if self._session.fenced is not None:
            self._closed.set()
        if step.close is not None:
            _abandon(self._sock)

    def _answer(self, request_id: int, reply: ServiceMessage | None = None, error: ClusterError | None = None) -> None:
        pending = self._waiting.pop(request_id, None)
        if pending is not None:
            pending.reply, pending.error = reply, error
            pending.done.set()

    def _read_loop(self) -> None:
        while True:
            reason = self._serve_connection()
            with self._lock:
                self._carry_out(self._session.connection_lost(reason, self._clock()))
                if self._session.phase is Phase.CLOSED:
                    return
            if not self._reconnect():
                return

    def _serve_connection(self) -> str:
        """Feed the session what arrives until the connection ends; why it ended."""
        try:
            while data := self._sock.recv(READ_BYTES):
                with self._lock:
                    step = self._session.receive(data, self._clock())
                    self._carry_out(step)
                if step.close is not None:
                    return step.close
        except (OSError, ClusterError) as exc:
            return f"cluster service connection broke: {exc}"
        finally:
            self._sock.close()
        return "cluster service closed the connection"

    def _reconnect(self) -> bool:
        """Dial whenever the session says so, until it is welcomed again (True) or over."""
        while True:
            with self._lock:
                if self._session.phase is Phase.CLOSED:
                    return False
                wait = self._until(self._session.deadline)
            if self._closed.wait(wait):
                return False
            with self._lock:
                step = self._session.tick(self._clock())
                self._carry_out(step)
            if not step.dial:
                continue
            try:
                sock = self._connect()
            except ProviderUnavailable:
                with self._lock:
                    self._session.dial_failed(self._clock())
                continue
            with self._lock:
                if self._closed.is_set():
                    sock.close()
                    return False
                self._sock = sock
            try:
                self._greet()
                return True
            except ClusterError as refused:
                sock.close()
                with self._lock:
                    self._carry_out(self._session.connection_lost(str(refused), self._clock()))

    # -- requests -------------------------------------------------------------------------------

    def _request(self, kind: ServiceKind, **payload: Any) -> ServiceMessage:
        pending = _Pending()
        with self._lock:
            request_id, frame = self._session.request(kind, self._clock(), **payload)
            self._waiting[request_id] = pending
            sock = self._sock
            try:
                sock.sendall(frame)
            except OSError as exc:
                self._session.forget(request_id)
                del self._waiting[request_id]
                _abandon(sock)
                raise ProviderUnavailable(f"cluster service: {exc}") from None
        while True:
            with self._lock:
                wait = self._until(self._session.deadline)
            if pending.done.wait(wait):
                break
            with self._lock:
                self._carry_out(self._session.tick(self._clock()))
        if pending.error is not None:
            raise pending.error
        assert pending.reply is not None
        return pending.reply

    def _renew(self) -> float | None:
        """One heartbeat (reference/cluster/heartbeat.py): the TTL the service granted."""
        try:
            reply = self._request(ServiceKind.RENEW)
        except ClusterError:
            return None  # the reader reports cluster_down and reconnects
        ttl: float = reply.payload["ttl_ms"] / 1000
        return ttl

    def join_cluster(self, address: str) -> ShardId:
        return ShardId(self._request(ServiceKind.JOIN_CLUSTER, address=address).payload["shard_id"])

    def remove_from_cluster(self, node_id: NodeId) -> None:
        self._request(ServiceKind.REMOVE_FROM_CLUSTER, node_id=node_id)

    def join_shard(self, shard_id: ShardId) -> None:
        self._request(ServiceKind.JOIN_SHARD, shard_id=shard_id)

    def remove_from_shard(self, node_id: NodeId) -> ShardId:
        return ShardId(self._request(ServiceKind.REMOVE_FROM_SHARD, node_id=node_id).payload["shard_id"])

    def update_gossip(self, ops: Sequence[MetadataOp], scope: Scope) -> Revision:
        reply = self._request(ServiceKind.UPDATE_GOSSIP, scope=scope.value, ops=wire.ops_to_wire(check_batch(ops)))
        return Revision(reply.payload["revision"])

    def update_shard_log(self, ops: Sequence[MetadataOp]) -> Revision:
        reply = self._request(ServiceKind.UPDATE_SHARD_LOG, ops=wire.ops_to_wire(check_batch(ops)))
        return Revision(reply.payload["revision"])

    def close(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
            self._session.close()
            sock = self._sock
        self._closed.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        self.mailbox.close()
        if self._reader is not threading.current_thread():
            self._reader.join(5.0)
        self._heartbeats.join(5.0)
