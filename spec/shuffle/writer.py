"""The writer task of a streaming shuffle as a sans-IO state machine (Spark 4.3.0's ``StreamingShuffleWriter``).

One channel per reader: records are buffered per reader, a buffer becomes one DATA message by
Spark's flush rule, sequence numbers count from 0 per reader (DATA and TERMINATION_CONTROL share
them), and every buffer holds ``networkBufferSize`` byte permits until its socket write completes.
Data for a reader that has not bound yet is queued in order and sent after its first CREDIT.

The ids a reader names (docs/spec/shuffle.md#channel-ids): its handshake CREDIT names the writer's
directory id (Spark's map task id); every later CREDIT and its TERMINATION_ACK echo the partition id
the writer's DATA and TERMINATION_CONTROL name; the reader id never changes on a connection.

An extension for runs that serve only some readers, or whose readers may stop early (a partial
evaluation in Spark, docs/shuffle-runtime.md): :meth:`WriterMachine.reader_left` ends a channel
without its ack (LEFT): its data is dropped and its permits return. With ``readers_may_leave`` a
reader's connection that closes or fails before its ack is such a leave instead of a failure.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final, Hashable, Iterable, NamedTuple, Sequence

from spec.shuffle import errors
from spec.shuffle.checksum import payload_checksum
from spec.clock import ms_after, periods_past
from spec.shuffle.layouts import MessageType
from spec.shuffle._machine import WRITER_SIDE, ChannelMachine, machine_input
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    DataPayload,
    Gathered,
    Message,
    Payload,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.records import RECORD_LENGTH
from spec.shuffle.registry import WRITER_EVENTS, kind_of
from spec.shuffle.settings import ShuffleSettings, key_of
from spec.shuffle.steps import (
    Bound,
    Completed,
    ProducerBlocked,
    ProducerUnblocked,
    Send,
    Step,
    UsageError,
)
from spec.shuffle.transitions import (
    WRITER_TABLE,
    WriterChannelEvent,
    WriterChannelState,
    WriterState,
)

TCP_SEND_BUFFER: int = 32 * 1024
TCP_RECEIVE_BUFFER: int = 512
"""Socket buffers Spark sets on every bound writer channel; they count against writerMaxMemory."""

_ACK_AWAITED = frozenset({WriterChannelState.OPEN, WriterChannelState.TERMINATING})
"""A bound channel whose reader has not acknowledged termination yet."""

_ENDED = frozenset({WriterChannelState.TERMINATED, WriterChannelState.LEFT})
"""A channel the writer no longer waits for."""

_DONE = frozenset({WriterState.COMPLETED, WriterState.FAILED})
"""A writer that ignores every further input."""

_RUNNING, _LEFT = WriterState.RUNNING, WriterChannelState.LEFT
_FLUSH, _CREDIT = WriterChannelEvent.FLUSH, WriterChannelEvent.CREDIT
_ACK, _UNEXPECTED = WriterChannelEvent.ACK, WriterChannelEvent.UNEXPECTED
_EVENT_OF = WRITER_EVENTS
"""What the per-record and per-credit paths test, as module names (and ``done`` as a set): reaching an enum
member through its class costs 0.1 µs on Python 3.11, whose EnumType has a ``__getattr__``."""


GATHER_MIN: Final = 4096
"""A ``bytes`` record at least this long goes into its DATA as its own buffer (scatter-gather: the socket
reads it, nothing copies it); a shorter or mutable one is copied into the buffer, where one copy costs
less than one more buffer to gather."""


def permit_capacity(settings: ShuffleSettings, num_readers: int) -> int:
    """Byte permits of the writer: ``max(R * N * 2, writerMaxMemory - R * (32 KiB + 512))``."""
    n = settings.network_buffer_size
    capacity = max(num_readers * n * 2, settings.writer_max_memory - num_readers * (TCP_SEND_BUFFER + TCP_RECEIVE_BUFFER))
    if not n <= capacity <= 2**31 - 1:
        raise ValueError(
            f"requirement failed: Streaming shuffle writer memory budget ({capacity} bytes) is invalid for "
            f"{num_readers} partitions; increase {key_of('writer_max_memory')} or reduce the number of partitions."
        )
    return capacity


def flush_threshold(settings: ShuffleSettings) -> int:
    """A buffer holding this many bytes is sent at once (90% of networkBufferSize, integer maths)."""
    return settings.network_buffer_size * 9 // 10


class Batched(NamedTuple):
    """What ``write_batch`` returns: the step, and how many of the records the machine took."""

    step: Step
    taken: int


@dataclass(slots=True)
class WriterChannel:
    """The writer's view of one reader."""

    reader_id: int
    state: WriterChannelState = WriterChannelState.AWAITING_CREDIT
    conn: Hashable | None = None
    buffer: bytearray | None = None
    """The open buffer's bytes since its last gathered record (the whole payload when none was)."""
    gathered: list[Payload] = field(default_factory=list)
    """The open buffer's earlier buffers, in order: copied runs, each ending in the length prefix of the
    record (a gathered one, sent from its own buffer) that follows it."""
    gathered_size: int = 0
    flush_due: float = 0.0
    """When the open buffer is networkBufferMaxWaitTimeMs old: a record appended then flushes it."""
    last_seq: int = -1
    queued: deque[Message] = field(default_factory=deque)
    """Messages produced before the bind, in order."""

    @property
    def bound(self) -> bool:
        return self.conn is not None

    @property
    def buffered(self) -> int:
        """Payload bytes in the open buffer (0 when none is open)."""
        return 0 if self.buffer is None else self.gathered_size + len(self.buffer)

    def take_payload(self) -> DataPayload:
        """The open buffer as a DATA payload (one buffer, or the gathered ones in order); closes it."""
        buffer, gathered = self.buffer, self.gathered
        assert buffer is not None
        self.buffer = None  # handed over to the message: nobody writes to it again
        if not gathered:
            return buffer
        self.gathered, self.gathered_size = [], 0
        return Gathered(tuple(gathered + [buffer]) if buffer else tuple(gathered))

    def drop_buffer(self) -> None:
        self.buffer = None
        self.gathered, self.gathered_size = [], 0


class WriterMachine(ChannelMachine[WriterChannelState, WriterChannelEvent]):
    """One writer task. Inputs return a :class:`Step`; after ``Failed`` or ``Completed`` input is ignored."""

    table = WRITER_TABLE
    side = WRITER_SIDE

    def __init__(
        self, shuffle_id: int, writer_id: int, num_readers: int, settings: ShuffleSettings, now: float,
        ack_timeout_ms: int = -1, readers_may_leave: bool = False, flush_when_idle: bool = False,
        directory_id: int | None = None,
    ) -> None:
        """``writer_id`` is the partition id every DATA and TERMINATION_CONTROL names; ``directory_id`` the
        id the writer is registered under in the directory (Spark's map task id), which a reader's
        handshake CREDIT names (None: the partition id, as in an application's first job);
        ``ack_timeout_ms`` >= 0 bounds the wait for termination acks (an option; -1 is Spark's wait forever);
        ``readers_may_leave``: a reader's connection closing or failing before its ack is LEAVE, not a failure;
        ``flush_when_idle``: :meth:`producer_idle` flushes every open buffer (the idle flush, an option; False: Spark's flush)."""
        if num_readers < 1:
            raise UsageError(f"a writer needs at least one reader, got {num_readers}")
        super().__init__(shuffle_id)
        self.writer_id = writer_id
        self.directory_id = writer_id if directory_id is None else directory_id
        self.settings = settings
        self.permit_capacity = permit_capacity(settings, num_readers)
        self.permits_available = self.permit_capacity
        self.channels = [WriterChannel(r) for r in range(num_readers)]
        self.state = WriterState.RUNNING
        self._held: tuple[int, Payload] | None = None
        self._in_flight: dict[tuple[int, int], int] = {}
        self._conns: dict[Hashable, int] = {}
        self._max_wait_ms = settings.network_buffer_max_wait_time_ms
        self._flush_at = flush_threshold(settings)
        self._next_periodic = ms_after(now, self._max_wait_ms)
        timeout = settings.writer_connection_timeout_ms
        self._bind_deadline = None if timeout == -1 else ms_after(now, timeout)
        self.ack_timeout_ms = ack_timeout_ms
        self._ack_deadline: float | None = None
        self.readers_may_leave = readers_may_leave
        self.flush_when_idle = flush_when_idle

    # -- properties -------------------------------------------------------------------------------

    @property
    def blocked(self) -> bool:
        """A record is held waiting for permits: the producer must wait for ``ProducerUnblocked``."""
        return self._held is not None

    @property
    def done(self) -> bool:
        return self.state in _DONE

    @property
    def in_flight(self) -> int:
        """DATA messages whose socket write has not completed (each holds networkBufferSize permits)."""
        return len(self._in_flight)

    # -- inputs -----------------------------------------------------------------------------------

    @machine_input
    def connection_accepted(self, conn: Hashable, now: float) -> None:
        """A reader connected; it is bound to a reader id only by its first CREDIT."""

    def write(self, reader_id: int, record: Payload, now: float) -> Step:
        """Append one serialized record for ``reader_id``; may flush, or block the producer.

        A record that only grows an open buffer changes nothing a step reports (no send, no event,
        the same deadline), so it returns the shared quiet step without recomputing anything.
        """
        if self.state is _RUNNING and self._held is None and 0 <= reader_id < len(self.channels):
            channel = self.channels[reader_id]
            if channel.buffer is not None:
                return self._step() if self._append(channel, record, now) else self._quiet
        return self._write_opening(reader_id, record, now)

    def write_batch(self, records: Sequence[tuple[int, Payload]], now: float) -> Batched:
        """``write`` each ``(reader_id, record)`` in order, in one step.

        Stops after a record that blocks the producer (held as ``write`` holds it): ``taken`` says
        how many records the machine took; a done machine ignores them all.
        """
        if self.done:
            return Batched(step=self._step(), taken=len(records))
        taken = 0
        for reader_id, record in records:
            taken += 1
            channel = self._channel_for_caller(reader_id) if self._held is None else None
            if channel is not None and channel.buffer is not None and self.state is _RUNNING:
                self._append(channel, record, now)
            else:
                self._write_record(reader_id, record, now)
            if self.done or self._held is not None:
                break
        return Batched(step=self._step(), taken=taken)

    @machine_input
    def _write_opening(self, reader_id: int, record: Payload, now: float) -> None:
        """``write`` when the record needs a new buffer (or the call is wrong)."""
        self._write_record(reader_id, record, now)

    def _write_record(self, reader_id: int, record: Payload, now: float) -> None:
        if self.state is not _RUNNING or self.blocked:
            raise UsageError(f"write() while the writer is {'blocked' if self.blocked else self.state.value}")
        channel = self._channel_for_caller(reader_id)
        if channel.state is _LEFT:
            return  # nobody reads it any more
        if channel.buffer is None and not self._open_buffer(channel, now):
            for ch in self.channels:
                self._flush(ch)
            self._held = (reader_id, record)
            self._surface(ProducerBlocked())
            return
        self._append(channel, record, now)

    @machine_input
    def producer_idle(self, now: float) -> None:
        """The producer has given every record it has for now. With ``flush_when_idle`` every open
        buffer becomes a DATA at once instead of waiting to fill or for networkBufferMaxWaitTimeMs (a
        writer-side extension: the reader sees ordinary, smaller DATA); otherwise nothing happens."""
        if self.flush_when_idle and self.state is WriterState.RUNNING and self._held is None:
            for ch in self.channels:
                self._flush(ch)

    @machine_input
    def finish(self, now: float) -> None:
        """Input ended: flush every buffer, then TERMINATION_CONTROL to every reader."""
        if self.state is not WriterState.RUNNING or self.blocked:
            raise UsageError(f"finish() while the writer is {'blocked' if self.blocked else self.state.value}")
        self.state = WriterState.FINISHING
        if self.ack_timeout_ms >= 0:
            self._ack_deadline = ms_after(now, self.ack_timeout_ms)
        for ch in self.channels:
            self._flush(ch)
            if not self._move(ch, WriterChannelEvent.FINISH):
                return
            if ch.state is WriterChannelState.LEFT:
                continue
            ch.last_seq += 1
            self._emit(ch, TerminationControlMessage(seq=ch.last_seq, writer_id=self.writer_id,
                                                     reader_id=ch.reader_id), notify=False)
        self._complete_if_all_ended()

    @machine_input
    def received(self, conn: Hashable, message: Message, now: float) -> None:
        """A decoded message arrived on ``conn``."""
        self._receive(conn, message, now)

    @machine_input
    def received_all(self, conn: Hashable, messages: Iterable[Message], now: float) -> None:
        """Every message one read from ``conn`` completed (a reader's credits), in order, in one step;
        what follows a message that failed or completed the machine is ignored."""
        for message in messages:
            self._receive(conn, message, now)
            if self.done:
                return

    def _receive(self, conn: Hashable, message: Message, now: float) -> None:
        event = _EVENT_OF.get(type(message)) or kind_of(message).writer_event  # kind_of: UsageError if unregistered
        if event is _UNEXPECTED:
            reader_id = self._conns.get(conn, message.reader_id)
            if 0 <= reader_id < len(self.channels):
                self._move(self.channels[reader_id], WriterChannelEvent.UNEXPECTED, message_type=message.type.name)
            else:
                self._fail(errors.UnexpectedMessage(self.side.handler, message.type.name))
            return
        ch = self._channel_for_peer(message.reader_id)
        if ch is None:
            return
        bound_to = self._conns.get(conn)
        named = self.directory_id if bound_to is None and isinstance(message, CreditMessage) else self.writer_id
        if message.writer_id != named or (bound_to is not None and bound_to != ch.reader_id):
            self._move(ch if bound_to is None else self.channels[bound_to], WriterChannelEvent.MISMATCHED_IDS,
                       message_type=message.type.name, named_writer_id=message.writer_id,
                       named_reader_id=message.reader_id, writer_id=named)
            return
        if ch.bound and ch.conn != conn:
            self._move(ch, WriterChannelEvent.FOREIGN_CONNECTION)
            return
        if event is _CREDIT:
            if self._move(ch, _CREDIT) and not ch.bound and ch.state is not _LEFT:
                self._bind(ch, conn)
        elif event is _ACK:
            assert isinstance(message, TerminationAckMessage)
            self._on_ack(ch, message)
        else:
            raise UsageError(f"the registry classifies {message.type.name} as {event.value}, which a writer "
                             "does not receive")

    def decode_failed(self, conn: Hashable, error: errors.CodecError, now: float) -> Step:
        """The bytes from ``conn`` did not decode: the writer fails with the codec's error."""
        return self.abort(error, now)

    @machine_input
    def connection_closed(self, conn: Hashable, now: float) -> None:
        """``conn`` closed; fatal if it is bound to a reader that has not acknowledged termination."""
        reader_id = self._conns.pop(conn, None)
        if reader_id is not None:
            channel = self.channels[reader_id]
            if self.readers_may_leave and channel.state in _ACK_AWAITED:
                self._leave(channel, now)
            else:
                self._move(channel, WriterChannelEvent.CLOSE)

    @machine_input
    def send_completed(self, reader_id: int, seq: int, now: float) -> None:
        """The socket write of DATA ``seq`` to ``reader_id`` completed: its permits return."""
        self._data_written(reader_id, seq, now)

    @machine_input
    def sends_completed(self, written: Iterable[tuple[int, int]], now: float) -> None:
        """``send_completed`` for each ``(reader_id, seq)`` in order (the DATA of one vectored write),
        in one step."""
        for reader_id, seq in written:
            self._data_written(reader_id, seq, now)
            if self.done:
                return

    def _data_written(self, reader_id: int, seq: int, now: float) -> None:
        permits = self._in_flight.pop((reader_id, seq), None)
        if permits is None:
            if self._left(reader_id):
                return  # its permits returned when it left
            raise UsageError(f"no DATA {seq} to reader {reader_id} is waiting for its write")
        self.permits_available += permits
        self._resume_held(now)

    def _resume_held(self, now: float) -> None:
        """Permits returned: the held record may open its buffer now, which unblocks the producer."""
        if self._held is not None:
            held_reader, record = self._held
            channel = self.channels[held_reader]
            if channel.buffer is not None or self._open_buffer(channel, now):
                self._held = None
                self._append(channel, record, now)
                self._surface(ProducerUnblocked())

    @machine_input
    def send_failed(self, reader_id: int, seq: int, cause: str, now: float) -> None:
        """The socket write of DATA ``seq`` to ``reader_id`` failed: the writer fails (the reader
        leaves, when readers may leave)."""
        if (reader_id, seq) not in self._in_flight and not self._left(reader_id):
            raise UsageError(f"no DATA {seq} to reader {reader_id} is waiting for its write")
        channel = self.channels[reader_id]
        if self.readers_may_leave and channel.state in _ACK_AWAITED:
            self._leave(channel, now)
        else:
            self._move(channel, WriterChannelEvent.SEND_FAILED, cause=cause)

    @machine_input
    def reader_left(self, reader_id: int, now: float) -> None:
        """The run does not serve ``reader_id`` (or no longer): drop its data, await no ack from it."""
        self._leave(self._channel_for_caller(reader_id), now)

    @machine_input
    def tick(self, now: float) -> None:
        """Time passed: the periodic flush, and the connection timeout of unbound readers."""
        if self._bind_deadline is not None and now >= self._bind_deadline:
            for ch in self.channels:
                if not ch.bound and ch.state is not WriterChannelState.LEFT:
                    self._move(ch, WriterChannelEvent.TIMEOUT, timeout_ms=self.settings.writer_connection_timeout_ms)
                    return
        if self._ack_deadline is not None and now >= self._ack_deadline:
            for ch in self.channels:
                if ch.state is WriterChannelState.TERMINATING:
                    self._move(ch, WriterChannelEvent.ACK_TIMEOUT, timeout_ms=self.ack_timeout_ms)
                    return
        if self.state is WriterState.RUNNING and now >= self._next_periodic:
            for ch in self.channels:
                self._flush(ch)
            self._next_periodic = ms_after(now, self._max_wait_ms)

    @machine_input
    def abort(self, error: errors.ShuffleError, now: float) -> None:
        """The task failed locally (or its input could not be decoded)."""
        self._fail(error)

    # -- internals --------------------------------------------------------------------------------

    def _left(self, reader_id: int) -> bool:
        return 0 <= reader_id < len(self.channels) and self.channels[reader_id].state is WriterChannelState.LEFT

    def _leave(self, channel: WriterChannel, now: float) -> None:
        """LEAVE: the channel's open buffer, queued and unwritten DATA are dropped, their permits return."""
        if not self._move(channel, WriterChannelEvent.LEAVE):
            return
        if channel.buffer is not None:
            channel.drop_buffer()
            self.permits_available += self.settings.network_buffer_size
        channel.queued.clear()
        for pair in [p for p in self._in_flight if p[0] == channel.reader_id]:
            self.permits_available += self._in_flight.pop(pair)
        if channel.conn is not None:
            self._conns.pop(channel.conn, None)
            channel.conn = None
        if self._held is not None and self._held[0] == channel.reader_id:
            self._held = None
            self._surface(ProducerUnblocked())
        self._resume_held(now)
        self._complete_if_all_ended()

    def _complete_if_all_ended(self) -> None:
        """After ``finish``, the writer completes once every channel is acknowledged or left."""
        if self.state is WriterState.FINISHING and all(ch.state in _ENDED for ch in self.channels):
            self.state = WriterState.COMPLETED
            self._surface(Completed())

    def _channel_for_caller(self, reader_id: int) -> WriterChannel:
        if not 0 <= reader_id < len(self.channels):
            raise UsageError(f"reader id {reader_id} outside 0..{len(self.channels) - 1}")
        return self.channels[reader_id]

    def _channel_for_peer(self, reader_id: int) -> WriterChannel | None:
        if 0 <= reader_id < len(self.channels):
            return self.channels[reader_id]
        self._fail(errors.UnknownPeer("reader", reader_id, len(self.channels)))
        return None

    def _open_buffer(self, channel: WriterChannel, now: float) -> bool:
        n = self.settings.network_buffer_size
        if self.permits_available < n:
            return False
        self.permits_available -= n
        channel.buffer = bytearray()
        channel.flush_due = ms_after(now, self._max_wait_ms)
        if self._next_periodic <= now and self._max_wait_ms > 0:
            periods = periods_past(self._next_periodic, now, self._max_wait_ms)
            self._next_periodic = ms_after(self._next_periodic, periods * self._max_wait_ms)
        return True

    def _append(self, channel: WriterChannel, record: Payload, now: float) -> bool:
        """Frame ``record`` into the channel's open buffer (copied, or gathered from its own buffer when it
        is long ``bytes``); True when that flushed it."""
        buffer = channel.buffer
        assert buffer is not None
        length = len(record)
        buffer += RECORD_LENGTH.pack(length)
        if length < GATHER_MIN or type(record) is not bytes:
            buffer += record
            size = channel.gathered_size + len(buffer)
        else:
            channel.gathered += (buffer, record)
            channel.gathered_size = size = channel.gathered_size + len(buffer) + length
            channel.buffer = bytearray()
        if size >= self._flush_at or now >= channel.flush_due:
            self._flush(channel)
            return True
        return False

    def _flush(self, channel: WriterChannel) -> None:
        """Turn the channel's buffer into a DATA message (sent, or queued until the bind)."""
        if channel.buffer is None or not self._move(channel, _FLUSH):
            return
        payload = channel.take_payload()
        channel.last_seq += 1
        checksum = payload_checksum(payload) if self.settings.checksum_enabled else 0
        self._in_flight[(channel.reader_id, channel.last_seq)] = self.settings.network_buffer_size
        self._emit(channel, DataMessage(seq=channel.last_seq, writer_id=self.writer_id, reader_id=channel.reader_id,
                                        checksum=checksum, payload=payload), notify=True)

    def _emit(self, channel: WriterChannel, message: Message, notify: bool) -> None:
        if channel.bound:
            self._send(Send(peer=channel.reader_id, message=message, conn=channel.conn, notify=notify))
        else:
            channel.queued.append(message)

    def _bind(self, channel: WriterChannel, conn: Hashable) -> None:
        channel.conn = conn
        self._conns[conn] = channel.reader_id
        self._surface(Bound(reader_id=channel.reader_id, conn=conn))
        while channel.queued:
            message = channel.queued.popleft()
            self._send(Send(peer=channel.reader_id, message=message, conn=conn, notify=isinstance(message,
                                                                                                  DataMessage)))

    def _on_ack(self, channel: WriterChannel, ack: TerminationAckMessage) -> None:
        observed = {"message_type": MessageType.TERMINATION_ACK_MESSAGE.name}
        if ack.seq != channel.last_seq:
            self._move(channel, WriterChannelEvent.ACK_WRONG_SEQ, expected=channel.last_seq, actual=ack.seq,
                       **observed)
            return
        if self._move(channel, WriterChannelEvent.ACK, **observed):
            self._complete_if_all_ended()

    def _stop(self) -> None:
        self.state = WriterState.FAILED
        self._held = None

    def _ends(self, channel: WriterChannel) -> tuple[int, int]:
        return self.writer_id, channel.reader_id

    def _deadline(self) -> float | None:
        if self.done:
            return None
        candidates = []
        if self._bind_deadline is not None and not all(
                ch.bound or ch.state is WriterChannelState.LEFT for ch in self.channels):
            candidates.append(self._bind_deadline)
        if self.state is WriterState.RUNNING and any(ch.buffer is not None for ch in self.channels):
            candidates.append(self._next_periodic)
        if self._ack_deadline is not None:
            candidates.append(self._ack_deadline)
        return min(candidates, default=None)
