"""Selector-driven non-blocking streams: a fixed number of threads, whatever the number of peers.

One thread at a time calls :meth:`Reactor.poll` (a server's I/O thread, or a task thread that
does its own I/O); it accepts, reads into one receive buffer shared by every stream (the owner
decodes each chunk before the next read, so per-stream memory is only what its decoder holds),
finishes writes the kernel could not take at once, and carries out the admission of strangers
that :class:`spec.admission.StrangerAdmission` decides: accepted streams must identify themselves
(the owner calls :meth:`Stream.bind` when its protocol finds the peer useful) within
``bind_timeout_s``, and at most ``max_pending`` may wait to do so (a newcomer evicts the oldest).
An owner that refuses a peer may :meth:`Stream.depart` instead of closing: the stream's queued output
(a refusal behind a large event) is written before it closes, within the bounds of
:class:`spec.departure.Departures` (``linger_bytes``, ``linger_s``), and what the peer sends meanwhile is
discarded.
Any thread may call :meth:`Stream.send`: it writes what the kernel takes without blocking and
queues the rest for the poller. A stream that ends, fails or is evicted releases its socket and
queue at once and is reported to the owner's :class:`Handler` once.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from enum import Enum
from itertools import chain, islice
from typing import Callable, Final, NamedTuple, Protocol, Sequence

from reference.net.ledger import ResourceLedger
from spec.admission import StrangerAdmission
from spec.departure import Departures

MAX_IOV: Final = 512
"""Buffers handed to one ``sendmsg`` (below every platform's IOV_MAX)."""

ACCEPTS_PER_POLL: Final = 64
"""Connections accepted per round, so a connection flood cannot starve the streams already open."""

Payload = bytes | bytearray | memoryview


class CloseReason(Enum):
    """Why a stream ended; the owner's ``closed`` callback receives it."""

    PEER_CLOSED = "the peer closed the connection"
    FAILED = "the connection failed"
    BIND_TIMEOUT = "the peer did not identify itself in time"
    EVICTED = "too many connections were waiting to identify themselves"
    LOCAL = "closed by its owner"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What a stranger can make a server hold before it has identified itself."""

    max_pending: int = 64
    """Accepted connections not yet bound; one more evicts the oldest of them."""
    bind_timeout_s: float = 120.0
    """Longest time an accepted connection may stay unbound (Spark's default spark.network.timeout)."""
    receive_buffer: int = 64 * 1024
    """Bytes of the one receive buffer the poller reads every stream into."""
    linger_bytes: int = 16 * 1024 * 1024
    """Most output a departing stream may still have queued to be written before it closes (more: it closes at once)."""
    linger_s: float = 5.0
    """Longest time a departing stream is held to write its queued output."""

    def __post_init__(self) -> None:
        if (self.max_pending < 1 or self.bind_timeout_s <= 0 or self.receive_buffer < 1
                or self.linger_bytes < 0 or self.linger_s <= 0):
            raise ValueError(f"connection limits must be positive: {self}")

    def admission(self) -> StrangerAdmission[Stream]:
        """The policy these limits describe, for one reactor."""
        return StrangerAdmission(self.max_pending, self.bind_timeout_s)

    def departures(self) -> Departures[Stream]:
        """How long and with how much output a departing stream is held, for one reactor."""
        return Departures(self.linger_bytes, self.linger_s)


class Outgoing(NamedTuple):
    """One message to write: its buffers, and a token reported to ``Handler.sent`` once all are written."""

    parts: Sequence[Payload]
    token: object = None


class Handler(Protocol):
    """The owner's side of a reactor; every callback runs on the polling thread."""

    def accepted(self, stream: Stream) -> None:
        """A peer connected to the listener."""

    def received(self, stream: Stream, data: memoryview) -> None:
        """Bytes arrived; ``data`` is valid only during the call (the buffer is reused)."""

    def sent(self, stream: Stream, tokens: list[object]) -> None:
        """Queued messages whose every byte the kernel took, in order."""

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        """The stream ended and released its socket; ``stream.abandoned`` lists tokens never written."""


class _Queued:
    __slots__ = ("views", "token")

    def __init__(self, views: list[memoryview], token: object) -> None:
        self.views = views
        self.token = token


class Stream:
    """One non-blocking connection of a :class:`Reactor`."""

    def __init__(self, reactor: Reactor, sock: socket.socket, label: str, bound: bool) -> None:
        self.sock = sock
        self.label = label
        self.bound = bound
        self.bytes_sent = 0
        self.bytes_received = 0
        self.abandoned: list[object] = []
        """Tokens of messages not fully written when the stream closed."""
        self._reactor = reactor
        self._lock = threading.Lock()
        self._queue: deque[_Queued] = deque()
        self._reading = True
        self._closed = False
        self._departing = False
        self._why_closed = ""

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def ended(self) -> bool:
        """Closed, or departing (closed once its queued output is written): its owner serves it no more."""
        return self._closed or self._departing

    @property
    def queued_bytes(self) -> int:
        with self._lock:
            return sum(len(v) for q in self._queue for v in q.views)

    def bind(self) -> None:
        """The peer identified itself: the bind deadline and the pending cap no longer apply (poller only)."""
        self.bound = True
        self._reactor._admission.identified(self)

    def proven(self) -> None:
        """The peer proved the shared secret but is not bound yet: strangers without it are evicted first (poller only)."""
        self._reactor._admission.proven(self)

    def send(self, messages: Sequence[Outgoing]) -> list[object]:
        """Write ``messages`` after anything queued, without blocking; return the tokens written now.

        What the kernel does not take is queued and written by the poller, which reports its
        tokens through ``Handler.sent``. Raises OSError if the stream is closed or the write fails.
        """
        with self._lock:
            if self._closed or self._departing:
                raise ConnectionAbortedError(f"{self.label} is closed: {self._why_closed or 'departing'}")
            parts = [p for message in messages for p in message.parts]
            if not self._queue and len(parts) <= MAX_IOV:
                # The common case: the kernel takes it all, and nothing is queued or wrapped.
                total = sum(map(len, parts))
                try:
                    written = self.sock.sendmsg(parts) if total else 0
                except (BlockingIOError, InterruptedError):
                    written = 0
                self.bytes_sent += written
                if written == total:
                    return [message.token for message in messages if message.token is not None]
                self._enqueue(messages)
                done = self._consume(written)
            else:
                waiting = bool(self._queue)
                self._enqueue(messages)
                if waiting:
                    return []
                done = self._write_locked()
                if not self._queue:
                    return done
        self._reactor._interest_changed(self)
        return done

    def _enqueue(self, messages: Sequence[Outgoing]) -> None:
        for message in messages:
            self._queue.append(_Queued([memoryview(p) for p in message.parts if len(p)], message.token))

    def pause(self) -> None:
        """Stop reading (TCP then pushes back on the peer)."""
        if self._reading:
            self._reading = False
            self._reactor._interest_changed(self)

    def resume(self) -> None:
        if not self._reading:
            self._reading = True
            self._reactor._interest_changed(self)

    def close(self) -> None:
        """Close now if called by the poller, else at its next round; reported as LOCAL."""
        self._reactor._ask(self, _Ask.CLOSE)

    def depart(self) -> None:
        """Close once what is queued is written (a refusal queued behind other output reaches the peer),
        within the reactor's ``linger_bytes`` and ``linger_s``; sends are refused from now on and what
        the peer sends is discarded. Reported as LOCAL, like :meth:`close`."""
        self._reactor._ask(self, _Ask.DEPART)

    # -- the reactor's side -----------------------------------------------------------------------

    def _events(self) -> int:
        with self._lock:
            writing = bool(self._queue)
        return (selectors.EVENT_READ if self._reading else 0) | (selectors.EVENT_WRITE if writing else 0)

    def _flush(self) -> list[object]:
        with self._lock:
            return [] if self._closed else self._write_locked()

    def _start_departing(self) -> int:
        """Refuse sends from now on; the bytes still queued."""
        with self._lock:
            self._departing = True
            self._reading = True  # what the peer sends is read and dropped, so closing does not reset it
            return sum(len(v) for q in self._queue for v in q.views)

    def _written_out(self) -> bool:
        with self._lock:
            return not self._queue

    def _write_locked(self) -> list[object]:
        """Write queued buffers until the kernel refuses; return tokens of messages completed."""
        done: list[object] = []
        while self._queue:
            views = list(islice(chain.from_iterable(q.views for q in self._queue), MAX_IOV))
            written = 0
            if views:
                try:
                    written = self.sock.sendmsg(views)
                except (BlockingIOError, InterruptedError):
                    return done
            self.bytes_sent += written
            done += self._consume(written)
            if written < sum(map(len, views)):
                return done
        return done

    def _consume(self, written: int) -> list[object]:
        """Drop ``written`` bytes from the head of the queue; return the tokens of messages completed."""
        done: list[object] = []
        left = written
        while self._queue:
            head = self._queue[0]
            views = head.views
            whole = 0
            while whole < len(views) and left >= len(views[whole]):
                left -= len(views[whole])
                whole += 1
            if whole < len(views):
                del views[:whole]
                views[0] = views[0][left:]
                break
            self._queue.popleft()
            if head.token is not None:
                done.append(head.token)
        return done

    def _release(self, reason: CloseReason, error: OSError | None) -> None:
        with self._lock:
            self._closed = True
            self._why_closed = reason.value if error is None else f"{reason.value} ({type(error).__name__}: {error})"
            self.abandoned = [q.token for q in self._queue if q.token is not None]
            self._queue.clear()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class _Ask(Enum):
    """What a thread other than the poller asked of a stream, carried out at the poller's next round."""

    UPDATE = "update"
    CLOSE = "close"
    DEPART = "depart"


class Reactor:
    """Streams served by whichever thread calls :meth:`poll`; optionally a listener for peers."""

    def __init__(self, handler: Handler, limits: ConnectionLimits = ConnectionLimits(), *,
                 listen: tuple[str, int] | None = None, ledger: ResourceLedger | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._handler = handler
        self._ledger = ledger
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._buffer = bytearray(limits.receive_buffer)
        self._streams: dict[int, Stream] = {}
        self._admission = limits.admission()
        """Accepted, unbound streams: the pending cap and the bind deadline."""
        self._lock = threading.Lock()
        self._departures = limits.departures()
        """Streams writing their last output before they close."""
        self._requests: deque[tuple[Stream, _Ask]] = deque()
        """Changes asked for by threads other than the poller."""
        self._poller: int | None = None
        self._read_through = clock()
        """Every byte that arrived before this time was handed to the handler."""
        self._wake_r, self._wake_w = socket.socketpair()
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
            self._enter(sock)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._listener: socket.socket | None = None
        if listen is not None:
            self._listener = socket.create_server(listen)
            self._listener.setblocking(False)
            self._enter(self._listener)
            self._selector.register(self._listener, selectors.EVENT_READ, None)

    @property
    def port(self) -> int:
        assert self._listener is not None, "this reactor does not listen"
        port: int = self._listener.getsockname()[1]
        return port

    @property
    def streams(self) -> list[Stream]:
        return list(self._streams.values())

    @property
    def pending(self) -> int:
        return len(self._admission)

    def connect(self, address: tuple[str, int], label: str, timeout_s: float, *, identified: bool = True) -> Stream:
        """Connect (blocking up to ``timeout_s``) and add the stream (poller only). ``identified=False``: the
        peer has yet to prove who it is (a handshake), so the stream is a stranger, under the same admission
        as an accepted one, until the owner calls :meth:`Stream.bind`."""
        sock = socket.create_connection(address, timeout=timeout_s)
        self._enter(sock)
        stream = self._add(sock, label, bound=identified)
        if not identified:
            for evicted in self._admission.accepted(stream, self._clock()):
                self._close(evicted, CloseReason.EVICTED, None)
        return stream

    def wake(self) -> None:
        """Make a blocked :meth:`poll` return."""
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def unread_for(self) -> float:
        """How long bytes may have been waiting unread: a round reads every stream that was readable
        when it began waiting, so once it is served everything that arrived before that moment was
        read (before its end, if it waited in vain); what arrived later may wait for the next round.
        What judges a peer's silence subtracts it (docs/cluster.md)."""
        return max(0.0, self._clock() - self._read_through)

    def poll(self, timeout_s: float) -> None:
        """One round: apply requests, wait up to ``timeout_s`` for readiness, serve it (one read of
        every readable stream), expire strangers."""
        self._poller = threading.get_ident()
        try:
            self._apply_requests()
            now = self._clock()
            for due in (self._admission.deadline(), self._departures.deadline()):
                if due is not None:
                    timeout_s = max(0.0, min(timeout_s, due - now))
            ready = self._selector.select(timeout_s)
            read_through = now if ready else self._clock()
            for key, mask in ready:
                stream = key.data
                if stream is None:
                    if key.fileobj is self._wake_r:
                        self._drain_wakeups()
                    else:
                        self._accept()
                    continue
                if mask & selectors.EVENT_WRITE and not stream.closed:
                    self._flush(stream)
                if mask & selectors.EVENT_READ and not stream.closed:
                    self._read(stream)
            self._read_through = read_through
            self._expire(self._clock())
        finally:
            self._poller = None

    def close(self) -> None:
        """Release every socket without callbacks; call once no thread polls any more."""
        for stream in list(self._streams.values()):
            stream._release(CloseReason.LOCAL, None)
        self._streams.clear()
        self._admission = self.limits.admission()
        self._departures = self.limits.departures()
        if self._listener is not None:
            self._listener.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- internals --------------------------------------------------------------------------------

    def _enter(self, sock: socket.socket) -> None:
        if self._ledger is not None:
            self._ledger.add_socket(sock)

    def _add(self, sock: socket.socket, label: str, bound: bool) -> Stream:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = Stream(self, sock, label, bound)
        self._streams[sock.fileno()] = stream
        self._selector.register(sock, selectors.EVENT_READ, stream)
        return stream

    def _accept(self) -> None:
        assert self._listener is not None
        for _ in range(ACCEPTS_PER_POLL):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors or the like: the peer's connect fails, the server lives on
            self._enter(sock)
            try:
                stream = self._add(sock, f"{address[0]}:{address[1]}", bound=False)
            except OSError:
                sock.close()  # reset before it could be set up: nothing to serve
                continue
            for evicted in self._admission.accepted(stream, self._clock()):
                self._close(evicted, CloseReason.EVICTED, None)
            self._handler.accepted(stream)

    def _read(self, stream: Stream) -> None:
        try:
            n = stream.sock.recv_into(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._close(stream, CloseReason.FAILED, error)
            return
        if n == 0:
            self._close(stream, CloseReason.PEER_CLOSED, None)
            return
        stream.bytes_received += n
        if not stream.ended:
            self._handler.received(stream, memoryview(self._buffer)[:n])

    def _flush(self, stream: Stream) -> None:
        try:
            done = stream._flush()
        except OSError as error:
            self._close(stream, CloseReason.FAILED, error)
            return
        self._update(stream)
        if done:
            self._handler.sent(stream, done)
        if stream.ended and not stream.closed and stream._written_out():
            self._close(stream, CloseReason.LOCAL, None)

    def _expire(self, now: float) -> None:
        for late in self._admission.expired(now):
            self._close(late, CloseReason.BIND_TIMEOUT, None)
        for late in self._departures.expired(now):
            self._close(late, CloseReason.LOCAL, None)

    def _depart(self, stream: Stream) -> None:
        """Every departure asked of an open stream goes to the policy (one already departing keeps its first
        deadline: the policy's rule, not this loop's)."""
        if stream.closed:
            return
        if self._departures.leaving(stream, stream._start_departing(), self._clock()):
            self._update(stream)
        else:
            self._close(stream, CloseReason.LOCAL, None)

    def _close(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        if stream.closed:
            return
        self._admission.closed(stream)
        self._departures.closed(stream)
        fd = stream.sock.fileno()
        if fd >= 0:
            self._streams.pop(fd, None)
            try:
                self._selector.unregister(stream.sock)
            except (KeyError, ValueError):
                pass
        stream._release(reason, error)
        self._handler.closed(stream, reason, error)

    def _update(self, stream: Stream) -> None:
        """Make the selector's interest match what the stream wants (poller only)."""
        if stream.closed:
            return
        events = stream._events()
        try:
            registered = self._selector.get_key(stream.sock).events
        except KeyError:
            registered = 0
        if events == registered:
            return
        if not events:
            self._selector.unregister(stream.sock)
        elif not registered:
            self._selector.register(stream.sock, events, stream)
        else:
            self._selector.modify(stream.sock, events, stream)

    def _interest_changed(self, stream: Stream) -> None:
        self._ask(stream, _Ask.UPDATE)

    def _ask(self, stream: Stream, ask: _Ask) -> None:
        """Carry out ``ask`` now on the poller, else at its next round."""
        if self._poller == threading.get_ident():
            self._carry_out(stream, ask)
            return
        with self._lock:
            self._requests.append((stream, ask))
        self.wake()

    def _carry_out(self, stream: Stream, ask: _Ask) -> None:
        match ask:
            case _Ask.UPDATE:
                self._update(stream)
            case _Ask.CLOSE:
                self._close(stream, CloseReason.LOCAL, None)
            case _Ask.DEPART:
                self._depart(stream)

    def _apply_requests(self) -> None:
        with self._lock:
            requests, self._requests = self._requests, deque()
        for stream, ask in requests:
            self._carry_out(stream, ask)

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass
