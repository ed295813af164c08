"""The scripted peer of the shuffle suite: real loopback sockets, the spec's machines for correct
behaviour, and deliberate deviations for the fault cases.

The peer plays the role opposite the implementation under test: a :class:`PeerReader` (driven by
:class:`~spec.shuffle.reader.ReaderMachine`) connects to a writer under test, a :class:`PeerWriter`
(driven by :class:`~spec.shuffle.writer.WriterMachine`, on a virtual clock so that every batch becomes
exactly one DATA) serves a reader under test. A case deviates by sending a message of its own
instead of, or besides, what the machine produced. Every byte both ways is recorded in the case's
wire log, tagged with the connection's name.

When the run is authenticated (``--secret-file``), every link first runs Spark's AuthEngine
handshake with the run's secret, as the role's side (the peer reader as client, the peer writer as
server), and then seals what it writes and opens what it reads; the wire log holds the frames in
clear. Cases about the handshake itself open links without it (``authenticate=False``).

The peer also says what it was owed when something does not come (a wait, recorded in the case's
context) and which case's requirement the implementation broke on the way (a blame), so that a
failure which only follows from an earlier fault is reported under that fault (see
:data:`WRITER_REQUIREMENTS`).
"""

from __future__ import annotations

import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Final, Mapping, Sequence

from conformance.framework import CaseContext
from spec.auth import AuthError, ClientHandshake, Rejected, ServerHandshake, TransportCipher
from spec.shuffle.codec import encode_frame
from spec.shuffle.errors import ChecksumVerificationFailed, CodecError, IncorrectSequenceNumber, ShuffleError
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

WRITER_REQUIREMENTS: Final[Mapping[type[ShuffleError], str]] = {
    ChecksumVerificationFailed: "shuffle/checksum/writer-crc32c",
    IncorrectSequenceNumber: "shuffle/sequence/writer-from-zero",
    CodecError: "shuffle/framing/writer-frames",
}
"""The case judging the writer requirement that the peer's reader machine found broken, by error."""
WRITER_DELIVERY: Final = "shuffle/data/writer-delivers-in-order"
"""Any other rejection of a writer's stream by the peer's reader machine."""
READER_CREDIT_FIRST: Final = "shuffle/handshake/reader-credit-first"
READER_CREDITS: Final = "shuffle/data/reader-credits-each-data"
READER_ACKS: Final = "shuffle/termination/reader-acks-echo"
"""The cases judging what a reader owes the peer writer: the handshake, a CREDIT per DATA, the ack."""


def writer_requirement(error: ShuffleError) -> str:
    """The case whose requirement a writer under test broke when the peer's reader raised ``error``."""
    return next((case for kind, case in WRITER_REQUIREMENTS.items() if isinstance(error, kind)), WRITER_DELIVERY)


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
        self._sent_decoder = FrameDecoder()
        self.sent: list[Message] = []
        """Every well-formed message the peer wrote, decoded from the bytes (raw writes included)."""
        self.cipher: TransportCipher | None = None
        self.auth_error: AuthError | None = None
        """Why the handshake or a sealed read failed, if it did."""

    def send(self, message: Message) -> bool:
        return self.send_raw(encode_frame(message))

    def send_raw(self, data: bytes) -> bool:
        """Write ``data``; False (and the link marked closed) when the implementation has gone."""
        if not self.write_unsealed(bytes(self.cipher.seal([data])) if self.cipher is not None else data):
            return False
        self.ctx.wirelog.record(f"peer->impl {self.name}", data)
        try:
            self.sent.extend(self._sent_decoder.feed(data))
        except CodecError:  # a deliberately malformed write: nothing after it is owed an answer
            self._sent_decoder = FrameDecoder()
        return True

    def write_unsealed(self, data: bytes) -> bool:
        """Write ``data`` as it is, never sealed (handshake frames, or bytes a case sends in clear on purpose)."""
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
        return True

    def authenticate(self, handshake: ClientHandshake | ServerHandshake, challenge: bytes | None = None) -> bool:
        """Run the handshake on this link within the case deadline; False (``auth_error`` says why)
        when it was refused or the implementation closed first. ``challenge``: a client's challenge
        already taken from ``handshake`` (a case that keeps it to replay it)."""
        if isinstance(handshake, ClientHandshake) and not self.write_unsealed(challenge or handshake.challenge()):
            self.auth_error = handshake.close()
            return False
        outcome = None
        while outcome is None:
            data = self._recv(self.ctx.remaining())
            if data is None:
                self.auth_error = handshake.close()
                return False
            outcome = handshake.receive(data)
        if outcome.reply:
            self.write_unsealed(outcome.reply)
        if isinstance(outcome, Rejected):
            self.auth_error = outcome.error
            return False
        self.cipher = outcome.cipher
        if outcome.rest:
            self._ingest(outcome.rest)
        return True

    def _mark_closed(self, reason: str) -> None:
        if not self.closed:
            self.closed, self.close_reason, self.closed_at = True, reason, time.monotonic()

    def _recv(self, timeout: float) -> bytes | None:
        """One bounded read: the bytes, b"" when none came in time, None once the link closed."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(RECV_CHUNK)
        except (TimeoutError, socket.timeout):
            return b""
        except OSError as exc:
            self._mark_closed(f"connection reset ({exc})")
            return None
        if not data:
            self._mark_closed("closed by the implementation (EOF)")
            return None
        return data

    def _fill(self, timeout: float) -> None:
        """One bounded read into the decoder."""
        data = self._recv(timeout)
        if data:
            self._ingest(data)

    def _ingest(self, data: bytes) -> None:
        if self.cipher is not None:
            try:
                data = bytes(self.cipher.open(data))
            except AuthError as exc:
                self.auth_error = exc
                self._mark_closed(f"sealed bytes rejected ({exc})")
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


class HandshakeFailed(RuntimeError):
    """An authenticated run's handshake with the implementation under test did not complete."""


def connect(ctx: CaseContext, address: tuple[str, int], name: str, receive_buffer: int | None = None,
            authenticate: bool = True) -> Link:
    """A link to a listening implementation; ``receive_buffer`` shrinks SO_RCVBUF to make backpressure quick.

    In an authenticated run the link completes the handshake first unless ``authenticate`` is False."""
    sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(ctx.remaining())
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    link = Link(sock, ctx, name)
    if authenticate and ctx.options.auth is not None and not link.authenticate(ClientHandshake(ctx.options.auth)):
        raise HandshakeFailed(f"the writer under test refused the handshake: {link.auth_error}")
    return link


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
                self._rejected(event.error)

    def _rejected(self, error: ShuffleError) -> None:
        self.error = error
        self.link.ctx.blame(writer_requirement(error), f"the peer's reader machine rejected the stream: {error}")

    def step(self, timeout: float) -> Message | None:
        """Take one message from the writer and let the machine answer it."""
        message = self.link.receive(timeout)
        if message is not None:
            self.received.append(message)
            self._run(self.machine.received(self.writer_id, message, 0.0))
        elif self.link.decode_error is not None and self.error is None:
            self._run(self.machine.decode_failed(self.writer_id, self.link.decode_error, 0.0))
            if self.error is None:
                self._rejected(self.link.decode_error)
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
        """Read the stream to its TERMINATION_CONTROL; a stream that does not end is recorded as a wait."""
        started = time.monotonic()
        if self.run_until(lambda: self.terminated, timeout):
            return True
        self.link.ctx.awaited(f"TERMINATION_CONTROL(w={self.writer_id} r={self.reader_id}) ending the stream",
                              time.monotonic() - started, self.outcome())
        return False

    def send_held_ack(self, seq: int | None = None) -> bool:
        """Send the held ack, as the machine made it or with ``seq`` instead."""
        if self.held_ack is None:
            return False
        ack = self.held_ack
        if seq is not None:
            ack = TerminationAckMessage(seq=seq, writer_id=ack.writer_id, reader_id=ack.reader_id)
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


@dataclass(frozen=True)
class Owed:
    """A message the reader under test owes the peer writer, and the case judging that duty."""

    kind: type
    what: str
    case_id: str


@dataclass
class PeerWriter:
    """A conforming writer (the spec's WriterMachine) serving one reader under test.

    The machine runs on a virtual clock: :meth:`batch` writes records and advances the clock past the
    flush period, so each batch becomes exactly one DATA. Messages are returned, not sent, so a
    case can send them as made, altered, twice or not at all.
    """

    ctx: CaseContext
    writer_id: int
    """The partition id its DATA and TERMINATION_CONTROL name."""
    reader_id: int
    num_readers: int
    settings: ShuffleSettings = PEER_SETTINGS
    directory_id: int | None = None
    """The id the reader under test knows it by and names in its handshake (a later job's map task id;
    None: the partition id, docs/spec/shuffle.md#channel-ids)."""
    server: socket.socket = field(init=False)
    machine: WriterMachine = field(init=False)
    link: Link | None = None
    clock: float = 0.0
    heard: list[Message] = field(default_factory=list)
    """Every message the reader under test sent, in order."""
    error: ShuffleError | None = None
    authenticate: bool = True
    """In an authenticated run, answer the reader's handshake on accepting it (False: the case does)."""

    def __post_init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.machine = WriterMachine(0, self.writer_id, self.num_readers, self.settings, self.clock,
                                     directory_id=self.directory_id)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.getsockname()[:2]
        return str(host), int(port)

    def accept(self) -> Link:
        """Wait for the reader under test to connect."""
        self.server.settimeout(self.ctx.remaining())
        started = time.monotonic()
        try:
            sock, _ = self.server.accept()
        except (TimeoutError, socket.timeout):
            self.ctx.awaited(f"the reader under test to connect to {self.address[0]}:{self.address[1]}",
                             time.monotonic() - started, "no connection")
            raise
        self.link = Link(sock, self.ctx, f"w{self.writer_id}")
        auth = self.ctx.options.auth
        if self.authenticate and auth is not None and not self.link.authenticate(ServerHandshake(auth)):
            raise HandshakeFailed(f"the reader under test failed the handshake: {self.link.auth_error}")
        self._run(self.machine.connection_accepted(self.link.name, self.clock))
        return self.link

    @property
    def connected(self) -> Link:
        assert self.link is not None, "accept() first"
        return self.link

    def hear(self, timeout: float) -> Message | None:
        """One message from the reader under test, answered by the machine.

        If the reader owed the peer something (:meth:`owed`) and it did not come first, the wait
        and the case whose requirement it broke are recorded in the case's context.
        """
        owed = self.owed()
        started = time.monotonic()
        message = self.connected.receive(timeout)
        if owed is not None and (message is None or not isinstance(message, owed.kind)):
            link = self.connected
            came = describe(message) if message is not None else link.close_reason or "nothing (connection open)"
            self.ctx.awaited(owed.what, time.monotonic() - started, came)
            self.ctx.blame(owed.case_id, f"the reader under test did not send {owed.what}; {came} came instead")
        if message is not None:
            self.heard.append(message)
            self._run(self.machine.received(self.connected.name, message, self.clock))
        return message

    def owed(self) -> Owed | None:
        """What a conforming reader sends next, judging by what the peer wrote and heard so far."""
        credits = len(self.credits())
        if credits == 0:
            return Owed(CreditMessage, f"the handshake CREDIT(w={self.machine.directory_id} r={self.reader_id} num=1)",
                        READER_CREDIT_FIRST)
        data = [m for m in self.connected.sent if isinstance(m, DataMessage)]
        if len(data) > credits - 1:
            return Owed(CreditMessage, f"a CREDIT for DATA seq={data[credits - 1].seq}", READER_CREDITS)
        ends = [m for m in self.connected.sent if isinstance(m, TerminationControlMessage)]
        if ends and not self.acks():
            return Owed(TerminationAckMessage, f"TERMINATION_ACK seq={ends[0].seq}", READER_ACKS)
        return None

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
