"""The selector reactor: one polling thread for every stream, strangers bounded, closed streams released."""

from __future__ import annotations

import socket
import struct
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

import pytest

from reference.net import CloseReason, ConnectionLimits, Reactor, Stream
from reference.net.ledger import ResourceLedger
from reference.net.reactor import Outgoing

LOOPBACK = ("127.0.0.1", 0)
DEADLINE_ROUNDS = 400
"""Polls of 10 ms before a test gives up (a hang guard, not a timing assertion)."""


@dataclass
class Recorder:
    """A handler that remembers every callback."""

    accepted: list[Stream] = field(default_factory=list)
    received: dict[Stream, bytearray] = field(default_factory=dict)
    sent: list[object] = field(default_factory=list)
    closed: list[tuple[Stream, CloseReason]] = field(default_factory=list)
    bind_on_data: bool = True
    reply: list[Outgoing] = field(default_factory=list)
    """Sent (once) from the poller's own ``received`` callback, as a task that owns its reactor sends."""
    replied: list[object] = field(default_factory=list)


class Handler:
    def __init__(self, record: Recorder) -> None:
        self.record = record

    def accepted(self, stream: Stream) -> None:
        self.record.accepted.append(stream)

    def received(self, stream: Stream, data: memoryview) -> None:
        self.record.received.setdefault(stream, bytearray()).extend(data)
        if self.record.bind_on_data:
            stream.bind()
        if self.record.reply:
            reply, self.record.reply = self.record.reply, []
            self.record.replied += stream.send(reply)

    def sent(self, stream: Stream, tokens: list[object]) -> None:
        self.record.sent.extend(tokens)

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        self.record.closed.append((stream, reason))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ledger() -> Iterator[ResourceLedger]:
    ledger = ResourceLedger()
    yield ledger
    assert ledger.open_sockets() == []


def poll_until(reactor: Reactor, condition: Callable[[], object]) -> None:
    for _ in range(DEADLINE_ROUNDS):
        if condition():
            return
        reactor.poll(0.01)
    raise AssertionError("condition not reached")


def read_available(sock: socket.socket) -> bytes:
    """Everything the non-blocking ``sock`` holds now."""
    chunks = []
    try:
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)


def test_one_thread_serves_many_streams_and_releases_each_at_once(ledger: ResourceLedger) -> None:
    record = Recorder()
    reactor = Reactor(Handler(record), listen=LOOPBACK, ledger=ledger)
    threads_before = set(threading.enumerate())
    clients = [socket.create_connection(("127.0.0.1", reactor.port)) for _ in range(50)]
    try:
        for i, client in enumerate(clients):
            client.sendall(b"hello %d" % i)
        poll_until(reactor, lambda: len(record.received) == 50)
        assert set(threading.enumerate()) - threads_before == set()  # no thread started (another test's may end)
        assert sorted(bytes(b) for b in record.received.values()) == sorted(b"hello %d" % i for i in range(50))
        clients[0].close()
        poll_until(reactor, lambda: record.closed)
        stream, reason = record.closed[0]
        assert reason is CloseReason.PEER_CLOSED and stream.sock.fileno() == -1
        assert len(reactor.streams) == 49
    finally:
        for client in clients:
            client.close()
        reactor.close()


def test_an_unbound_stream_is_closed_at_the_bind_timeout(ledger: ResourceLedger) -> None:
    record = Recorder(bind_on_data=False)
    clock = FakeClock()
    reactor = Reactor(Handler(record), ConnectionLimits(bind_timeout_s=5.0), listen=LOOPBACK, ledger=ledger, clock=clock)
    client = socket.create_connection(("127.0.0.1", reactor.port))
    try:
        poll_until(reactor, lambda: record.accepted)
        clock.now = 4.9
        reactor.poll(0)
        assert record.closed == []
        clock.now = 5.0
        reactor.poll(0)
        assert [reason for _, reason in record.closed] == [CloseReason.BIND_TIMEOUT]
        assert reactor.streams == [] and reactor.pending == 0
    finally:
        client.close()
        reactor.close()


def test_a_bound_stream_outlives_the_bind_timeout(ledger: ResourceLedger) -> None:
    record = Recorder()
    clock = FakeClock()
    reactor = Reactor(Handler(record), ConnectionLimits(bind_timeout_s=5.0), listen=LOOPBACK, ledger=ledger, clock=clock)
    client = socket.create_connection(("127.0.0.1", reactor.port))
    try:
        client.sendall(b"credit")
        poll_until(reactor, lambda: record.received)
        clock.now = 100.0
        reactor.poll(0)
        assert record.closed == [] and len(reactor.streams) == 1
    finally:
        client.close()
        reactor.close()


def test_more_pending_streams_than_the_cap_evict_the_oldest(ledger: ResourceLedger) -> None:
    record = Recorder(bind_on_data=False)
    reactor = Reactor(Handler(record), ConnectionLimits(max_pending=3), listen=LOOPBACK, ledger=ledger)
    clients = []
    try:
        for _ in range(5):
            clients.append(socket.create_connection(("127.0.0.1", reactor.port)))
            count = len(clients)
            poll_until(reactor, lambda: len(record.accepted) == count)
        assert [reason for _, reason in record.closed] == [CloseReason.EVICTED] * 2
        assert [s for s, _ in record.closed] == record.accepted[:2]
        assert reactor.pending == 3 and len(reactor.streams) == 3
        assert len(ledger.open_sockets()) == 3 + 3  # listener, wake pair, three streams
    finally:
        for client in clients:
            client.close()
        reactor.close()


def drain(reactor: Reactor, client: socket.socket, total: int) -> None:
    """Poll while reading ``client`` until it received ``total`` bytes."""
    received = bytearray()
    client.setblocking(False)

    def drained() -> bool:
        received.extend(read_available(client))
        return len(received) == total

    poll_until(reactor, drained)


class BoundStream(NamedTuple):
    """A reactor serving one client whose stream is bound, with a send buffer too small to take much."""

    record: Recorder
    reactor: Reactor
    client: socket.socket
    stream: Stream


@pytest.fixture
def bound(ledger: ResourceLedger) -> Iterator[BoundStream]:
    with bound_stream(ledger, ConnectionLimits(), time.monotonic) as served:
        yield served


@contextmanager
def bound_stream(ledger: ResourceLedger, limits: ConnectionLimits, clock: Callable[[], float]) -> Iterator[BoundStream]:
    record = Recorder()
    reactor = Reactor(Handler(record), limits, listen=LOOPBACK, ledger=ledger, clock=clock)
    client = socket.create_connection(("127.0.0.1", reactor.port))
    try:
        client.sendall(b"bind")
        poll_until(reactor, lambda: record.received)
        stream = record.accepted[0]
        stream.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # the kernel takes little at once
        yield BoundStream(record, reactor, client, stream)
    finally:
        client.close()
        reactor.close()


def test_writes_the_kernel_refuses_are_queued_and_reported_in_order(bound: BoundStream) -> None:
    record, reactor, client, stream = bound
    chunk = b"x" * 65536
    written_now = stream.send([Outgoing((chunk,), i) for i in range(64)])
    assert len(written_now) < 64 and stream.queued_bytes > 0  # 4 MiB do not fit in the socket buffers
    drain(reactor, client, 64 * 65536)
    poll_until(reactor, lambda: len(written_now) + len(record.sent) == 64)
    assert written_now + record.sent == list(range(64))
    assert stream.queued_bytes == 0


def test_the_poller_itself_may_send_more_than_the_kernel_takes(bound: BoundStream) -> None:
    record, reactor, client, stream = bound
    record.reply = [Outgoing((b"r" * 65536,), i) for i in range(64)]
    client.sendall(b"go")
    poll_until(reactor, lambda: record.replied or record.sent)  # the send inside the callback returned
    drain(reactor, client, 64 * 65536)
    poll_until(reactor, lambda: len(record.replied) + len(record.sent) == 64)
    assert record.replied + record.sent == list(range(64)) and stream.queued_bytes == 0


def test_a_closed_stream_abandons_its_queue_and_refuses_sends(bound: BoundStream) -> None:
    record, reactor, client, stream = bound
    stream.send([Outgoing((b"y" * 65536,), i) for i in range(64)])
    stream.close()
    poll_until(reactor, lambda: record.closed)
    assert record.closed == [(stream, CloseReason.LOCAL)]
    assert stream.abandoned and stream.abandoned == sorted(stream.abandoned)
    with pytest.raises(OSError, match="closed by its owner"):  # a later send says why it cannot
        stream.send([Outgoing((b"z",))])


def test_send_from_another_thread_wakes_the_poller(bound: BoundStream) -> None:
    record, reactor, client, stream = bound
    sender = threading.Thread(target=lambda: stream.send([Outgoing((b"w" * 65536,), i) for i in range(32)]))
    sender.start()
    sender.join()
    drain(reactor, client, 32 * 65536)


def test_a_reset_connection_is_closed_as_failed_not_as_a_clean_end(bound: BoundStream) -> None:
    """A reset is a failure (the writer then fails the DATA it had not written), never a peer's clean close."""
    record, reactor, client, _ = bound
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # linger 0: an RST instead of a FIN, so the server's next read fails
    poll_until(reactor, lambda: record.closed)
    assert [reason for _, reason in record.closed] == [CloseReason.FAILED]
    assert reactor.streams == []


def test_a_send_while_others_wait_in_the_queue_goes_after_them(bound: BoundStream) -> None:
    """Even when the kernel has room again (the peer read) before the poller wrote the queue, a new
    message is queued behind the waiting ones: bytes never overtake each other."""
    record, reactor, client, stream = bound
    stream.send([Outgoing((b"x" * 65536,), i) for i in range(16)])
    assert stream.queued_bytes > 0
    client.setblocking(False)
    received = bytearray(read_available(client))  # room in the kernel again, the queue still waiting
    stream.send([Outgoing((b"Z",), "last")])

    def drained() -> bool:
        received.extend(read_available(client))
        return len(received) >= 16 * 65536 + 1

    poll_until(reactor, drained)
    assert bytes(received) == b"x" * (16 * 65536) + b"Z"


def test_a_departing_stream_writes_its_queue_then_closes_and_ignores_what_arrives(bound: BoundStream) -> None:
    """A refusal queued behind 4 MiB the peer has not read yet reaches it, last, before the close."""
    record, reactor, client, stream = bound
    stream.send([Outgoing((b"e" * 65536,), i) for i in range(64)] + [Outgoing((b"REFUSED",), "refusal")])
    assert stream.queued_bytes > 0
    stream.depart()
    reactor.poll(0)  # asked from outside the poller: carried out at its next round
    client.sendall(b"more")  # discarded: the owner serves a departing stream no more
    with pytest.raises(OSError, match="departing"):
        stream.send([Outgoing((b"late",))])
    assert record.closed == [] and not stream.closed and stream.ended
    received = bytearray()
    client.setblocking(False)

    def ended() -> bool:
        received.extend(read_available(client))
        return bool(record.closed)

    poll_until(reactor, ended)
    client.settimeout(10.0)  # a hang guard: the kernel still holds the last bytes, then the end
    while chunk := client.recv(1 << 20):
        received.extend(chunk)
    assert bytes(received) == b"e" * 64 * 65536 + b"REFUSED"
    assert record.closed == [(stream, CloseReason.LOCAL)] and record.sent[-1] == "refusal"
    assert bytes(record.received[stream]) == b"bind"


def test_a_departing_stream_whose_peer_never_reads_is_closed_at_linger_s(ledger: ResourceLedger) -> None:
    clock = FakeClock()
    with bound_stream(ledger, ConnectionLimits(linger_s=5.0), clock) as (record, reactor, _, stream):
        stream.send([Outgoing((b"e" * 65536,), i) for i in range(64)])
        stream.depart()
        reactor.poll(0)  # it departs at 0
        clock.now = 4.9
        reactor.poll(0)
        assert record.closed == []
        clock.now = 5.0
        reactor.poll(0)
        assert record.closed == [(stream, CloseReason.LOCAL)] and stream.abandoned


def test_a_stream_asked_to_depart_again_keeps_its_first_linger_deadline(ledger: ResourceLedger) -> None:
    """The reactor hands every departure to the policy (spec/departure.py), which keeps the first deadline."""
    clock = FakeClock()
    with bound_stream(ledger, ConnectionLimits(linger_s=5.0), clock) as (record, reactor, _, stream):
        stream.send([Outgoing((b"e" * 65536,), i) for i in range(64)])
        stream.depart()
        reactor.poll(0)  # it departs at 0
        clock.now = 3.0
        stream.depart()
        reactor.poll(0)
        clock.now = 5.0
        reactor.poll(0)
        assert record.closed == [(stream, CloseReason.LOCAL)] and stream.abandoned


def test_a_stream_with_more_than_linger_bytes_queued_closes_at_once(ledger: ResourceLedger) -> None:
    with bound_stream(ledger, ConnectionLimits(linger_bytes=65536), time.monotonic) as (record, reactor, _, stream):
        stream.send([Outgoing((b"e" * 65536,), i) for i in range(64)])
        assert stream.queued_bytes > 65536
        stream.depart()
        poll_until(reactor, lambda: record.closed)
        assert record.closed == [(stream, CloseReason.LOCAL)] and stream.abandoned
