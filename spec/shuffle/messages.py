"""Typed, immutable streaming-shuffle messages (one class per Spark message type)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from spec.shuffle.layouts import MessageType

Payload = Union[bytes, bytearray, memoryview]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataMessage:
    """Serialized records from a writer to one reader; ``data_size`` is the payload length."""

    seq: int
    writer_id: int
    reader_id: int
    checksum: int
    payload: Payload
    type: ClassVar[MessageType] = MessageType.DATA_MESSAGE_UNSAFE_ROW

    @property
    def data_size(self) -> int:
        return len(self.payload)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreditMessage:
    """Reader to writer: the handshake (first credit binds the channel), then one per DATA."""

    writer_id: int
    reader_id: int
    num_messages: int = 1
    seq: int = 0
    type: ClassVar[MessageType] = MessageType.CREDIT_CONTROL_MESSAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminationControlMessage:
    """Writer to reader: end of this writer's stream; consumes one sequence number."""

    seq: int
    writer_id: int
    reader_id: int
    type: ClassVar[MessageType] = MessageType.TERMINATION_CONTROL_MESSAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminationAckMessage:
    """Reader to writer: acknowledges termination; ``seq`` echoes the last seq received."""

    seq: int
    writer_id: int
    reader_id: int
    type: ClassVar[MessageType] = MessageType.TERMINATION_ACK_MESSAGE


Message = Union[DataMessage, CreditMessage, TerminationControlMessage, TerminationAckMessage]
