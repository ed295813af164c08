"""Typed, immutable streaming-shuffle messages (one class per Spark message type)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from spec.shuffle.layouts import MessageType

Payload = Union[bytes, bytearray, memoryview]


class Gathered:
    """A DATA payload as the buffers the writer framed it from (record length prefixes and the records'
    own buffers), in order and never joined on the send path: ``sendmsg`` gathers them, CRC32C runs
    over each in turn. Its bytes are ``bytes(payload)``, equal to the contiguous payload they spell."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: tuple[Payload, ...]) -> None:
        self.parts = parts
        self.size = sum(map(len, parts))

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Gathered):
            other = bytes(other)
        return isinstance(other, (bytes, bytearray, memoryview)) and bytes(self) == other

    def __hash__(self) -> int:
        return hash(bytes(self))

    def __repr__(self) -> str:
        return f"Gathered({bytes(self)!r})"


DataPayload = Union[Payload, Gathered]
"""A DATA payload: one buffer (decoded, or built by a caller) or the writer's gathered buffers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataMessage:
    """Serialized records from a writer to one reader; ``data_size`` is the payload length."""

    seq: int
    writer_id: int
    reader_id: int
    checksum: int
    payload: DataPayload
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
