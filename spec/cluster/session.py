"""One session of the cluster service's wire (spec/cluster/wire.py) as two sans-IO machines, one per
end (h11's ``Connection``): each takes the bytes received, the caller's events and ``now``, returns
what to send and what came of it, and raises the typed errors of spec/cluster/errors.py. The
runtime (reference/cluster/service.py and remote.py) only moves bytes and carries out the steps:
every rule peers can see is here.

The service's end (:class:`ServiceSession`): HELLO comes first and is bounded by
``MAX_HELLO_BYTES``; it must carry the shared secret, a valid node id, and find a free session slot;
the node's frames are then bounded by ``MAX_REQUEST_BYTES``; a connection-level refusal is an ERROR
and a close; a session silent for longer than ``fail_bound`` over what was read is over; a session
taken over by the holder of its takeover token is told PROVIDER_CLOSED and closed.

The client's end (:class:`ClientSession`): HELLO presents the session's takeover token and the last
revision it was notified of; a request not answered within ``max(timeout, fail_bound)`` ends the
connection (a link that went down sends no FIN); a broken connection fails what waits, tells the
Core once and is dialled again after a backoff; a HELLO refused with NODE_ID_IN_USE or
UNAUTHENTICATED, or a PROVIDER_CLOSED from the service, fences the session for good: a stale session
never acts again.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterator

from spec.clock import after
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
from spec.cluster.interface import FailureTiming
from spec.cluster.model import GossipUpdate, MembershipUpdate, MembershipView, Notification, ShardLogUpdate
from spec.cluster.types import NodeId, ShardId, check_id
from spec.cluster.wire import ServiceKind, ServiceMessage

REQUESTS = frozenset({ServiceKind.JOIN_CLUSTER, ServiceKind.REMOVE_FROM_CLUSTER, ServiceKind.JOIN_SHARD,
                      ServiceKind.REMOVE_FROM_SHARD, ServiceKind.UPDATE_GOSSIP, ServiceKind.UPDATE_SHARD_LOG,
                      ServiceKind.RENEW})
"""What an identified node may ask; anything else after HELLO is answered MALFORMED_MESSAGE."""
HELLO_ID = 1
"""HELLO's request id; a client's requests count from 2."""


def error_frame(request_id: int, error: ClusterError) -> bytes:
    """The one-frame answer for ``error`` (CAS failures carry the current entry)."""
    if isinstance(error, RevisionMismatch):
        actual = error.actual
        return wire.encode(ServiceKind.CAS_ERROR, request_id, key=error.key, expected=error.expected or 0,
                           found=actual is not None,
                           actual=None if actual is None else wire.entries_to_wire([actual])[0])
    return wire.encode(ServiceKind.ERROR, request_id, code=error.code, message=error.message)


def error_from(message: ServiceMessage) -> ClusterError:
    """The typed error an ERROR or CAS_ERROR carries (the class its code names)."""
    p = message.payload
    if message.kind is ServiceKind.CAS_ERROR:
        return RevisionMismatch(p["key"], p["expected"] or None, wire.cas_actual_from_wire(p))
    cls = ERRORS_BY_CODE.get(p["code"], ClusterError)
    error = cls.__new__(cls)
    ClusterError.__init__(error, p["message"])
    return error


# -- the service's end ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hello:
    """A HELLO that passed the session's checks: open ``node_id`` (then :meth:`ServiceSession.welcome`,
    or :meth:`ServiceSession.refuse` with the error the opening raised)."""

    request_id: int
    node_id: NodeId
    takeover: str | None
    resume_after: int | None


@dataclass(frozen=True, slots=True)
class Request:
    """An identified node's request: run it and send the reply (or :func:`error_frame`)."""

    message: ServiceMessage


@dataclass(frozen=True, slots=True)
class Answer:
    """Send ``frame``; when ``close``, close the connection after it."""

    frame: bytes
    close: bool = False


ServiceInput = Hello | Request | Answer


class ServiceSession:
    """The service's end of one connection, from a stranger's first byte to its close."""

    def __init__(self, *, secret: str | None, max_sessions: int, fail_bound: float) -> None:
        self.secret = secret
        self.max_sessions = max_sessions
        self.fail_bound = fail_bound
        self.frames = wire.FrameReader(wire.MAX_HELLO_BYTES)
        self.node_id: NodeId | None = None
        self.last_frame = 0.0
        """When the last whole frame was read (any frame is a sign of life)."""
        self.closed = False

    def receive(self, data: bytes | memoryview, now: float, served: int) -> Iterator[ServiceInput]:
        """What the frames in ``data`` ask, one at a time (carry each out before taking the next: a
        HELLO changes how the next frame is read); ``served`` is how many nodes the service serves.
        A bad frame raises FrameTooLarge or MalformedMessage: send :meth:`connection_error`."""
        for body in self.frames.feed(data):
            if self.closed:
                return
            message = wire.decode(body)
            self.last_frame = now
            yield self._read(message, served)

    def _read(self, message: ServiceMessage, served: int) -> ServiceInput:
        if self.node_id is not None:
            if message.kind in REQUESTS:
                return Request(message)
            problem = "HELLO sent twice on one connection" if message.kind is ServiceKind.HELLO else \
                f"{message.kind.name} is not a request"
            return Answer(error_frame(message.request_id, MalformedMessage(problem)))
        p = message.payload
        try:
            if message.kind is not ServiceKind.HELLO:
                raise MalformedMessage(f"{message.kind.name} before HELLO")
            wire.check_hello_secret(p["secret"], self.secret)
            if served >= self.max_sessions:
                raise ProviderUnavailable(f"the cluster service serves at most {self.max_sessions} nodes")
            node_id = NodeId(check_id("node", p["node_id"]))
        except ClusterError as refused:
            return self.refuse(message.request_id, refused)
        return Hello(message.request_id, node_id, p["takeover"] or None, p["resume_after"] if p["resume"] else None)

    def refuse(self, request_id: int, error: ClusterError) -> Answer:
        """A HELLO refused (by the session's checks or by the cluster): answer it and close."""
        self.closed = True
        return Answer(error_frame(request_id, error), close=True)

    def welcome(self, hello: Hello, takeover_token: str, timing: FailureTiming) -> bytes:
        """The node of ``hello`` is open: its frames may now be as large as a full batch."""
        self.node_id = hello.node_id
        self.frames.bound = wire.MAX_REQUEST_BYTES
        return wire.encode(ServiceKind.WELCOME, hello.request_id, session=takeover_token, **wire.timing_to_wire(timing))

    def connection_error(self, error: ClusterError) -> bytes:
        """The ERROR (request id 0) sent before closing a connection whose bytes broke the wire."""
        self.closed = True
        return error_frame(0, error)

    def taken_over(self) -> bytes:
        """Another connection holding this session's takeover token opened its node: tell this one,
        then close it."""
        self.closed = True
        return error_frame(0, ProviderClosed(f"node {self.node_id} was taken over by another session"))

    @property
    def deadline(self) -> float | None:
        """The identified node's next frame is due by then (a stranger is bounded by the bind deadline)."""
        return None if self.node_id is None else after(self.last_frame, self.fail_bound)

    def silent(self, read_through: float, held_since: float | None = None) -> bool:
        """Whether the node sent no frame for longer than ``fail_bound`` before ``read_through`` (the
        time up to which everything that arrived was read): past the deadline, not at it. While the
        service holds the connection's reads (``held_since``: from that instant), what the node sent
        waits unread, so it was read only through the earlier of the two: held time is never silence."""
        deadline = self.deadline
        observed = read_through if held_since is None else min(read_through, held_since)
        return deadline is not None and observed > deadline


# -- the client's end ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Backoff:
    """Reconnect delays: ``first``, doubling up to ``limit``, each scaled by a random 0.5..1."""

    first: float = 0.05
    limit: float = 2.0

    def delays(self, uniform: Callable[[float, float], float] = random.uniform) -> Iterator[float]:
        doubling = (min(self.first * 2 ** i, self.limit) for i in itertools.count())
        return (d * uniform(0.5, 1.0) for d in doubling)


class Phase(Enum):
    """Where a client session is: dialling, greeting, open, or over."""

    DIALLING = "dialling"
    """No connection: dial at the deadline (the first, or again after a backoff)."""
    HELLO_SENT = "hello sent"
    OPEN = "open"
    CLOSED = "closed"
    """Closed by its owner, or fenced: a stale session never acts again."""


@dataclass(frozen=True, slots=True)
class ClusterDown:
    """Tell the Core ``cluster_down``: the connection broke."""


@dataclass(slots=True)
class ClientStep:
    """What came of one input, in order: notifications for the Core, requests answered or failed,
    whether the session was (re)established, and whether to close the connection (why) or dial."""

    notifications: list[Notification | ClusterDown] = field(default_factory=list)
    replies: dict[int, ServiceMessage] = field(default_factory=dict)
    failed: dict[int, ClusterError] = field(default_factory=dict)
    welcomed: bool = False
    close: str | None = None
    dial: bool = False


class ClientSession:
    """The client's end of one node's session, over as many connections as it takes."""

    def __init__(self, node_id: NodeId, *, secret: str, timeout: float, takeover: str | None = None,
                 backoff: Backoff = Backoff(), uniform: Callable[[float, float], float] = random.uniform) -> None:
        self.node_id = node_id
        self.secret = secret
        self.timeout = timeout
        self.backoff = backoff
        self._uniform = uniform
        self.phase = Phase.DIALLING
        self.takeover = takeover
        """The token HELLO presents: the caller's, then the one each WELCOME returned."""
        self.timing: FailureTiming | None = None
        self.fenced: ClusterError | None = None
        self.broken = "connecting"
        """Why no request can be sent now (empty while open)."""
        self.welcomes = 0
        self.last_revision = 0
        self.seen_any = False
        self.membership: MembershipView | None = None
        """The membership as the service told it (MEMBERSHIP, then MEMBERSHIP_DELTA on it)."""
        self._ids = itertools.count(HELLO_ID + 1)
        self._pending: dict[int, tuple[ServiceKind, float]] = {}
        self._frames = wire.FrameReader()
        self._catch_up: list[Notification | ClusterDown] = []
        self._hello_due = 0.0
        self._dial_at = 0.0
        self._delays: Iterator[float] = iter(())

    @property
    def deadline(self) -> float | None:
        """When :meth:`tick` has something to do: a request or HELLO unanswered, a dial due."""
        if self.phase is Phase.CLOSED:
            return None
        due = [due for _, due in self._pending.values()]
        if self.phase is Phase.DIALLING:
            due.append(self._dial_at)
        elif self.phase is Phase.HELLO_SENT:
            due.append(self._hello_due)
        return min(due, default=None)

    @property
    def patience(self) -> float:
        """How long a request may wait for its reply: no reply within the provider's own failure
        bound means this node is cut off anyway."""
        return max(self.timeout, self.timing.fail_bound if self.timing else 0.0)

    def hello(self, now: float) -> bytes:
        """A connection is up: the HELLO to send on it (a successor of this session, resuming after
        the last revision it was told of once it was told anything); PROVIDER_CLOSED once the session
        is over (its owner may close it while a dial is under way)."""
        if self.phase is Phase.CLOSED:
            raise self.fenced or ProviderClosed(f"node {self.node_id} was closed")
        self._require(Phase.DIALLING)
        self.phase = Phase.HELLO_SENT
        self._frames = wire.FrameReader()
        self._catch_up = []
        self._hello_due = after(now, self.timeout)
        return wire.encode(ServiceKind.HELLO, HELLO_ID, node_id=self.node_id, secret=self.secret,
                           takeover=self.takeover or "", resume=self.seen_any, resume_after=self.last_revision)

    def request(self, kind: ServiceKind, now: float, **payload: Any) -> tuple[int, bytes]:
        """The id and frame of a new request, due by ``now + patience``; ProviderClosed once the
        session is over, ProviderUnavailable while it has no connection."""
        if self.phase is Phase.CLOSED:
            raise self.fenced or ProviderClosed(f"node {self.node_id} was closed")
        if self.phase is not Phase.OPEN:
            raise ProviderUnavailable(f"{self.broken}; reconnecting")
        request_id = next(self._ids)
        self._pending[request_id] = (kind, after(now, self.patience))
        return request_id, wire.encode(kind, request_id, **payload)

    def forget(self, request_id: int) -> None:
        """The caller gave up on ``request_id`` (its frame could not be sent)."""
        self._pending.pop(request_id, None)

    def receive(self, data: bytes | memoryview, now: float) -> ClientStep:
        """The frames in ``data``. A HELLO refused raises its error (fencing the session when the id
        is taken or the secret refused); bytes that break the wire raise FrameTooLarge or
        MalformedMessage (call :meth:`connection_lost` after either)."""
        step = ClientStep()
        for body in self._frames.feed(data):
            message = wire.decode(body)
            if self.phase is Phase.HELLO_SENT:
                self._greeted(message, step)
            elif self.phase is Phase.OPEN:
                self._served(message, step, now)
            if step.close is not None:
                break
        return step

    def _greeted(self, message: ServiceMessage, step: ClientStep) -> None:
        if message.kind in (ServiceKind.ERROR, ServiceKind.CAS_ERROR):
            refused = error_from(message)
            if isinstance(refused, (NodeIdInUse, Unauthenticated)) and self.welcomes:
                self._fence(refused)
            else:
                self.phase = Phase.DIALLING  # dialled again after connection_lost's backoff
            raise refused
        if message.kind is not ServiceKind.WELCOME:  # committed while the service opened this session
            self._catch_up += self._notifications(message)
            return
        self.timing = wire.timing_from_wire(message.payload)
        self.takeover = message.payload["session"]
        self.phase = Phase.OPEN
        self.broken = ""
        self.welcomes += 1
        self._delays = iter(())
        step.welcomed = True
        step.notifications += self._catch_up
        self._catch_up = []

    def _served(self, message: ServiceMessage, step: ClientStep, now: float) -> None:
        if message.request_id == 0:
            if message.kind is ServiceKind.ERROR:
                error = error_from(message)
                if isinstance(error, ProviderClosed):  # taken over by another session
                    self._fence(error)
                    step.notifications.append(ClusterDown())
                step.close = f"cluster service closed the connection: {error}"
                return
            step.notifications += self._notifications(message)
            return
        if self._pending.pop(message.request_id, None) is None:
            return  # answered after its deadline: the caller was told it failed
        if message.kind in (ServiceKind.ERROR, ServiceKind.CAS_ERROR):
            step.failed[message.request_id] = error_from(message)
        else:
            step.replies[message.request_id] = message

    def _notifications(self, message: ServiceMessage) -> list[Notification | ClusterDown]:
        p = message.payload
        match message.kind:
            case ServiceKind.MEMBERSHIP:
                self.membership = MembershipView(wire.membership_from_wire(p))
                self._saw(self.membership.epoch)
                return [MembershipUpdate(snapshot=self.membership.snapshot())]
            case ServiceKind.MEMBERSHIP_DELTA:
                base, changes = wire.membership_changes_from_wire(p)
                view = self.membership
                if view is None or view.epoch != base:
                    raise MalformedMessage(f"membership changes on epoch {base}, but this node was told epoch "
                                           f"{None if view is None else view.epoch}")
                for change in changes:
                    view.apply(change)
                self._saw(view.epoch)
                return [MembershipUpdate(snapshot=view.snapshot())]
            case ServiceKind.GOSSIP_UPDATE:
                entries = wire.entries_from_wire(p["entries"])
                self._saw(max((e.revision for e in entries), default=0))
                return [GossipUpdate(entries=entries)]
            case ServiceKind.SHARD_LOG_UPDATE:
                entries = wire.entries_from_wire(p["entries"])
                self._saw(max((e.revision for e in entries), default=0))
                return [ShardLogUpdate(shard=ShardId(p["shard_id"]), entries=entries)]
            case ServiceKind.CLUSTER_DOWN:
                return [ClusterDown()]
        return []

    def _saw(self, revision: int) -> None:
        self.seen_any = True
        self.last_revision = max(self.last_revision, revision)

    def tick(self, now: float) -> ClientStep:
        """Time passed: a request unanswered by its deadline fails and ends the connection (a silent
        link is a dead one), as does a HELLO unanswered; a dial that is due is asked for."""
        step = ClientStep()
        late = [(rid, kind) for rid, (kind, due) in self._pending.items() if now >= due]
        for rid, kind in late:
            del self._pending[rid]
            step.failed[rid] = ProviderUnavailable(f"no reply to {kind.name} within {self.patience:.1f} s")
        if self.phase is Phase.OPEN and late:
            step.close = step.failed[late[0][0]].message
        elif self.phase is Phase.HELLO_SENT and now >= self._hello_due:
            step.close = f"no WELCOME within {self.timeout:.1f} s"
        elif self.phase is Phase.DIALLING and now >= self._dial_at:
            step.dial = True
        return step

    def connection_lost(self, reason: str, now: float) -> ClientStep:
        """The connection ended (closed, broken, or abandoned by a step): what waits fails, the Core
        is told once, and unless the session is over the service is dialled after a backoff."""
        step = ClientStep()
        for rid in self._pending:
            step.failed[rid] = ProviderUnavailable(reason)
        self._pending.clear()
        if self.phase is Phase.CLOSED:
            return step
        if self.phase is Phase.OPEN:
            step.notifications.append(ClusterDown())
        self.broken = reason
        self.phase = Phase.DIALLING
        self.dial_failed(now)
        return step

    def dial_failed(self, now: float) -> None:
        """A dial did not connect (or its HELLO was refused for now): dial again after the next delay
        (nothing once the session is over)."""
        if self.phase is Phase.CLOSED:
            return
        self._require(Phase.DIALLING)
        delay = next(self._delays, None)
        if delay is None:
            self._delays = self.backoff.delays(self._uniform)
            delay = next(self._delays)
        self._dial_at = after(now, delay)

    def close(self) -> None:
        """The owner closed the handle: nothing more is sent."""
        self.phase = Phase.CLOSED

    def _fence(self, reason: ClusterError) -> None:
        """Another session holds the id (or the secret changed): this handle is over."""
        self.fenced = ProviderClosed(f"node {self.node_id} is closed: {reason.message}")
        self.phase = Phase.CLOSED

    def _require(self, phase: Phase) -> None:
        if self.phase is not phase:
            raise RuntimeError(f"the session is {self.phase.value}, not {phase.value}")
