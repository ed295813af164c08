"""A modelled network of M writer and R reader machines, shared by the model checks and the BFS.

Every connection carries two FIFO wires (writer->reader, reader->writer). A machine's sends wait
in an outbox until a ``transmit`` moves them onto the wire (then the write "completes"), and a
``deliver`` hands the head of a wire to the receiver; a wire holds at most ``wire_capacity``
messages, so a reader that stops reading makes the writer's writes stall, as TCP does. Faults are
extra actions. An oracle, independent of the machines, says for each delivery which typed error
(condition and parameters) the receiver must report, and every invariant of the issue is checked
after every action.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field
from typing import Hashable, Iterator, Union

from spec.shuffle import codec, errors
from spec.shuffle.checksum import payload_checksum
from spec.clock import ms_after
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Bound, Completed, Deliver, Failed, PauseReading, ResumeReading, Send, Step
from spec.shuffle.transitions import ReaderChannelState, WriterChannelState, WriterState
from spec.shuffle.writer import WriterMachine

CLOSE = "CLOSE"
"""Wire marker: the sending side closed the connection (delivered after the data before it)."""
UNKNOWN_FRAME = codec.encode_frame(TerminationAckMessage(seq=0, writer_id=0,
                                                         reader_id=0))[:13] + b"\x00\x00\x00\x07" + bytes(16)
"""A frame whose body has message type 7, which no implementation can decode."""

WireItem = Union[Message, bytes, str]
Action = tuple[Hashable, ...]
W2R, R2W = "w2r", "r2w"
FAULTS = ("duplicate", "drop", "reorder", "corrupt", "close_early", "inject_unknown", "stray_credit", "stray_data", "stray_ack",
          "misnamed", "impostor")


class Violation(AssertionError):
    """An invariant of the protocol does not hold."""


@dataclass
class Pair:
    """One (writer, reader) connection and what the oracle knows about it."""

    connected: bool = False
    closed_by: set[str] = field(default_factory=set)
    outbox: dict[str, deque[Send]] = field(default_factory=lambda: {W2R: deque(), R2W: deque()})
    wire: dict[str, deque[WireItem]] = field(default_factory=lambda: {W2R: deque(), R2W: deque()})
    sent_seqs: list[int] = field(default_factory=list)
    tc_seq: int | None = None
    accepted_seq: int = -1
    partition_id: int | None = None
    """The writer id the reader's first accepted DATA or TERMINATION_CONTROL named (docs/spec/shuffle.md#channel-ids)."""
    reader_terminated: bool = False
    ack_counted: bool = False
    delivered: list[bytes] = field(default_factory=list)
    bound: bool = False


class Network:
    """The whole shuffle: machines, wires, producers' scripts and consumers, plus the oracle."""

    def __init__(
        self, script: dict[tuple[int, int], list[bytes]], num_writers: int, num_readers: int,
        settings: ShuffleSettings, wire_capacity: int = 2, faults: int = 0,
        ack_timeout_ms: int = -1, eager: bool = False,
    ) -> None:
        """``eager`` collapses the socket, the producer and the consumer (writes complete, a producer
        writes until it blocks or ends, records are consumed at once, a delivery hands over everything
        on that wire, and without faults an advisory credit on an empty wire arrives at once), which
        keeps the exhaustive search small; the order of deliveries across connections stays free.
        Timers then fire only when nothing else can happen, and faults strike connection (0, 0)."""
        self.eager = eager
        self.now = 0.0
        self.settings = settings
        self.wire_capacity = wire_capacity
        self.faults_left = faults
        self.script = script
        self.writers = {w: WriterMachine(0, w, num_readers, settings, self.now, ack_timeout_ms)
                        for w in range(num_writers)}
        self.readers = {r: ReaderMachine(0, r, list(range(num_writers)), settings, self.now)
                        for r in range(num_readers)}
        self.pairs = {(w, r): Pair() for w in range(num_writers) for r in range(num_readers)}
        # Each producer writes its records in a fixed interleaving over readers, then finishes.
        self.todo: dict[int, deque[tuple[int, bytes]]] = {
            w: deque((r, rec) for i in range(max((len(v) for v in script.values()), default=0))
                     for r in range(num_readers) for rec in script.get((w, r), [])[i:i + 1])
            for w in range(num_writers)
        }
        self.finished: set[int] = set()
        self.finish_time: dict[int, float] = {}
        self.ack_timeout_ms = ack_timeout_ms
        self.unreleased: dict[int, deque[tuple[int, int]]] = {r: deque() for r in range(num_readers)}
        self.paused: set[tuple[int, int]] = set()
        self.failures: dict[str, errors.ShuffleError] = {}
        self.expected_failure: dict[str, tuple[type[errors.ShuffleError], dict[str, object]]] = {}
        self.completed: set[str] = set()
        self.deadlines: dict[str, float | None] = {}

    # -- enumerating and applying actions ---------------------------------------------------------

    def actions(self) -> Iterator[Action]:
        """Every action enabled now, in a fixed order (the BFS and the liveness drain rely on it)."""
        for (w, r), pair in self.pairs.items():
            if not pair.connected and not self._done(f"r{r}"):
                yield ("connect", w, r)
        for w in self.writers:
            if not self._done(f"w{w}") and not self.writers[w].blocked and w not in self.finished:
                yield ("produce", w)
        for (w, r), pair in self.pairs.items():
            for d in (W2R, R2W):
                if pair.outbox[d] and (len(pair.wire[d]) < self.wire_capacity or self.eager):
                    yield ("transmit", d, w, r)
                if pair.wire[d] and not (d == W2R and (w, r) in self.paused and pair.wire[d][0] != CLOSE):
                    yield ("deliver", d, w, r)
        for r, queue in self.unreleased.items():
            if queue and not self._done(f"r{r}"):
                yield ("consume", r)
        if any(d is not None for d in self.deadlines.values()) and not (self.eager and self._busy()):
            yield ("tick",)
        if self.faults_left:
            yield from self._fault_actions()

    def _busy(self) -> bool:
        """Eager mode: something other than time can happen (timers fire only when all is quiet)."""
        return any(True for a in self._moves())

    def _moves(self) -> Iterator[Action]:
        for (w, r), pair in self.pairs.items():
            for d in (W2R, R2W):
                if pair.wire[d] and not (d == W2R and (w, r) in self.paused and pair.wire[d][0] != CLOSE):
                    yield ("deliver", d, w, r)
            if not pair.connected and not self._done(f"r{r}"):
                yield ("connect", w, r)
        for w in self.writers:
            if not self._done(f"w{w}") and not self.writers[w].blocked and w not in self.finished:
                yield ("produce", w)

    def fault_actions(self) -> Iterator[Action]:
        """The faults the network can inject now (while it has faults left)."""
        if self.faults_left:
            yield from self._fault_actions()

    def _at_transmit(self, d: str, w: int, r: int) -> bool:
        """A fault strikes the next message written if there is one (the write still completes for
        the sender), otherwise the message at the head of the wire."""
        pair = self.pairs[(w, r)]
        return bool(pair.outbox[d]) and len(pair.wire[d]) < self.wire_capacity and not self.eager

    def _target(self, d: str, w: int, r: int) -> WireItem | None:
        pair = self.pairs[(w, r)]
        if self._at_transmit(d, w, r):
            return pair.outbox[d][0].message
        return pair.wire[d][0] if pair.wire[d] and pair.wire[d][0] != CLOSE else None

    def head_is_sequenced(self, fault: Action) -> bool:
        """The fault hits a DATA, TERMINATION_CONTROL or TERMINATION_ACK (the messages with checked seqs)."""
        if fault[0] not in ("duplicate", "drop", "corrupt", "reorder"):
            return False
        target = self._target(str(fault[1]), int(fault[2]), int(fault[3]))  # type: ignore[call-overload]
        return isinstance(target, (DataMessage, TerminationControlMessage, TerminationAckMessage))

    def _fault_actions(self) -> Iterator[Action]:
        for (w, r), pair in self.pairs.items():
            if self.eager and (w, r) != (0, 0):
                continue  # connections are symmetric: in eager mode the fault strikes connection (0, 0)
            for d in (W2R, R2W):
                wire = pair.wire[d]
                if self._target(d, w, r) is not None:
                    yield from ((kind, d, w, r) for kind in ("duplicate", "drop", "corrupt"))
                    if wire and (wire[-1] != CLOSE if self._at_transmit(d, w, r) else len(wire) >= 2 and wire[1] != CLOSE):
                        yield ("reorder", d, w, r)
                if pair.connected and not pair.closed_by:
                    yield ("inject_unknown", d, w, r)
            if pair.connected and not pair.closed_by:
                yield ("close_early", w, r)
                yield ("stray_credit", W2R, w, r)
                yield ("stray_data", R2W, w, r)
                yield ("stray_ack", R2W, w, r)
                yield ("misnamed", W2R, w, r)
                yield ("misnamed", R2W, w, r)
                if pair.bound:
                    yield ("impostor", w, r)

    def apply(self, action: Action) -> None:
        """Carry out one enabled action, then check every invariant."""
        kind = action[0]
        if kind in FAULTS:
            self.faults_left -= 1
            self._fault(action)
        elif kind == "connect":
            _, w, r = action
            self._connect(int(w), int(r))  # type: ignore[call-overload]
        elif kind == "produce":
            w = int(action[1])  # type: ignore[call-overload]
            self._produce(w)
            while self.eager and w not in self.finished and not self.writers[w].blocked and not self._done(f"w{w}"):
                self._produce(w)
        elif kind == "transmit":
            _, d, w, r = action
            self._transmit(str(d), int(w), int(r))  # type: ignore[call-overload]
        elif kind == "deliver":
            _, d, w, r = action
            wire = self.pairs[(w, r)].wire[str(d)]  # type: ignore[index]
            for _ in range(len(wire) if self.eager else 1):
                if wire:
                    self._deliver(str(d), int(w), int(r))  # type: ignore[call-overload]
        elif kind == "consume":
            r = int(action[1])  # type: ignore[call-overload]
            w, seq = self.unreleased[r].popleft()
            self._run(f"r{r}", self.readers[r].release(w, seq, self.now))
        elif kind == "tick":
            self.now = min(d for d in self.deadlines.values() if d is not None)
            self._tick_all()
        else:
            raise ValueError(f"unknown action {action}")
        self.check_invariants()

    def advance(self, seconds: float) -> None:
        """Let time pass (any amount), then tick every machine."""
        self.now += seconds
        self._tick_all()
        self.check_invariants()

    def _tick_all(self) -> None:
        for w, wm in self.writers.items():
            if not wm.done:
                self._expect(f"w{w}", self._oracle_timeouts(w))
            self._run(f"w{w}", wm.tick(self.now))
            self.expected_failure.pop(f"w{w}", None)
        for r, rm in self.readers.items():
            self._run(f"r{r}", rm.tick(self.now))

    def _connect(self, w: int, r: int) -> None:
        pair = self.pairs[(w, r)]
        pair.connected = True
        if "w" in pair.closed_by:  # the writer's server is gone: the connection attempt fails
            self._expect(f"r{r}", (errors.ConnectionClosedBeforeTermination, dict(role="writer", peerId=w)))
            self._run(f"r{r}", self.readers[r].connection_closed(w, self.now))
            return
        self._run(f"w{w}", self.writers[w].connection_accepted((w, r), self.now))
        self._run(f"r{r}", self.readers[r].connected(w, self.now))

    def _produce(self, w: int) -> None:
        if self.todo[w]:
            r, record = self.todo[w].popleft()
            self._run(f"w{w}", self.writers[w].write(r, record, self.now))
        else:
            self.finished.add(w)
            self.finish_time[w] = self.now
            self._run(f"w{w}", self.writers[w].finish(self.now))

    def _transmit(self, d: str, w: int, r: int, kind: str = "") -> None:
        pair = self.pairs[(w, r)]
        send = pair.outbox[d].popleft()
        wire = pair.wire[d]
        if kind == "reorder":
            wire.insert(len(wire) - 1, send.message)
        elif kind == "corrupt":
            wire.append(corrupt(send.message))
        elif kind != "drop":
            wire.extend([send.message] * (2 if kind == "duplicate" else 1))
        if send.notify:
            if d == W2R:
                self._run(f"w{w}", self.writers[w].send_completed(r, send.message.seq, self.now))
            else:
                self._run(f"r{r}", self.readers[r].send_completed(w, send.message.seq, self.now))

    def _deliver(self, d: str, w: int, r: int) -> None:
        pair = self.pairs[(w, r)]
        item = pair.wire[d].popleft()
        name = f"r{r}" if d == W2R else f"w{w}"
        if self._done(name):
            return
        if item == CLOSE:
            pair.wire[d].clear()
            self._expect(name, self._oracle_close(d, w, r))
            step = (self.readers[r].connection_closed(w, self.now) if d == W2R
                    else self.writers[w].connection_closed((w, r), self.now))
        elif isinstance(item, bytes):
            try:
                message = codec.decode_frame(item)
            except errors.CodecError as error:
                self._expect(name, (type(error), dict(error.parameters)))
                step = (self.readers[r].decode_failed(w, error, self.now) if d == W2R
                        else self.writers[w].decode_failed((w, r), error, self.now))
            else:
                raise Violation(f"the unknown frame decoded as {message}")
        else:
            assert not isinstance(item, str)
            if d == W2R:
                self._expect(name, self._oracle_reader(w, r, item))
                step = self.readers[r].received(w, item, self.now)
            else:
                self._expect(name, self._oracle_writer(w, r, item))
                step = self.writers[w].received((w, r), item, self.now)
        self._run(name, step)
        expected = self.expected_failure.pop(name, None)
        if expected is not None and name not in self.failures:
            raise Violation(f"{name} should have failed with {expected[0].condition} {expected[1]}")

    # -- the oracle ---------------------------------------------------------------------------------

    def _expect(self, name: str, failure: tuple[type[errors.ShuffleError], dict[str, object]] | None) -> None:
        if failure is not None:
            self.expected_failure[name] = failure

    def _oracle_reader(self, w: int, r: int, m: Message) -> tuple[type[errors.ShuffleError], dict[str, object]] | None:
        pair = self.pairs[(w, r)]
        names_the_pair = isinstance(m, (DataMessage, TerminationControlMessage))
        known = m.writer_id if pair.partition_id is None else pair.partition_id
        if names_the_pair and (m.writer_id, m.reader_id) != (known, r):
            return errors.MismatchedChannelIds, dict(messageType=m.type.name, writerId=m.writer_id,
                                                     readerId=m.reader_id, expectedWriterId=known, expectedReaderId=r)
        expected = pair.accepted_seq + 1
        if m.seq != expected:
            return errors.IncorrectSequenceNumber, dict(
                messageType=m.type.name, writerId=w, readerId=r, expSeqNum=expected, actSeqNum=m.seq)
        if names_the_pair:
            pair.partition_id = known
        if isinstance(m, (CreditMessage, TerminationAckMessage)) or (
                isinstance(m, (DataMessage, TerminationControlMessage)) and pair.reader_terminated):
            return errors.UnexpectedMessage, dict(handler="ShuffleClientHandler", messageType=m.type.name)
        if isinstance(m, DataMessage) and self.settings.checksum_enabled:
            crc = payload_checksum(m.payload)
            if crc != m.checksum:
                return errors.ChecksumVerificationFailed, dict(
                    writerId=m.writer_id, expectedChecksum=m.checksum, calculatedChecksum=crc,
                    dataLength=m.data_size)
        pair.accepted_seq = m.seq
        pair.reader_terminated = isinstance(m, TerminationControlMessage)
        return None

    def _oracle_writer(self, w: int, r: int, m: Message) -> tuple[type[errors.ShuffleError], dict[str, object]] | None:
        if isinstance(m, (DataMessage, TerminationControlMessage)):
            return errors.UnexpectedMessage, dict(handler="ShuffleServerHandler", messageType=m.type.name)
        if not 0 <= m.reader_id < len(self.readers):
            return errors.UnknownPeer, dict(role="reader", peerId=m.reader_id, count=len(self.readers))
        if m.writer_id != w:
            return errors.MismatchedChannelIds, dict(messageType=m.type.name, writerId=m.writer_id,
                                                     readerId=m.reader_id, expectedWriterId=w, expectedReaderId=r)
        pair = self.pairs[(w, m.reader_id)]
        if isinstance(m, TerminationAckMessage):
            # Spark's "last seq sent" counts DATA already numbered but still queued before the bind.
            last = self.writers[w].channels[m.reader_id].last_seq
            if m.seq != last:
                return errors.IncorrectSequenceNumber, dict(
                    messageType="TERMINATION_ACK_MESSAGE", writerId=w, readerId=m.reader_id,
                    expSeqNum=last, actSeqNum=m.seq)
            if pair.tc_seq is None:
                return errors.UnexpectedMessage, dict(
                    handler="ShuffleServerHandler", messageType="TERMINATION_ACK_MESSAGE")
            pair.ack_counted = True
        return None

    def _oracle_timeouts(self, w: int) -> tuple[type[errors.ShuffleError], dict[str, object]] | None:
        timeout = self.settings.writer_connection_timeout_ms
        unbound = [r for r in self.readers if not self.pairs[(w, r)].bound]
        if unbound and timeout != -1 and self.now >= timeout / 1000.0:
            return errors.WriterConnectionTimeout, dict(shuffleId=0, writerId=w, timeoutMs=timeout, readerId=unbound[0])
        unacked = [r for r in self.readers if not self.pairs[(w, r)].ack_counted]
        if unacked and self.ack_timeout_ms >= 0 and w in self.finish_time and \
                self.now >= ms_after(self.finish_time[w], self.ack_timeout_ms):
            return errors.TerminationAckTimeout, dict(
                shuffleId=0, writerId=w, timeoutMs=self.ack_timeout_ms, readerId=unacked[0])
        return None

    def _oracle_close(self, d: str, w: int, r: int) -> tuple[type[errors.ShuffleError], dict[str, object]] | None:
        pair = self.pairs[(w, r)]
        if d == W2R and not pair.reader_terminated:
            return errors.ConnectionClosedBeforeTermination, dict(role="writer", peerId=w)
        if d == R2W and pair.bound and not pair.ack_counted:
            return errors.ConnectionClosedBeforeTermination, dict(role="reader", peerId=r)
        return None

    # -- faults -------------------------------------------------------------------------------------

    def _fault(self, action: Action) -> None:
        kind = action[0]
        if kind == "close_early":
            _, w, r = action
            self._close_pair(int(w), int(r), both=True)  # type: ignore[call-overload]
            return
        if kind == "impostor":
            _, w, r = action
            self._impostor(int(w), int(r))  # type: ignore[call-overload]
            return
        _, d, w, r = action
        if kind == "misnamed":
            self.pairs[(w, r)].wire[str(d)].append(self._misnamed(str(d), int(w), int(r)))  # type: ignore[call-overload, index]
            return
        if kind == "inject_unknown":
            self.pairs[(w, r)].wire[str(d)].append(UNKNOWN_FRAME)  # type: ignore[index]
            return
        if str(kind).startswith("stray_"):
            self.pairs[(w, r)].wire[str(d)].append(self._stray(str(kind), int(w), int(r)))  # type: ignore[call-overload, index]
            return
        if self._at_transmit(str(d), int(w), int(r)):  # type: ignore[call-overload]
            self._transmit(str(d), int(w), int(r), kind=str(kind))  # type: ignore[call-overload]
        else:
            self._strike_wire(str(kind), self.pairs[(w, r)].wire[str(d)])  # type: ignore[index]

    @staticmethod
    def _strike_wire(kind: str, wire: deque[WireItem]) -> None:
        """The fault hits the message at the head of the wire."""
        if kind == "duplicate":
            wire.appendleft(wire[0])
        elif kind == "drop":
            wire.popleft()
        elif kind == "corrupt":
            wire[0] = corrupt(wire[0])
        else:
            wire[0], wire[1] = wire[1], wire[0]

    def _stray(self, kind: str, w: int, r: int) -> Message:
        """A well-formed message its receiver never accepts: a CREDIT to a reader (with the seq it
        expects next, so only its type is wrong), or to a writer DATA or an ack with a seq never sent."""
        if kind == "stray_credit":
            return CreditMessage(writer_id=w, reader_id=r, num_messages=1, seq=self.pairs[(w, r)].accepted_seq + 1)
        if kind == "stray_data":
            return DataMessage(seq=0, writer_id=w, reader_id=r, checksum=0, payload=b"")
        return TerminationAckMessage(seq=99, writer_id=w, reader_id=r)

    def _misnamed(self, d: str, w: int, r: int) -> Message:
        """A message naming another writer than its connection's: at a reader a DATA with the seq it
        expects next (only its ids are wrong), at a writer a CREDIT."""
        other = w + len(self.writers)
        if d == W2R:
            return DataMessage(seq=self.pairs[(w, r)].accepted_seq + 1, writer_id=other, reader_id=r, checksum=0,
                               payload=b"")
        return CreditMessage(writer_id=other, reader_id=r, num_messages=1)

    def _impostor(self, w: int, r: int) -> None:
        """A second connection claims reader ``r``, already bound: the writer must fail, naming it."""
        name = f"w{w}"
        if self._done(name):
            return
        self._expect(name, (errors.ReaderAlreadyBound, dict(writerId=w, readerId=r)))
        self._run(name, self.writers[w].received(("impostor", w, r), CreditMessage(writer_id=w, reader_id=r,
                                                                                 num_messages=1), self.now))
        if self.expected_failure.pop(name, None) is not None and name not in self.failures:
            raise Violation(f"{name} accepted a second connection for reader {r}")

    # -- running machines ---------------------------------------------------------------------------

    def _run(self, name: str, step: Step) -> None:
        self.deadlines[name] = step.deadline
        side, ident = name[0], int(name[1:])
        for event in step.events:
            if isinstance(event, Bound):
                self.pairs[(ident, event.reader_id)].bound = True
        for send in step.sends:
            if side == "w":
                if send.conn != (ident, send.peer) or not self.pairs[(ident, send.peer)].bound:
                    raise Violation(f"writer {ident} sent {send.message} before reader {send.peer} bound")
                pair = self.pairs[(ident, send.peer)]
                if isinstance(send.message, (DataMessage, TerminationControlMessage)):
                    if pair.tc_seq is not None:
                        raise Violation(f"writer {ident} sent {send.message} after its terminator")
                    pair.sent_seqs.append(send.message.seq)
                    if isinstance(send.message, TerminationControlMessage):
                        pair.tc_seq = send.message.seq
                pair.outbox[W2R].append(send)
            else:
                pair = self.pairs[(send.peer, ident)]
                if isinstance(send.message, TerminationAckMessage) and send.message.seq != pair.accepted_seq:
                    raise Violation(f"ack {send.message} does not echo the terminator's seq {pair.accepted_seq}")
                pair.outbox[R2W].append(send)
        for event in step.events:
            self._on_event(name, side, ident, event)
        if self.eager:
            self._settle()

    def _settle(self) -> None:
        """Eager mode: complete every pending write and release every delivered record now."""
        for (w, r), pair in self.pairs.items():
            for d in (W2R, R2W):
                if pair.outbox[d] and not self._done(f"w{w}" if d == W2R else f"r{r}"):
                    advisory = d == R2W and isinstance(pair.outbox[d][0].message, CreditMessage) and pair.bound
                    self._transmit(d, w, r)
                    if advisory and len(pair.wire[d]) == 1 and not self.faults_left:
                        self._deliver(d, w, r)
                    return
        for r, queue in self.unreleased.items():
            if queue and not self._done(f"r{r}"):
                w, seq = queue.popleft()
                self._run(f"r{r}", self.readers[r].release(w, seq, self.now))
                return

    def _on_event(self, name: str, side: str, ident: int, event: object) -> None:
        if isinstance(event, Failed):
            expected = self.expected_failure.pop(name, None)
            if expected is None:
                raise Violation(f"{name} failed without a fault that explains it: {event.error!r}")
            if (type(event.error), dict(event.error.parameters)) != expected:
                raise Violation(f"{name} failed with {event.error.condition} {dict(event.error.parameters)}, "
                                f"expected {expected[0].condition} {expected[1]}")
            self.failures[name] = event.error
            self._close_all(side, ident)
        elif isinstance(event, Completed):
            self.completed.add(name)
            self._close_all(side, ident)
        elif isinstance(event, Deliver):
            pair = self.pairs[(event.writer_id, ident)]
            pair.delivered.extend(event.records)
            self.unreleased[ident].append((event.writer_id, event.seq))
        elif isinstance(event, PauseReading):
            self.paused.add((event.writer_id, ident))
        elif isinstance(event, ResumeReading):
            self.paused.discard((event.writer_id, ident))

    def _close_all(self, side: str, ident: int) -> None:
        """A task that ended closes all its connections (the runtime does this on Completed/Failed)."""
        for (w, r) in self.pairs:
            if (side == "w" and w == ident) or (side == "r" and r == ident):
                self._close_pair(w, r, both=False, by=side)

    def _close_pair(self, w: int, r: int, both: bool, by: str = "") -> None:
        """Close the connection: a CLOSE marker follows the data already written.

        A side that ended closes gracefully (what it had written still goes out). A broken
        connection (``both``, the close_early fault) fails every write still pending on it, and the
        machine is told so.
        """
        pair = self.pairs[(w, r)]
        for s in ("w", "r") if both else (by,):
            if s in pair.closed_by:
                continue
            pair.closed_by.add(s)
            if not pair.connected:
                continue
            out = W2R if s == "w" else R2W
            name = f"w{w}" if s == "w" else f"r{r}"
            pending = list(pair.outbox[out])
            pair.outbox[out].clear()
            if both:
                self._fail_writes(name, w, r, pending)
            elif name not in self.failures:
                pair.wire[out].extend(send.message for send in pending)
            pair.wire[out].append(CLOSE)

    def _fail_writes(self, name: str, w: int, r: int, pending: list[Send]) -> None:
        for send in pending:
            if not send.notify or self._done(name):
                continue
            cause = "java.nio.channels.ClosedChannelException"
            if name[0] == "w":
                self._expect(name, (errors.SendFailed, dict(what="data", role="reader", peerId=r, cause=cause)))
                self._run(name, self.writers[w].send_failed(r, send.message.seq, cause, self.now))
            else:
                self._expect(name, (errors.SendFailed, dict(
                    what="termination acknowledgment", role="writer", peerId=w, cause=cause)))
                self._run(name, self.readers[r].send_failed(w, send.message.seq, cause, self.now))

    def _done(self, name: str) -> bool:
        return name in self.failures or name in self.completed

    # -- invariants -----------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        n = self.settings.network_buffer_size
        for w, wm in self.writers.items():
            if not 0 <= wm.permits_available <= wm.permit_capacity:
                raise Violation(f"writer {w} permits {wm.permits_available} outside 0..{wm.permit_capacity}")
            buffers = sum(ch.buffer is not None for ch in wm.channels)
            if not wm.done and wm.permits_available + n * (wm.in_flight + buffers) != wm.permit_capacity:
                raise Violation(f"writer {w} leaks permits: {wm.permits_available} free, {wm.in_flight} in flight, "
                                f"{buffers} buffers")
            all_acked = all(ch.state is WriterChannelState.TERMINATED for ch in wm.channels)
            if (wm.state is WriterState.COMPLETED) != (all_acked and f"w{w}" not in self.failures):
                raise Violation(f"writer {w} is {wm.state.value} but all_acked={all_acked}")
        for r, rm in self.readers.items():
            for w, ch in rm.channels.items():
                if ch.remaining > rm.quota_per_writer:
                    raise Violation(f"reader {r} quota for writer {w} above its budget")
                pair = self.pairs[(w, r)]
                produced = self.script.get((w, r), [])
                if pair.delivered != produced[:len(pair.delivered)]:
                    raise Violation(f"reader {r} got {pair.delivered} from writer {w}, which wrote {produced}")
                if ch.state in (ReaderChannelState.TERMINATED, ReaderChannelState.ACKED) and \
                        pair.delivered != produced:
                    raise Violation(f"writer {w} terminated reader {r}'s stream before all its data")
            all_acked = all(c.state is ReaderChannelState.ACKED for c in rm.channels.values())
            if (f"r{r}" in self.completed) != all_acked and f"r{r}" not in self.failures:
                raise Violation(f"reader {r} completion does not match its channels")

    def all_done(self) -> bool:
        return all(self._done(f"w{w}") for w in self.writers) and all(self._done(f"r{r}") for r in self.readers)

    def drain(self, limit: int = 100_000) -> None:
        """Liveness: with no more faults, a fair scheduler always ends both sides."""
        self.faults_left = 0
        for _ in range(limit):
            if self.all_done():
                break
            options = list(self.actions())
            if not options:
                raise Violation(f"deadlock: nothing enabled and not done; failures={self.failures}")
            self.apply(options[0] if options[0][0] != "tick" or len(options) == 1 else options[1])
        else:
            raise Violation("no end after the drain limit (livelock)")
        self.check_final()

    def check_final(self) -> None:
        """At the end: everything delivered once, permits and quotas back to full (unless something failed)."""
        if not self.all_done():
            raise Violation(f"deadlock: nothing enabled and not done; failures={self.failures}")
        if not self.failures:
            for (w, r), pair in self.pairs.items():
                if pair.delivered != self.script.get((w, r), []):
                    raise Violation(f"reader {r} ended without all of writer {w}'s records")
            for w, wm in self.writers.items():
                if wm.permits_available != wm.permit_capacity:
                    raise Violation(f"writer {w} ended with {wm.permits_available} of {wm.permit_capacity} permits")
            for r, rm in self.readers.items():
                self._release_all(r)
                if any(ch.remaining != rm.quota_per_writer for ch in rm.channels.values()):
                    raise Violation(f"reader {r} quota not back to full")

    def _release_all(self, r: int) -> None:
        while self.unreleased[r]:
            w, seq = self.unreleased[r].popleft()
            self.readers[r].release(w, seq, self.now)

    def snapshot(self) -> Hashable:
        """A hashable summary of everything that determines the future (for the BFS)."""
        return repr((self.now, [_state(m) for m in self.writers.values()], [_state(m) for m in self.readers.values()],
                     [(vars(p)) for p in self.pairs.values()], self.todo, sorted(self.finished),
                     self.unreleased, sorted(self.paused), sorted(self.failures), sorted(self.completed),
                     self.faults_left, sorted(self.deadlines.items())))

    def clone(self) -> Network:
        """An independent copy; errors are immutable and shared (they cannot be deep-copied)."""
        return copy.deepcopy(self, memo={id(e): e for e in self.failures.values()})


def _state(machine: object) -> object:
    return {k: v for k, v in vars(machine).items() if k not in ("settings",)}


def corrupt(item: WireItem) -> WireItem:
    """Damage one message as a faulty link would: a payload bit, or a sequence number or id."""
    if isinstance(item, DataMessage):
        if item.payload:
            payload = bytearray(bytes(item.payload))
            payload[0] ^= 0x01
            return DataMessage(seq=item.seq, writer_id=item.writer_id, reader_id=item.reader_id,
                               checksum=item.checksum, payload=bytes(payload))
        return DataMessage(seq=item.seq, writer_id=item.writer_id, reader_id=item.reader_id,
                           checksum=item.checksum ^ 1, payload=item.payload)
    if isinstance(item, CreditMessage):
        return CreditMessage(writer_id=item.writer_id, reader_id=item.reader_id + 100, num_messages=item.num_messages,
                             seq=item.seq)
    if isinstance(item, TerminationControlMessage):
        return TerminationControlMessage(seq=item.seq + 1, writer_id=item.writer_id, reader_id=item.reader_id)
    if isinstance(item, TerminationAckMessage):  # one behind (a stray ack covers seqs never sent)
        return TerminationAckMessage(seq=item.seq - 1, writer_id=item.writer_id, reader_id=item.reader_id)
    return item

