"""The reader task of a streaming shuffle as a sans-IO state machine (Spark 4.3.0's ``StreamingShuffleReader``
and ``StreamingShuffleClientHandler``).

One channel per writer: a handshake CREDIT on connect and one after every DATA, a strict last+1
sequence check on every message (before its type is looked at, as Spark does), CRC32C verified
before a payload is surfaced, a byte quota per writer that pauses reading, and a TERMINATION_ACK
echoing the terminator's seq. The stream ends once every writer terminated and every ack was written.

Two identities name a writer (docs/spec/shuffle.md#channel-ids): the reader knows it by its
**directory id** (Spark's map task id, the key of its tracker entry), which the handshake CREDIT
names; the writer names itself by its **partition id** in every DATA and TERMINATION_CONTROL. The two
agree only in an application's first job, so the reader learns the partition id from the connection's
first DATA or TERMINATION_CONTROL, requires every later one to name the same, and echoes it in every
later CREDIT and in its ack, as Spark's client handler does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from spec.shuffle import errors
from spec.shuffle.checksum import payload_checksum
from spec.clock import after
from spec.shuffle.codec import HEADER_LENGTH, DataView
from spec.shuffle.layouts import MessageType
from spec.shuffle._machine import READER_SIDE, ChannelMachine, machine_input
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    DataPayload,
    Message,
    TerminationAckMessage,
)
from spec.shuffle.records import decode_records
from spec.shuffle.registry import READER_EVENTS, kind_of
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import (
    Completed,
    Deliver,
    PauseReading,
    ResumeReading,
    Send,
    Step,
    UsageError,
)
from spec.shuffle.transitions import (
    READER_TABLE,
    ReaderChannelEvent,
    ReaderChannelState,
    ReaderState,
)

DATA = MessageType.DATA_MESSAGE_UNSAFE_ROW
DATA_HEADER_LENGTH = HEADER_LENGTH[DATA]
DATA_NAME = DATA.name

_DONE = frozenset({ReaderState.COMPLETED, ReaderState.FAILED})
"""A reader that ignores every further input."""

_FAILED, _CONNECTING, _OPEN = ReaderState.FAILED, ReaderChannelState.CONNECTING, ReaderChannelState.OPEN
_DATA_EVENT, _TERMINATION = ReaderChannelEvent.DATA, ReaderChannelEvent.TERMINATION
"""What the per-DATA path tests, as module names (and ``done`` as a set): reaching an enum member through its
class costs 0.1 µs on Python 3.11, whose EnumType has a ``__getattr__``."""


def per_writer_quota(settings: ShuffleSettings, num_writers: int) -> int:
    """Bytes of unconsumed DATA (whole bodies) each writer may have at the reader: readerMaxMemory / M, at
    least 1 (Spark 4.3.0's ``perWriterByteLimit = max(MAX_MEMORY / numWriters, 1)``: readerMaxMemory is not
    validated, and a quota of 0 or less would never let a paused reader resume)."""
    return max(settings.reader_max_memory // num_writers, 1)


@dataclass(frozen=True, slots=True)
class Unreachable:
    """Failed connect attempts to one writer: since when, when they become fatal, the last cause."""

    since: float
    due: float
    cause: str


@dataclass(slots=True)
class ReaderChannel:
    """The reader's view of one writer."""

    writer_id: int
    """The writer's directory id: how the reader knows it, and what its handshake CREDIT names."""
    remaining: int
    handshake: Send
    """The CREDIT sent on connect, naming the directory id."""
    partition_id: int | None = None
    """The writer's partition id, as the connection's first DATA or TERMINATION_CONTROL named it."""
    credit: Send | None = None
    """The CREDIT sent after every DATA, echoing the partition id: the same message each time, so it is
    made once, when the partition id is learned."""
    state: ReaderChannelState = ReaderChannelState.CONNECTING
    last_seq: int = -1
    paused: bool = False
    unreleased: dict[int, int] = field(default_factory=dict)
    """seq -> charged bytes of every surfaced DATA the consumer has not released."""


class ReaderMachine(ChannelMachine[ReaderChannelState, ReaderChannelEvent]):
    """One reader task. Inputs return a :class:`Step`; after ``Failed`` or ``Completed`` input is ignored."""

    table = READER_TABLE
    side = READER_SIDE

    def __init__(
        self, shuffle_id: int, reader_id: int, writer_ids: Sequence[int], settings: ShuffleSettings, now: float,
        *, connect_timeout: float | None = None,
    ) -> None:
        """``connect_timeout``: how long failed connect attempts to one writer may go on before the reader
        fails with WriterUnreachable (None: as long as it takes, as Spark 4.3.0)."""
        if not writer_ids or len(set(writer_ids)) != len(writer_ids):
            raise UsageError(f"a reader needs distinct writer ids, got {list(writer_ids)}")
        super().__init__(shuffle_id)
        self.reader_id = reader_id
        self.settings = settings
        self.quota_per_writer = per_writer_quota(settings, len(writer_ids))
        self.channels = {w: ReaderChannel(w, self.quota_per_writer, self._credit(w, w)) for w in writer_ids}
        self.state = ReaderState.RUNNING
        self.connect_timeout = connect_timeout
        self._unreachable: dict[int, Unreachable] = {}
        """Writers still connecting whose connect attempts failed (empty on the hot path)."""

    @property
    def done(self) -> bool:
        return self.state in _DONE

    def quota(self, writer_id: int) -> int:
        """Bytes of ``writer_id``'s quota left (may dip below zero by the last message received)."""
        return self.channels[writer_id].remaining

    # -- inputs -----------------------------------------------------------------------------------

    @machine_input
    def connected(self, writer_id: int, now: float) -> None:
        """The connection to ``writer_id`` is up: send the handshake CREDIT."""
        ch = self._channel(writer_id)
        self._move(ch, ReaderChannelEvent.CONNECTED)
        self._unreachable.pop(writer_id, None)
        self._send(ch.handshake)

    @machine_input
    def connect_failed(self, writer_id: int, cause: str, now: float) -> None:
        """An attempt to connect to ``writer_id`` failed (refused, timed out, or closed inside its
        handshake); the runtime tries again. Fatal once the failures span the connect timeout."""
        ch = self._channel(writer_id)
        if ch.state is not ReaderChannelState.CONNECTING:
            raise UsageError(f"a failed connect to writer {writer_id}, which is {ch.state.value}")
        if self.connect_timeout is None:
            return
        known = self._unreachable.get(writer_id)
        since = now if known is None else known.since
        self._unreachable[writer_id] = Unreachable(since, after(since, self.connect_timeout), cause)
        self._check_reachable(now)

    @machine_input
    def received(self, writer_id: int, message: Message | DataView, now: float) -> None:
        """A decoded message arrived on the connection to ``writer_id`` (a DATA as a message or a view)."""
        self._receive(writer_id, message)

    @machine_input
    def received_all(self, writer_id: int, messages: Iterable[Message | DataView], now: float) -> None:
        """Every message one read from ``writer_id`` completed, in order, in one step (their credits
        go out in one write); what follows a message that failed the machine is ignored."""
        for message in messages:
            self._receive(writer_id, message)
            if self.done:
                return

    def _receive(self, writer_id: int, message: Message | DataView) -> None:
        """DATA is read field by field, whether it came as a message or as the decoder's view (the hot
        path builds no message object); every other message by its type."""
        if type(message) is tuple:
            seq, named_writer_id, named_reader_id, _size, checksum, payload = message
            self._data(writer_id, seq, named_writer_id, named_reader_id, checksum, payload)
            return
        assert not isinstance(message, tuple)
        if isinstance(message, DataMessage):
            self._data(writer_id, message.seq, message.writer_id, message.reader_id, message.checksum,
                       message.payload)
            return
        event = READER_EVENTS.get(type(message)) or kind_of(message).reader_event  # kind_of: UsageError if unregistered
        ch = self._admitted(writer_id, message.type, message.seq, message.writer_id, message.reader_id,
                            event is _TERMINATION)
        if ch is None:
            return
        if event is _TERMINATION:
            if self._move(ch, _TERMINATION, message_type=message.type.name):
                ch.last_seq = message.seq
                self._send(Send(
                    peer=writer_id, message=TerminationAckMessage(seq=ch.last_seq, writer_id=message.writer_id,
                                                     reader_id=self.reader_id), notify=True))
        elif event is ReaderChannelEvent.UNEXPECTED:
            self._move(ch, ReaderChannelEvent.UNEXPECTED, message_type=message.type.name)
        else:
            raise UsageError(f"the registry classifies {message.type.name} as {event.value}, which a reader "
                             "does not receive as a control message")

    def _admitted(self, writer_id: int, kind: MessageType, seq: int, named_writer_id: int, named_reader_id: int,
                  names_the_pair: bool) -> ReaderChannel | None:
        """The channel of ``writer_id`` when a message may be acted on: it names this reader and the
        connection's partition id (DATA and TERMINATION_CONTROL do; the first of them sets the partition
        id) and carries the next sequence number (checked before its type is looked at, as Spark does);
        None when the machine failed instead."""
        ch = self._channel(writer_id)
        if ch.state is _CONNECTING:
            raise UsageError(f"a message from writer {writer_id} before connected()")
        if names_the_pair and (named_reader_id != self.reader_id
                               or (ch.partition_id is not None and named_writer_id != ch.partition_id)):
            self._move(ch, ReaderChannelEvent.MISMATCHED_IDS, message_type=kind.name,
                       named_writer_id=named_writer_id, named_reader_id=named_reader_id,
                       writer_id=named_writer_id if ch.partition_id is None else ch.partition_id)
            return None
        expected = ch.last_seq + 1
        if seq != expected:
            self._move(ch, ReaderChannelEvent.WRONG_SEQ, message_type=kind.name, expected=expected, actual=seq)
            return None
        if names_the_pair and ch.partition_id is None:
            ch.partition_id = named_writer_id
            ch.credit = self._credit(writer_id, named_writer_id)
        return ch

    def _credit(self, writer_id: int, named_writer_id: int) -> Send:
        """The CREDIT(named writer, this reader, 1) sent on the connection to ``writer_id``."""
        return Send(peer=writer_id, message=CreditMessage(writer_id=named_writer_id, reader_id=self.reader_id,
                                                          num_messages=1))

    def decode_failed(self, writer_id: int, error: errors.CodecError, now: float) -> Step:
        """The bytes from ``writer_id`` did not decode: the reader fails with the codec's error."""
        return self.abort(error, now)

    @machine_input
    def connection_closed(self, writer_id: int, now: float) -> None:
        """The connection to ``writer_id`` closed; fatal before that writer's TERMINATION_CONTROL."""
        self._move(self._channel(writer_id), ReaderChannelEvent.CLOSE)

    @machine_input
    def send_completed(self, writer_id: int, seq: int, now: float) -> None:
        """The TERMINATION_ACK to ``writer_id`` was written; the stream may end."""
        self._ack_written(writer_id, seq)

    @machine_input
    def sends_completed(self, written: Iterable[tuple[int, int]], now: float) -> None:
        """``send_completed`` for each ``(writer_id, seq)`` in order, in one step."""
        for writer_id, seq in written:
            self._ack_written(writer_id, seq)
            if self.done:
                return

    def _ack_written(self, writer_id: int, seq: int) -> None:
        ch = self._channel(writer_id)
        if seq != ch.last_seq:
            raise UsageError(f"no TERMINATION_ACK {seq} to writer {writer_id} is waiting for its write")
        self._move(ch, ReaderChannelEvent.ACK_WRITTEN)
        if all(c.state is ReaderChannelState.ACKED for c in self.channels.values()):
            self.state = ReaderState.COMPLETED
            self._surface(Completed())

    @machine_input
    def send_failed(self, writer_id: int, seq: int, cause: str, now: float) -> None:
        """The TERMINATION_ACK to ``writer_id`` could not be written: the reader fails."""
        ch = self._channel(writer_id)
        if seq != ch.last_seq:
            raise UsageError(f"no TERMINATION_ACK {seq} to writer {writer_id} is waiting for its write")
        self._move(ch, ReaderChannelEvent.SEND_FAILED, cause=cause)

    def release(self, writer_id: int, seq: int, now: float) -> Step:
        """The consumer is done with DATA ``seq`` of ``writer_id``: its bytes return to the quota."""
        if self.state is _FAILED:
            return self._step()
        ch = self._channel(writer_id)
        size = ch.unreleased.pop(seq, None)
        if size is None:
            raise UsageError(f"DATA {seq} of writer {writer_id} is not held by the consumer")
        ch.remaining += size
        if ch.paused and ch.remaining > 0:
            ch.paused = False
            self._surface(ResumeReading(writer_id=writer_id))
        return self._step()

    @machine_input
    def tick(self, now: float) -> None:
        """The only timer is the connect timeout (a dead writer is otherwise noticed by its closed
        connection, as in Spark 4.3.0); the step's deadline says when it is due."""
        self._check_reachable(now)

    @machine_input
    def abort(self, error: errors.ShuffleError, now: float) -> None:
        """The task failed locally (or a connection's bytes could not be decoded)."""
        self._fail(error)

    # -- internals --------------------------------------------------------------------------------

    def _check_reachable(self, now: float) -> None:
        """Fail on the first writer whose connect attempts have failed for longer than the timeout."""
        for writer_id, unreachable in self._unreachable.items():
            if now >= unreachable.due:
                assert self.connect_timeout is not None
                self._move(self.channels[writer_id], ReaderChannelEvent.CONNECT_TIMEOUT,
                           timeout_ms=round(self.connect_timeout * 1000), cause=unreachable.cause)
                return

    def _deadline(self) -> float | None:
        if not self._unreachable or self.done:
            return None
        return min(u.due for u in self._unreachable.values())

    def _channel(self, writer_id: int) -> ReaderChannel:
        ch = self.channels.get(writer_id)
        if ch is None:
            raise UsageError(f"writer {writer_id} is not one of this reader's writers")
        return ch

    def _data(self, writer_id: int, seq: int, named_writer_id: int, named_reader_id: int, checksum: int,
              payload: DataPayload) -> None:
        ch = self._admitted(writer_id, DATA, seq, named_writer_id, named_reader_id, True)
        if ch is None:
            return
        if self.settings.checksum_enabled and ch.state is _OPEN:
            calculated = payload_checksum(payload)
            if calculated != checksum:
                self._move(ch, ReaderChannelEvent.BAD_CHECKSUM, writer_id=named_writer_id, checksum=checksum,
                           calculated=calculated, data_length=len(payload))
                return
        if not self._move(ch, _DATA_EVENT, message_type=DATA_NAME):
            return
        try:
            records = decode_records(payload)
        except errors.CodecError as error:
            self._fail(error)
            return
        ch.last_seq = seq
        size = DATA_HEADER_LENGTH + len(payload)
        ch.remaining -= size
        ch.unreleased[seq] = size
        assert ch.credit is not None
        self._send(ch.credit)
        self._surface(Deliver(writer_id=ch.writer_id, seq=seq, records=records, size=size))
        if ch.remaining <= 0 and not ch.paused:
            ch.paused = True
            self._surface(PauseReading(writer_id=ch.writer_id))

    def _stop(self) -> None:
        self.state = ReaderState.FAILED

    def _ends(self, channel: ReaderChannel) -> tuple[int, int]:
        return channel.writer_id, self.reader_id
