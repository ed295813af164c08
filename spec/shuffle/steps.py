"""What a shuffle machine returns for each input: messages to send, events to surface, a deadline.

The machines are sans-IO (h11 style): the runtime, the model checks and the conformance peer all
feed them inputs and carry out the returned :class:`Step`, so no protocol decision lives outside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Union

from spec.shuffle.errors import ShuffleError
from spec.shuffle.messages import Message


class UsageError(RuntimeError):
    """The caller broke the machine's API contract (never a fault of the peer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Write ``message`` to ``peer`` (writer: a reader id; reader: a writer id).

    ``conn`` is the writer's connection bound to that reader (None on the reader side, which has one
    connection per writer). When ``notify`` is set the caller must report the completed socket write
    with ``send_completed(peer, message.seq, now)``: the writer returns permits on it and the reader
    counts a termination ack as written only then.
    """

    peer: int
    message: Message
    conn: Hashable | None = None
    notify: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Bound:
    """Writer: the first CREDIT from ``reader_id`` bound its channel to ``conn``."""

    reader_id: int
    conn: Hashable


@dataclass(frozen=True, slots=True, kw_only=True)
class Deliver:
    """Reader: one verified DATA message, its records in order; release it with ``release(writer_id, seq)``."""

    writer_id: int
    seq: int
    records: tuple[bytes, ...]
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseReading:
    """Reader: the byte quota of ``writer_id`` is used up; stop reading its connection."""

    writer_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeReading:
    """Reader: the consumer released enough of ``writer_id``'s data; read its connection again."""

    writer_id: int


@dataclass(frozen=True, slots=True)
class ProducerBlocked:
    """Writer: no memory permit is free; do not call ``write``/``finish`` until unblocked."""


@dataclass(frozen=True, slots=True)
class ProducerUnblocked:
    """Writer: permits came back and the held record was buffered; the producer may continue."""


@dataclass(frozen=True, slots=True)
class Completed:
    """Writer: every reader acknowledged termination. Reader: every writer terminated and was acked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """The machine failed with ``error``; it is terminal and ignores further input."""

    error: ShuffleError


Event = Union[Bound, Deliver, PauseReading, ResumeReading, ProducerBlocked, ProducerUnblocked, Completed, Failed]


@dataclass(frozen=True, slots=True)
class Step:
    """The result of one input: sends in order, events in order, and when to call ``tick`` next."""

    sends: tuple[Send, ...] = ()
    events: tuple[Event, ...] = ()
    deadline: float | None = None
