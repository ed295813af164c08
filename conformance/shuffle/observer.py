"""A passive observer of one streaming-shuffle connection, judged by the spec's own reader machine.

A connection runs from a reader (which opened it) to a writer's server. Everything the writer sends
goes through a :class:`~spec.shuffle.ReaderMachine` exactly as a reader would feed it, so a sequence
gap, a checksum mismatch, a frame in the wrong state, bad ids or a close before termination are the
failures that machine reports, by its channel table. The same machine says what the reader must
send back (the handshake CREDIT, a CREDIT after each DATA, a TERMINATION_ACK echoing the
terminator's seq); the frames the reader really sent are compared with those, in order, so a missing
or unsolicited CREDIT is named too. The writer's end is judged by the spec's writer machine
(writer_side.py): an ack with the wrong seq, an ack before termination or a DATA from the reader are
its failures. Nothing here decides a protocol rule itself.

The connection is recognised by its first frame: a Spark transport ``OneWayMessage`` carrying a
streaming-shuffle message. An ``RpcRequest`` carrying Spark's ``AuthMessage`` (tag 0xFB) starts an
encrypted connection, reported as such and not decoded; a connection whose opening the capture missed
is reported as joined mid-stream and not judged (its sequence numbers do not start where the capture does).
"""

from __future__ import annotations

import statistics
import struct
from collections import deque
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Final

from conformance.shuffle.writer_side import WriterSide, describe
from conformance.tcp_streams import Address, Flow
from spec.shuffle import errors
from spec.shuffle.codec import FRAME_HEADER_LENGTH, body_length
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.layouts import ONE_WAY_MESSAGE, MessageType
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
)
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.records import decode_records
from spec.shuffle.registry import KINDS, Sender
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Deliver, Failed, Send, Step

SPEC: Final = "docs/spec/shuffle.md"
RPC_REQUEST: Final = 3
"""Spark transport ``RpcRequest``: what an authenticated connection's first frame is (auth-facts.md)."""
AUTH_MESSAGE_TAG: Final = 0xFB
_SNIFF: Final = struct.Struct(">qbii")
"""Frame length, transport type, body length, then the body's first 4 bytes (a shuffle type id)."""
_RPC_BODY_TAG_OFFSET: Final = FRAME_HEADER_LENGTH + 8
"""An RpcRequest frame has an 8-byte request id where a OneWayMessage's body begins."""

CREDIT_MISSING: Final = "CREDIT_MISSING"
CREDIT_UNSOLICITED: Final = "CREDIT_UNSOLICITED"
TERMINATION_ACK_MISSING: Final = "TERMINATION_ACK_MISSING"
SENT_BEFORE_HANDSHAKE: Final = "SENT_BEFORE_HANDSHAKE"
WRITER_SEND_MISMATCH: Final = "WRITER_SEND_MISMATCH"
"""Rules about what the reader sends (judged against its machine's sends) or the handshake order."""

SECTIONS: Final[dict[str, str]] = {
    errors.IncorrectSequenceNumber.condition: "sequence-numbers",
    errors.ChecksumVerificationFailed.condition: "checksums",
    errors.UnexpectedMessage.condition: "reader-machine",
    errors.MismatchedChannelIds.condition: "reader-machine",
    errors.ConnectionClosedBeforeTermination.condition: "failures",
    errors.TruncatedInput.condition: "frame",
    errors.FrameLengthOutOfRange.condition: "frame",
    errors.UnsupportedTransportMessage.condition: "frame",
    errors.TrailingBytes.condition: "common-header",
    errors.NegativeDataSize.condition: "message-data",
    errors.DataSizeMismatch.condition: "message-data",
    CREDIT_MISSING: "reader-machine",
    CREDIT_UNSOLICITED: "reader-machine",
    TERMINATION_ACK_MISSING: "termination",
    SENT_BEFORE_HANDSHAKE: "exclusive-binding",
    WRITER_SEND_MISMATCH: "writer-machine",
}
"""Rule -> anchor of the generated specification that states it."""

FRAME_KINDS: Final = tuple(kind.name.removesuffix("_UNSAFE_ROW").removesuffix("_MESSAGE") for kind in MessageType)
"""Report names of the message types: DATA, CREDIT_CONTROL, TERMINATION_CONTROL, TERMINATION_ACK."""
_FRAME_KIND_OF: Final = dict(zip(MessageType, FRAME_KINDS))


def spec_section(rule: str, message_type: str = "") -> str:
    anchor = SECTIONS.get(rule, "errors")
    if rule == errors.IncorrectSequenceNumber.condition and message_type == MessageType.TERMINATION_ACK_MESSAGE.name:
        anchor = "termination"
    return f"{SPEC}#{anchor}"


class Status(str, Enum):
    """How a connection's observation ended."""

    CLEAN = "clean"
    STOPPED = "closed after the handshake, nothing owed"
    """Its task stopped before the writer had anything to send (a query stopped between batches): no rule
    was broken and nothing was lost."""
    VIOLATION = "violation"
    ENCRYPTED = "encrypted, not decoded"
    JOINED = "joined mid-stream, not judged"
    OPEN = "open at end of capture"
    MISSED_BYTES = "capture missed bytes"
    INCOMPLETE = "incomplete, closed with records or an ack outstanding"
    """Closed before its conversation finished (records not terminated, or a terminator not acked) with no rule
    broken before the close: a task that stopped or died mid-conversation, named as unfinished, not as a
    protocol violation. Exits 1 all the same: the monitor cannot tell a stopped query from a crashed task."""


UNDECODED: Final = frozenset({Status.ENCRYPTED, Status.JOINED})
"""Shuffle connections reported without being judged."""


@dataclass(frozen=True, slots=True)
class Violation:
    frame_index: int
    rule: str
    spec_section: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"frame_index": self.frame_index, "rule": self.rule, "spec_section": self.spec_section,
                "message": self.message}


@dataclass(slots=True)
class ConnectionReport:
    """What one connection carried and which rules it broke."""

    client: Address
    server: Address
    status: Status = Status.OPEN
    writer_id: int | None = None
    """The writer's directory id, as the connection's first frame (the handshake CREDIT) named it."""
    reader_id: int | None = None
    partition_id: int | None = None
    """The writer's partition id, as its first DATA or TERMINATION_CONTROL named it (docs/spec/shuffle.md#channel-ids)."""
    frames: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FRAME_KINDS, 0))
    records: int = 0
    bytes: int = 0
    round_trips_ms: list[float] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    outstanding: list[Violation] = field(default_factory=list)
    """What an INCOMPLETE connection's close left owed, as the machines name it (CONNECTION_CLOSED_BEFORE_TERMINATION)."""
    anomalies: list[str] = field(default_factory=list)
    """What makes the capture of this connection untrustworthy (a retransmission contradicting the first copy)."""

    def percentile(self, q: int) -> float | None:
        samples = self.round_trips_ms
        if not samples:
            return None
        return round(samples[0] if len(samples) == 1 else statistics.quantiles(samples, n=100)[q - 1], 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "client": f"{self.client[0]}:{self.client[1]}", "server": f"{self.server[0]}:{self.server[1]}",
            "status": self.status.value, "writer_id": self.writer_id, "reader_id": self.reader_id,
            "partition_id": self.partition_id,
            "frames": dict(self.frames), "records": self.records, "bytes": self.bytes,
            "round_trips_ms": {"p50": self.percentile(50), "p99": self.percentile(99),
                               "samples": len(self.round_trips_ms)},
            "violations": [v.to_json() for v in self.violations],
            "outstanding": [v.to_json() for v in self.outstanding],
            "anomalies": list(self.anomalies),
        }

    def summary(self) -> str:
        """One line, as the connection ends."""
        partition = "" if self.partition_id in (None, self.writer_id) else f" (partition {self.partition_id})"
        ids = "" if self.writer_id is None else f" writer {self.writer_id}{partition} -> reader {self.reader_id}"
        frames = " ".join(f"{kind}={count}" for kind, count in self.frames.items())
        p50, p99 = self.percentile(50), self.percentile(99)
        rtt = "" if p50 is None else f" rtt p50 {p50} ms p99 {p99} ms"
        first = f": {self.violations[0].rule} at frame {self.violations[0].frame_index}" if self.violations else ""
        more = f" (+{len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        if self.outstanding:
            first = f": {self.outstanding[0].message}"
        anomaly = f"; capture anomaly: {self.anomalies[0]}" if self.anomalies else ""
        return (f"{self.client[0]}:{self.client[1]} -> {self.server[0]}:{self.server[1]}{ids} "
                f"{self.status.value}{first}{more}; {frames} records={self.records} bytes={self.bytes}{rtt}{anomaly}")


@dataclass(slots=True)
class _Expected:
    """A frame the reader machine sent, and when the frame that caused it was seen."""

    send: Send
    caused_at: float
    after_data: int | None
    """The seq of the DATA this CREDIT answers (None for the handshake CREDIT and the ack)."""


class ShuffleConnectionObserver:
    """Decodes one connection's two byte streams and judges them with the reader machine."""

    def __init__(self, flow: Flow, ended: Callable[[ConnectionReport], None], checksums: bool | None = None,
                 belongs: Callable[[Address, Address, float], bool] | None = None) -> None:
        """``checksums``: whether the writer computes them; None infers it from the first DATA (a
        checksum of 0 means disabled, as Spark writes it). ``belongs``: whether a connection that
        carries a frame is one to watch (asked once, when its first frame arrives: its sockets are
        open then); one that is not is neither judged nor reported."""
        self.report = ConnectionReport(flow.client, flow.server)
        self.flow = flow
        self._ended = ended
        self._checksums = checksums
        self._recognised: bool | None = None
        self._belongs = belongs
        self.foreign = False
        """Not a connection to watch (``belongs`` said so): nothing of it is reported."""
        self._reader_is_client = True
        self._sniffed = (bytearray(), bytearray())
        self._decoders = (FrameDecoder(), FrameDecoder())
        self._broken = [False, False]
        self._machine: ReaderMachine | None = None
        self._writer_side: WriterSide | None = None
        self._expected: deque[_Expected] = deque()
        self._handshake_seen = False
        self._index = 0

    # -- the stream sink ------------------------------------------------------------------------

    def data(self, from_client: bool, data: bytes, time: float) -> None:
        side = 0 if from_client else 1
        if self._recognised is None:
            self._sniffed[side].extend(data)
            if not self._recognise(side, time):
                return
            held, self._sniffed = self._sniffed, (bytearray(), bytearray())
            for first in (side, 1 - side):
                if held[first]:
                    self._feed(first, bytes(held[first]), time)
            return
        if self._recognised:
            self._feed(side, data, time)

    def closed(self, time: float, reset: bool, gap: bool) -> None:
        if not self._recognised:
            if self._recognised is False and self.report.status in UNDECODED:
                self._ended(self.report)
            return
        for side, decoder in enumerate(self._decoders):
            if not self._broken[side]:
                try:
                    decoder.close()
                except errors.CodecError as error:
                    self._violation(error.condition, str(error))
        if gap:
            self.report.status = Status.MISSED_BYTES
        elif self._nothing_owed():
            self.report.status = Status.STOPPED
        elif self.report.violations:
            self.report.status = Status.VIOLATION  # a close after a violation follows from it
        else:
            self._judge_close(time)
        self._ended(self.report)

    def _judge_close(self, time: float) -> None:
        """The reader's, then the writer's machine name a premature close (what was outstanding: INCOMPLETE),
        then what the reader never sent (a violation)."""
        if self._machine is not None:
            self._judge(self._machine.connection_closed(self._writer_id, time), time)
        if self._writer_side is not None and not self.report.violations:
            self._writer_failures(self._writer_side.closed())
        if not self.report.violations:
            self._unsent_at_close()
        elif all(v.rule == errors.ConnectionClosedBeforeTermination.condition for v in self.report.violations):
            self.report.outstanding, self.report.violations = self.report.violations, []
            self.report.status = Status.INCOMPLETE
            return
        self.report.status = Status.VIOLATION if self.report.violations else Status.CLEAN

    @property
    def other_traffic(self) -> bool:
        """The connection carried bytes that are not the streaming shuffle (nor its encrypted form)."""
        return self._recognised is False and self.report.status not in UNDECODED and not self.foreign

    def _nothing_owed(self) -> bool:
        """Only the reader's handshake CREDIT was seen: no DATA, no terminator, no ack, no violation, so a
        close owes nobody anything (docs/conformance.md, "Judgement")."""
        frames = self.report.frames
        return (not self.report.violations and frames["CREDIT_CONTROL"] == 1
                and frames["DATA"] == frames["TERMINATION_CONTROL"] == frames["TERMINATION_ACK"] == 0)

    def end_of_capture(self) -> ConnectionReport | None:
        """The capture ended with the connection still open: its report so far (None when not a shuffle one)."""
        if self._recognised is None or (self._recognised is False and self.report.status not in UNDECODED):
            return None
        if self.report.violations:
            self.report.status = Status.VIOLATION
        return self.report

    # -- recognition ----------------------------------------------------------------------------

    def _recognise(self, side: int, time: float) -> bool:
        """Decide from the first frame's header whether this is a shuffle connection; False until known."""
        head = self._sniffed[side]
        if len(head) < _SNIFF.size:
            return False
        _length, transport, _body, type_id = _SNIFF.unpack_from(head)
        if self._belongs is not None and not self._belongs(self.flow.client, self.flow.server, time):
            self._recognised, self.foreign = False, True
            return False
        if transport == RPC_REQUEST and len(head) > _RPC_BODY_TAG_OFFSET and head[_RPC_BODY_TAG_OFFSET] == AUTH_MESSAGE_TAG:
            self._recognised = False
            self.report.status = Status.ENCRYPTED
            return False
        if transport == RPC_REQUEST and len(head) <= _RPC_BODY_TAG_OFFSET:
            return False
        if transport != ONE_WAY_MESSAGE or type_id not in set(MessageType):
            self._recognised = False
            return False
        if not self.flow.handshake_seen:
            # the capture began after the connection did: its sequence numbers cannot be judged from here
            self._recognised = False
            self.report.status = Status.JOINED
            return False
        self._recognised = True
        sender_is_reader = KINDS[MessageType(type_id)].sender is Sender.READER
        self._reader_is_client = sender_is_reader == (side == 0)
        if not self._reader_is_client:
            self.report.client, self.report.server = self.flow.server, self.flow.client
        return True

    # -- frames ---------------------------------------------------------------------------------

    def _feed(self, side: int, data: bytes, time: float) -> None:
        if self._broken[side]:
            return
        from_reader = (side == 0) == self._reader_is_client
        try:
            messages = self._decoders[side].feed(data)
        except errors.CodecError as error:
            self._broken[side] = True
            self._violation(error.condition, f"{'reader' if from_reader else 'writer'} sent bytes that do not "
                                             f"decode: {error}")
            return
        for message in messages:
            self._frame(message, from_reader, time)
            self._index += 1

    def _frame(self, message: Message, from_reader: bool, time: float) -> None:
        kind = _FRAME_KIND_OF[message.type]
        self.report.frames[kind] += 1
        self.report.bytes += FRAME_HEADER_LENGTH + body_length(message)
        if isinstance(message, DataMessage):
            try:
                self.report.records += len(decode_records(message.payload))
            except errors.CodecError:
                pass  # the reader's machine names it
        if self.report.violations:
            return  # judged up to its first violation: what follows is counted, not judged again
        if self._machine is None:
            self._start(message, from_reader, time)
        if from_reader:
            self._from_reader(message, time)
        else:
            self._from_writer(message, time)

    def _start(self, message: Message, from_reader: bool, time: float) -> None:
        """The first frame names the pair; the reader machine starts as the reader's does, by connecting."""
        self.report.writer_id, self.report.reader_id = message.writer_id, message.reader_id
        checksums = self._checksums if self._checksums is not None else True
        self._machine = ReaderMachine(0, message.reader_id, [message.writer_id],
                                      ShuffleSettings(checksum_enabled=checksums), time)
        self._writer_side = WriterSide.for_pair(message.writer_id, message.reader_id, checksums)
        self._judge(self._machine.connected(message.writer_id, time), time)

    @property
    def _writer_id(self) -> int:
        assert self.report.writer_id is not None
        return self.report.writer_id

    def _from_writer(self, message: Message, time: float) -> None:
        machine = self._machine
        assert machine is not None
        if not self._handshake_seen:
            self._handshake_seen = True
            self._violation(SENT_BEFORE_HANDSHAKE, f"the writer sent {message.type.name} seq {message.seq} before "
                                                   "the reader's handshake CREDIT")
        if self.report.partition_id is None:
            self.report.partition_id = message.writer_id
            if self._writer_side is not None:
                self._writer_side.named(message.writer_id)
        if isinstance(message, DataMessage) and self._checksums is None:
            self._checksums = message.checksum != 0
            machine.settings = replace(machine.settings, checksum_enabled=self._checksums)
            if self._writer_side is not None:
                self._writer_side.checksums(self._checksums)
        named = len(self.report.violations)
        self._judge(machine.received(self._writer_id, message, time), time,
                    message.seq if isinstance(message, DataMessage) else None)
        if self._writer_side is not None:
            problems = self._writer_side.sent(message)
            if len(self.report.violations) == named:  # the reader's machine did not already name this frame
                self._writer_failures(problems)

    def _judge(self, step: Step, time: float, data_seq: int | None = None) -> None:
        """Carry out what the machine returned: what it says the reader sends, what it delivered, its failure."""
        machine = self._machine
        assert machine is not None
        for send in step.sends:
            self._expected.append(_Expected(send, time, data_seq if isinstance(send.message, CreditMessage) else None))
        for event in step.events:
            if isinstance(event, Deliver):
                self._judge(machine.release(event.writer_id, event.seq, time), time)
            elif isinstance(event, Failed):
                self._violation(event.error.condition, str(event.error),
                                str(event.error.parameters.get("messageType", "")))

    def _from_reader(self, message: Message, time: float) -> None:
        """The writer's machine receives the frame; it is compared with the next one the reader's machine sent."""
        if self._writer_side is not None:
            self._writer_failures(self._writer_side.received(message))
        machine = self._machine
        if machine is None or machine.error is not None:
            return
        self._handshake_seen = self._handshake_seen or isinstance(message, CreditMessage)
        if isinstance(message, CreditMessage):
            if not self._expected or not isinstance(self._expected[0].send.message, CreditMessage):
                self._violation(CREDIT_UNSOLICITED, f"the reader sent {describe(message)}, which no frame from the "
                                                    "writer asked for")
                return
        elif isinstance(message, TerminationAckMessage):
            while self._expected and isinstance(self._expected[0].send.message, CreditMessage):
                self._violation(CREDIT_MISSING, f"the reader sent {describe(message)} where it owes the CREDIT "
                                                f"for {_cause(self._expected.popleft())}")
            if not self._expected:
                return  # an ack no TERMINATION_CONTROL asked for: the writer's machine names it
        else:
            return  # DATA or TERMINATION_CONTROL from the reader: the writer's machine names it
        head = self._expected.popleft()
        if head.send.message != message:
            return  # an ack with another seq or other ids: the writer's machine names it
        if head.after_data is not None:
            self.report.round_trips_ms.append((time - head.caused_at) * 1000.0)
        if isinstance(message, TerminationAckMessage):
            self._judge(machine.send_completed(self._writer_id, message.seq, time), time)

    def _writer_failures(self, problems: list[errors.ShuffleError | str]) -> None:
        """What the writer's machine found, unless the reader's already named the same rule at this frame."""
        for problem in problems:
            if isinstance(problem, str):
                rule, text, message_type = WRITER_SEND_MISMATCH, problem, ""
            else:
                rule, text = problem.condition, str(problem)
                message_type = str(problem.parameters.get("messageType", ""))
            if not any(v.rule == rule and v.frame_index == self._index for v in self.report.violations):
                self._violation(rule, text, message_type)

    def _unsent_at_close(self) -> None:
        """Frames the reader machine sent that the reader never did, at the connection's end."""
        for head in self._expected:
            if isinstance(head.send.message, CreditMessage):
                self._violation(CREDIT_MISSING, f"the connection ended without the CREDIT for {_cause(head)}")
            else:
                self._violation(TERMINATION_ACK_MISSING, f"the connection ended without {describe(head.send.message)}")
        self._expected.clear()

    def _violation(self, rule: str, message: str, message_type: str = "") -> None:
        self.report.violations.append(Violation(self._index, rule, spec_section(rule, message_type), message))


def _cause(expected: _Expected) -> str:
    return "the handshake" if expected.after_data is None else f"DATA seq {expected.after_data}"
