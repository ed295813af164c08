"""The scripted peer of the shuffle suite: real loopback sockets, the spec's machines for correct
behaviour, and deliberate deviations for the fault cases.

The peer plays the role opposite the implementation under test: a :class:`PeerReader` (driven by
:class:`~spec.shuffle.reader.ReaderMachine`) connects to a writer under test, a :class:`PeerWriter`
(driven by :class:`~spec.shuffle.writer.WriterMachine`, on a virtual clock so that every batch becomes
exactly one DATA) serves a reader under test. A case deviates by sending a message of its own
instead of, or besides, what the machine produced. Every byte both ways is recorded in the case's
wire log, tagged with the connection's name.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Final, Sequence

from conformance.framework import CaseContext
from spec.shuffle.codec import encode_frame
from spec.shuffle.errors import CodecError, ShuffleError
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Deliver, Failed, Send, Step
from spec.shuffle.writer import WriterMachine

RECV_CHUNK: Final = 65536
POLL_S: Final = 0.02
PEER_SETTINGS: Final = ShuffleSettings(writer_connection_timeout_ms=-1)
"""The peer's own machines never time out: the case deadline bounds every wait instead."""


def describe(message: Message) -> str:
    """A message in one short line, for expected/actual texts."""
    name = type(message).__name__
    extra = f" size={message.data_size} checksum={message.checksum}" if isinstance(message, DataMessage) else ""
    if isinstance(message, CreditMessage):
        extra = f" num={message.num_messages}"
    return f"{name}(w={message.writer_id} r={message.reader_id} seq={message.seq}{extra})"


class Link:
    """One TCP connection to the implementation under test; reads are bounded by the case deadline."""

    def __init__(self, sock: socket.socket, ctx: CaseContext, name: str) -> None:
        self.sock = sock
        self.ctx = ctx
        self.name = name
        self.decoder = FrameDecoder()
        self.inbox: deque[Message] = deque()
        self.raw = bytearray()
        """Every byte received, for cases that check the framing itself."""
        self.closed = False
        self.close_reason = ""
        self.closed_at: float | None = None
        self.decode_error: CodecError | None = None

    def send(self, message: Message) -> bool:
        return self.send_raw(encode_frame(message))

    def send_raw(self, data: bytes) -> bool:
        """Write ``data``; False (and the link marked closed) when the implementation has gone."""
        if self.closed:
            return False
        try:
            self.sock.settimeout(self.ctx.remaining())
            self.sock.sendall(data)
        except (TimeoutError, socket.timeout):
            raise
        except OSError as exc:
            self._mark_closed(f"send failed: {exc}")
            return False
        self.ctx.wirelog.record(f"peer->impl {self.name}", data)
        return True

    def _mark_closed(self, reason: str) -> None:
        if not self.closed:
            self.closed, self.close_reason, self.closed_at = True, reason, time.monotonic()

    def _fill(self, timeout: float) -> None:
        """One bounded read into the decoder."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(RECV_CHUNK)
        except (TimeoutError, socket.timeout):
            return
        except OSError as exc:
            self._mark_closed(f"connection reset ({exc})")
            return
        if not data:
            self._mark_closed("closed by the implementation (EOF)")
            return
        self.ctx.wirelog.record(f"impl->peer {self.name}", data)
        self.raw += data
        if self.decode_error is None:
            try:
                self.inbox.extend(self.decoder.feed(data))
            except CodecError as exc:
                self.decode_error = exc

    def receive(self, timeout: float) -> Message | None:
        """The next message; None when the link closed, its bytes did not decode, or ``timeout`` passed."""
        deadline = time.monotonic() + min(timeout, self.ctx.remaining())
        while not self.inbox:
            left = deadline - time.monotonic()
            if self.closed or self.decode_error is not None or left <= 0:
                return None
            self._fill(left)
        return self.inbox.popleft()

    def poll(self) -> Message | None:
        """A message if one is already buffered or arrives within a short poll."""
        return self.receive(POLL_S)

    def close(self) -> None:
        """Close from the peer's side (a deliberate early close, or the end of the case)."""
        self.sock.close()
        self._mark_closed("closed by the peer")


def connect(ctx: CaseContext, address: tuple[str, int], name: str, receive_buffer: int | None = None) -> Link:
    """A link to a listening implementation; ``receive_buffer`` shrinks SO_RCVBUF to make backpressure quick."""
    sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(ctx.remaining())
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return Link(sock, ctx, name)


class PeerReader:
    """A conforming reader (the spec's ReaderMachine) connected to a writer under test.

    ``hold_ack`` keeps the machine's TERMINATION_ACK in :attr:`held_ack` instead of sending it, so a
    case can send it late, twice, with another seq, or never.
    """

    def __init__(self, link: Link, writer_id: int, reader_id: int, hold_ack: bool = False,
                 settings: ShuffleSettings = PEER_SETTINGS) -> None:
        self.link = link
        self.writer_id = writer_id
        self.reader_id = reader_id
        self.hold_ack = hold_ack
        self.held_ack: TerminationAckMessage | None = None
        self.machine = ReaderMachine(0, reader_id, [writer_id], settings, 0.0)
        self.received: list[Message] = []
        self.records: list[bytes] = []
        self.error: ShuffleError | None = None
        """Why the spec's machine rejected what the writer under test sent, if it did."""

    @classmethod
    def open(cls, ctx: CaseContext, address: tuple[str, int], writer_id: int, reader_id: int,
             hold_ack: bool = False, receive_buffer: int | None = None, handshake: bool = True,
             settings: ShuffleSettings = PEER_SETTINGS) -> PeerReader:
        peer = cls(connect(ctx, address, f"r{reader_id}", receive_buffer), writer_id, reader_id, hold_ack, settings)
        if handshake:
            peer.handshake()
        return peer

    def handshake(self) -> None:
        """Send the handshake CREDIT, as the machine does on connect."""
        self._run(self.machine.connected(self.writer_id, 0.0))

    @property
    def terminated(self) -> bool:
        return any(isinstance(m, TerminationControlMessage) for m in self.received)

    @property
    def data(self) -> list[DataMessage]:
        return [m for m in self.received if isinstance(m, DataMessage)]

    def _run(self, step: Step) -> None:
        for send in step.sends:
            if isinstance(send.message, TerminationAckMessage) and self.hold_ack:
                self.held_ack = send.message
                continue
            self.link.send(send.message)
            if send.notify:
                self._run(self.machine.send_completed(send.peer, send.message.seq, 0.0))
        for event in step.events:
            if isinstance(event, Deliver):
                self.records.extend(event.records)
                self._run(self.machine.release(event.writer_id, event.seq, 0.0))
            elif isinstance(event, Failed) and self.error is None:
                self.error = event.error

    def step(self, timeout: float) -> Message | None:
        """Take one message from the writer and let the machine answer it."""
        message = self.link.receive(timeout)
        if message is not None:
            self.received.append(message)
            self._run(self.machine.received(self.writer_id, message, 0.0))
        elif self.link.decode_error is not None and self.error is None:
            self._run(self.machine.decode_failed(self.writer_id, self.link.decode_error, 0.0))
        return message

    def run_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Read and answer until ``done()``; False if the link ended or ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0 or self.step(left) is None:
                return done()
        return True

    def until_terminated(self, timeout: float) -> bool:
        return self.run_until(lambda: self.terminated, timeout)

    def send_held_ack(self, seq: int | None = None) -> bool:
        """Send the held ack, as the machine made it or with ``seq`` instead."""
        if self.held_ack is None:
            return False
        ack = self.held_ack
        if seq is not None:
            ack = TerminationAckMessage(seq, ack.writer_id, ack.reader_id)
        return self.link.send(ack)

    def outcome(self) -> str:
        """What the writer sent, in words, for the actual side of a verdict."""
        parts = [f"{len(self.data)} DATA, {len(self.records)} records"]
        terminators = [m for m in self.received if isinstance(m, TerminationControlMessage)]
        if terminators:
            parts.append(", ".join(describe(m) for m in terminators))
        if self.error is not None:
            parts.append(f"peer's reader machine rejected it: {self.error}")
        if self.link.decode_error is not None:
            parts.append(f"undecodable bytes: {self.link.decode_error}")
        if self.link.closed:
            parts.append(self.link.close_reason)
        return "; ".join(parts)


@dataclass
class PeerWriter:
    """A conforming writer (the spec's WriterMachine) serving one reader under test.

    The machine runs on a virtual clock: :meth:`batch` writes records and advances the clock past the
    flush period, so each batch becomes exactly one DATA. Messages are returned, not sent, so a
    case can send them as made, altered, twice or not at all.
    """

    ctx: CaseContext
    writer_id: int
    reader_id: int
    num_readers: int
    settings: ShuffleSettings = PEER_SETTINGS
    server: socket.socket = field(init=False)
    machine: WriterMachine = field(init=False)
    link: Link | None = None
    clock: float = 0.0
    heard: list[Message] = field(default_factory=list)
    """Every message the reader under test sent, in order."""
    error: ShuffleError | None = None

    def __post_init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.machine = WriterMachine(0, self.writer_id, self.num_readers, self.settings, self.clock)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.getsockname()[:2]
        return str(host), int(port)

    def accept(self) -> Link:
        """Wait for the reader under test to connect."""
        self.server.settimeout(self.ctx.remaining())
        sock, _ = self.server.accept()
        self.link = Link(sock, self.ctx, f"w{self.writer_id}")
        self._run(self.machine.connection_accepted(self.link.name, self.clock))
        return self.link

    @property
    def connected(self) -> Link:
        assert self.link is not None, "accept() first"
        return self.link

    def hear(self, timeout: float) -> Message | None:
        """One message from the reader under test, answered by the machine."""
        message = self.connected.receive(timeout)
        if message is not None:
            self.heard.append(message)
            self._run(self.machine.received(self.connected.name, message, self.clock))
        return message

    def bind(self, timeout: float) -> Message | None:
        """Accept and take the reader's first message (which binds the machine if it is a CREDIT)."""
        self.accept()
        return self.hear(timeout)

    @property
    def bound(self) -> bool:
        return self.machine.channels[self.reader_id].bound

    def batch(self, records: Sequence[bytes]) -> list[Send]:
        """The DATA messages the machine makes of ``records`` (one, unless they exceed a buffer)."""
        sends: list[Send] = []
        for record in records:
            sends += self._collect(self.machine.write(self.reader_id, record, self.clock))
        self.clock += 1.0
        return sends + self._collect(self.machine.tick(self.clock))

    def finish(self) -> list[Send]:
        """Flush and TERMINATION_CONTROL, as the machine makes them."""
        return self._collect(self.machine.finish(self.clock))

    def send(self, made: Send, instead: Message | None = None) -> bool:
        """Send what the machine made (or ``instead`` of it) and tell the machine the write completed."""
        ok = self.connected.send(instead if instead is not None else made.message)
        self.complete(made)
        return ok

    def complete(self, made: Send) -> None:
        """Tell the machine a write completed (also for a message the case chose not to send)."""
        if made.notify:
            self._run(self.machine.send_completed(made.peer, made.message.seq, self.clock))

    def send_all(self, sends: Sequence[Send]) -> bool:
        return all([self.send(s) for s in sends])

    def _collect(self, step: Step) -> list[Send]:
        self._record_failure(step)
        return [s for s in step.sends if s.peer == self.reader_id]

    def _run(self, step: Step) -> None:
        self._record_failure(step)
        for send in step.sends:
            self.send(send)

    def _record_failure(self, step: Step) -> None:
        for event in step.events:
            if isinstance(event, Failed) and self.error is None:
                self.error = event.error

    def credits(self) -> list[CreditMessage]:
        return [m for m in self.heard if isinstance(m, CreditMessage)]

    def acks(self) -> list[TerminationAckMessage]:
        return [m for m in self.heard if isinstance(m, TerminationAckMessage)]

    def close(self) -> None:
        if self.link is not None:
            self.link.close()
        self.server.close()
