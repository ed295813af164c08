"""Client of the cluster service: a node provider in another process (e.g. a Spark executor).

Requests are sent under a lock and answered in order; a reader thread routes replies to their
callers and events to the node's mailbox; a heartbeat thread sends RENEW.

The client survives the network: when the connection breaks (or stays silent: a request not
answered within the timeout ends it, since a link that went down sends no FIN; sends have the
same deadline), pending and new calls fail with PROVIDER_UNAVAILABLE, the Core is told ``cluster_down`` once, and the reader reconnects with
exponential backoff. Its HELLO presents the session's takeover token (so a service that has not
noticed the break yet hands the id over) and the last revision it was notified of; the service
first notifies what happened since (docs/cluster.md, "Reconnecting"), so nothing is lost, nothing
is notified twice, and a batch is still one notification. A HELLO refused with NODE_ID_IN_USE
means another session took the id over: this handle is closed for good (PROVIDER_CLOSED).
"""

from __future__ import annotations

import itertools
import random
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import unquote, urlsplit

from reference.cluster.dispatch import ClusterDown, Dispatcher
from reference.cluster.heartbeat import HeartbeatThread
from spec.cluster import wire
from spec.cluster.errors import (
    ERRORS_BY_CODE,
    ClusterError,
    MalformedMessage,
    NodeIdInUse,
    ProviderClosed,
    ProviderUnavailable,
    RevisionMismatch,
    Unauthenticated,
)
from spec.cluster.interface import ClusterCore, FailureTiming
from spec.cluster.model import GossipUpdate, MembershipUpdate, MembershipView, ShardLogUpdate
from spec.cluster.types import MetadataOp, NodeId, Revision, Scope, ShardId, check_batch, check_id
from spec.cluster.wire import ServiceKind, ServiceMessage
from spec.shared_secret import configured_secret


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
    """End a connection that stopped answering; the reader then reconnects."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _error_from(message: ServiceMessage) -> ClusterError:
    p = message.payload
    if message.kind is ServiceKind.CAS_ERROR:
        return RevisionMismatch(p["key"], p["expected"] or None, wire.cas_actual_from_wire(p))
    cls = ERRORS_BY_CODE.get(p["code"], ClusterError)
    error = cls.__new__(cls)
    ClusterError.__init__(error, p["message"])
    return error


@dataclass(frozen=True, slots=True)
class Backoff:
    """Reconnect delays: ``first``, doubling up to ``limit``, each scaled by a random 0.5..1."""

    first: float = 0.05
    limit: float = 2.0

    def delays(self) -> itertools.chain[float]:
        doubling = (min(self.first * 2 ** i, self.limit) for i in itertools.count())
        return itertools.chain(d * random.uniform(0.5, 1.0) for d in doubling)


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: ServiceMessage | None = None


class RemoteCluster:
    """A cluster served by :class:`reference.cluster.service.ClusterService` at
    ``tcp://[:SECRET@]host:port``."""

    def __init__(self, url: str, timeout: float = 5.0, backoff: Backoff = Backoff()) -> None:
        parts = urlsplit(url)
        if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
            raise ValueError("cluster service url must be tcp://[:SECRET@]HOST:PORT")
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        secret = configured_secret(None if parts.password is None else unquote(parts.password), "the url's secret")
        self.secret = secret or ""  # what HELLO carries: empty when the url names none
        self.backoff = backoff
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
        self._timeout = cluster.timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._closed = threading.Event()
        self._broken: str | None = "connecting"
        self._fenced: ClusterError | None = None
        self._released = False
        self._last_revision = 0
        self._seen_any = False
        self._membership: MembershipView | None = None
        """The membership as the service told it (MEMBERSHIP, then MEMBERSHIP_DELTA on it)."""
        self.reconnects = 0
        """How many times this handle reconnected (for tests and operators)."""
        self._sock = self._connect()
        self.mailbox = Dispatcher(node_id, core)
        try:
            welcome, early = self._hello(takeover, resume=False)
        except BaseException:
            self._sock.close()
            self.mailbox.close()
            raise
        self._timing = wire.timing_from_wire(welcome.payload)
        for message in early:  # committed while the service was opening this session
            self._on_event(message)
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name=f"cluster-remote {node_id}")
        self._reader.start()
        self._heartbeats = HeartbeatThread(f"cluster-remote-heartbeat {node_id}", self._timing.heartbeat_interval,
                                           self._renew, self.mailbox, self._closed)
        self.mailbox.start()
        self._heartbeats.start()

    @property
    def node_id(self) -> NodeId:
        return self._node_id

    @property
    def timing(self) -> FailureTiming:
        return self._timing

    @property
    def takeover_token(self) -> str:
        return self._session

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        address = (self._cluster.host, self._cluster.port)
        try:
            sock = socket.create_connection(address, timeout=self._timeout)
        except OSError as exc:
            raise ProviderUnavailable(f"cluster service {address[0]}:{address[1]}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        seconds = int(self._timeout)  # sends block at most this long even on a dead link
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", seconds, int((self._timeout - seconds) * 1e6)))
        return sock

    def _hello(self, takeover: str | None, resume: bool) -> tuple[ServiceMessage, list[ServiceMessage]]:
        """Identify on the fresh ``self._sock`` and read up to WELCOME on this thread: the WELCOME
        and the events before it (the catch-up of a resumed session), for the caller to deliver
        once the session counts as resumed. Raises the refusal."""
        sock = self._sock
        sock.settimeout(self._timeout)
        try:
            sock.sendall(wire.encode(ServiceKind.HELLO, 1, node_id=self._node_id, secret=self._cluster.secret,
                                     takeover=takeover or "", resume=resume, resume_after=self._last_revision))
            catch_up: list[ServiceMessage] = []
            while True:
                message = read_message(sock)
                if message is None:
                    raise ProviderUnavailable("cluster service closed the connection during HELLO")
                if message.kind in (ServiceKind.ERROR, ServiceKind.CAS_ERROR):
                    raise _error_from(message)
                if message.kind is ServiceKind.WELCOME:
                    break
                catch_up.append(message)
        except OSError as exc:
            raise ProviderUnavailable(f"cluster service HELLO: {exc}") from None
        sock.settimeout(None)  # the reader blocks until data or close(); calls have deadlines
        self._session: str = message.payload["session"]
        with self._lock:
            self._broken = None
        return message, catch_up

    def _read_loop(self) -> None:
        while True:
            reason = self._serve_connection()
            with self._lock:
                self._broken = reason
                waiting, self._pending = list(self._pending.values()), {}
            for pending in waiting:
                pending.done.set()
            if self._closed.is_set() and self._fenced is None:
                return  # closed by its owner
            self.mailbox.post(ClusterDown())
            if self._fenced is not None or not self._reconnect():
                return

    def _serve_connection(self) -> str:
        """Route messages until the connection ends; why it ended."""
        try:
            while (message := read_message(self._sock)) is not None:
                if message.request_id == 0:
                    if message.kind is ServiceKind.ERROR:
                        error = _error_from(message)
                        if isinstance(error, ProviderClosed):  # taken over by another session
                            self._fence(error)
                        return f"cluster service closed the connection: {error}"
                    self._on_event(message)
                    continue
                with self._lock:
                    pending = self._pending.pop(message.request_id, None)
                if pending is not None:
                    pending.reply = message
                    pending.done.set()
        except (OSError, ClusterError) as exc:
            return f"cluster service connection broke: {exc}"
        finally:
            self._sock.close()
        return "cluster service closed the connection"

    def _reconnect(self) -> bool:
        """Until closed: connect, HELLO as this session's successor, resume from the last revision.
        True once connected again."""
        for delay in self._cluster.backoff.delays():
            if self._closed.wait(delay):
                return False
            try:
                sock = self._connect()
            except ProviderUnavailable:
                continue
            with self._lock:
                if self._closed.is_set():
                    sock.close()
                    return False
                self._sock = sock
            try:
                _, catch_up = self._hello(self._session, resume=self._seen_any)
            except (NodeIdInUse, Unauthenticated) as exc:
                sock.close()
                self._fence(exc)
                return False
            except ClusterError:
                sock.close()
                continue
            self.reconnects += 1  # before the catch-up: a Core that hears of it sees the reconnect counted
            for message in catch_up:
                self._on_event(message)
            return True
        return False

    def _fence(self, reason: ClusterError) -> None:
        """Another session holds the id (or the secret changed): this handle is over."""
        self._fenced = ProviderClosed(f"node {self._node_id} is closed: {reason.message}")
        self._closed.set()

    def _on_event(self, message: ServiceMessage) -> None:
        p = message.payload
        match message.kind:
            case ServiceKind.MEMBERSHIP:
                self._membership = MembershipView(wire.membership_from_wire(p))
                self._saw(self._membership.epoch)
                self.mailbox.post(MembershipUpdate(snapshot=self._membership.snapshot()))
            case ServiceKind.MEMBERSHIP_DELTA:
                base, changes = wire.membership_changes_from_wire(p)
                view = self._membership
                if view is None or view.epoch != base:
                    raise MalformedMessage(f"membership changes on epoch {base}, but this node was told epoch "
                                           f"{None if view is None else view.epoch}")
                for change in changes:
                    view.apply(change)
                self._saw(view.epoch)
                self.mailbox.post(MembershipUpdate(snapshot=view.snapshot()))
            case ServiceKind.GOSSIP_UPDATE:
                entries = wire.entries_from_wire(p["entries"])
                self._saw(max((e.revision for e in entries), default=0))
                self.mailbox.post(GossipUpdate(entries=entries))
            case ServiceKind.SHARD_LOG_UPDATE:
                entries = wire.entries_from_wire(p["entries"])
                self._saw(max((e.revision for e in entries), default=0))
                self.mailbox.post(ShardLogUpdate(shard=ShardId(p["shard_id"]), entries=entries))
            case ServiceKind.CLUSTER_DOWN:
                self.mailbox.post(ClusterDown())

    def _saw(self, revision: int) -> None:
        self._seen_any = True
        self._last_revision = max(self._last_revision, revision)

    # -- requests -------------------------------------------------------------------------------

    def _request(self, kind: ServiceKind, **payload: Any) -> ServiceMessage:
        if self._closed.is_set():
            raise self._fenced or ProviderClosed(f"node {self._node_id} was closed")
        pending = _Pending()
        with self._lock:
            if self._broken is not None:
                raise ProviderUnavailable(f"{self._broken}; reconnecting")
            request_id = next(self._ids) + 1  # 1 is HELLO's
            self._pending[request_id] = pending
            sock = self._sock
            try:
                sock.sendall(wire.encode(kind, request_id, **payload))
            except OSError as exc:
                del self._pending[request_id]
                _abandon(sock)
                raise ProviderUnavailable(f"cluster service: {exc}") from None
        # No reply within the provider's own failure bound means this node is cut off anyway.
        patience = max(self._timeout, self._timing.fail_bound)
        if not pending.done.wait(patience) or pending.reply is None:
            with self._lock:
                self._pending.pop(request_id, None)
                broken = self._broken
            if broken is None:  # a silent connection is a dead one (a link down sends no FIN)
                _abandon(sock)
            raise ProviderUnavailable(broken or f"no reply to {kind.name} within {patience:.1f} s")
        if pending.reply.kind in (ServiceKind.ERROR, ServiceKind.CAS_ERROR):
            raise _error_from(pending.reply)
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
        self._closed.set()
        with self._lock:
            sock = self._sock
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        self.mailbox.close()
        if self._reader is not threading.current_thread():
            self._reader.join(5.0)
        self._heartbeats.join(5.0)
