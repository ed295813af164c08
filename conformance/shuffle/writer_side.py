"""The writer's end of a watched connection, judged by the spec's own writer machine.

A :class:`~spec.shuffle.WriterMachine`, registered under the directory id the reader's handshake CREDIT
names and naming itself by the partition id the writer's first frame names, is driven with what the writer did as seen on the wire: each
DATA's records are written to it and flushed whole, each TERMINATION_CONTROL is its ``finish``, each
socket write completes as the frame is seen. What the machine sends in return must be what the writer
sent (its sequence numbers, its checksums); what the reader sends is fed to it as the writer receives
it, so an ack with the wrong seq, an ack before termination, a DATA from the reader or ids naming
another pair are the failures its channel table names, and a connection that closes before the ack is
the writer's ``CONNECTION_CLOSED_BEFORE_TERMINATION``.

The machine never flushes a DATA early by size: its buffer is far larger than any Spark flushes (the
observed DATA is flushed whole by a timer tick), and its clock is its own, one step per frame.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from spec.shuffle import errors
from spec.shuffle.messages import DataMessage, Message, TerminationControlMessage
from spec.shuffle.records import decode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Failed, Step
from spec.shuffle.transitions import WriterState
from spec.shuffle.writer import WriterMachine

CONNECTION: Final = "watched"
"""The machine's name for the one connection it is shown."""
BUFFER_LIMIT: Final = 64 * 1024 * 1024
MAX_READERS: Final = 4096
"""A first frame naming a larger reader id leaves the writer's end unjudged (its machine would need
that many channels); the reader's end still is."""


def _settings(num_readers: int, checksums: bool) -> ShuffleSettings:
    size = min(BUFFER_LIMIT, (2**31 - 1) // (2 * num_readers))
    return ShuffleSettings(checksum_enabled=checksums, network_buffer_size=size, writer_connection_timeout_ms=-1)


class WriterSide:
    """One writer channel, fed the connection's frames; every method returns what the writer got wrong."""

    def __init__(self, writer_id: int, reader_id: int, checksums: bool) -> None:
        self.reader_id = reader_id
        self.machine = WriterMachine(0, writer_id, reader_id + 1, _settings(reader_id + 1, checksums), 0.0)
        self._wait_s = self.machine.settings.network_buffer_max_wait_time_ms / 1000.0
        self._now = 0.0
        self._failures(self.machine.connection_accepted(CONNECTION, self._tick()))

    @classmethod
    def for_pair(cls, writer_id: int, reader_id: int, checksums: bool) -> WriterSide | None:
        return cls(writer_id, reader_id, checksums) if 0 <= reader_id < MAX_READERS else None

    def named(self, partition_id: int) -> None:
        """The writer's first frame named its partition id: the machine, which has sent nothing yet, names
        itself so from here on, registered under the directory id the handshake CREDIT named
        (docs/spec/shuffle.md#channel-ids)."""
        self.machine.writer_id = partition_id

    def checksums(self, enabled: bool) -> None:
        """Whether the writer computes checksums, once the first DATA tells."""
        self.machine.settings = replace(self.machine.settings, checksum_enabled=enabled)

    def _tick(self) -> float:
        self._now += 2 * self._wait_s + 1.0
        return self._now

    @property
    def _running(self) -> bool:
        return self.machine.state is WriterState.RUNNING and not self.machine.blocked

    def sent(self, message: Message) -> list[errors.ShuffleError | str]:
        """The writer sent ``message``: what its machine, doing the same, sends differently or fails on."""
        if not self._running:
            return []
        if isinstance(message, DataMessage):
            try:
                records = decode_records(message.payload)
            except errors.CodecError:
                return []  # the reader's machine names it
            if not records:
                return ["the writer sent a DATA without records (a writer flushes only a buffer holding some)"]
            now = self._tick()
            problems = self._failures(self.machine.write_batch([(self.reader_id, r) for r in records], now).step)
            step = self.machine.tick(now + 2 * self._wait_s)
        elif isinstance(message, TerminationControlMessage):
            problems, step = [], self.machine.finish(self._tick())
        else:
            return []  # a CREDIT or ack from the writer: the reader's machine names it
        problems += self._failures(step)
        ours = [s.message for s in step.sends if s.peer == self.reader_id]
        if ours != [message]:
            problems.append(f"the writer sent {describe(message)} where its machine sends "
                            f"{', '.join(map(describe, ours)) or 'nothing'}")
        for send in step.sends:
            if send.notify and send.peer == self.reader_id:
                problems += self._failures(self.machine.send_completed(send.peer, send.message.seq, self._now))
        return problems

    def received(self, message: Message) -> list[errors.ShuffleError | str]:
        """The writer received ``message`` from the reader."""
        return self._failures(self.machine.received(CONNECTION, message, self._tick()))

    def closed(self) -> list[errors.ShuffleError | str]:
        return self._failures(self.machine.connection_closed(CONNECTION, self._tick()))

    @staticmethod
    def _failures(step: Step) -> list[errors.ShuffleError | str]:
        return [event.error for event in step.events if isinstance(event, Failed)]


def describe(message: Message) -> str:
    """A frame in one line, as violations name it."""
    return f"{message.type.name}(writer {message.writer_id}, reader {message.reader_id}, seq {message.seq})"
