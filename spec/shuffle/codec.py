"""Encoding and decoding of message bodies and transport frames.

The hot path uses ``struct`` formats *derived from* the construct layouts in
:mod:`spec.shuffle.layouts` (never written by hand), so the bytes have one source of truth;
the test suite proves both paths agree on every vector. Decoding follows Spark's order of
checks, bounds every size read from the wire before using it, and copies a payload at most once.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from construct import FormatField, Struct

from spec.shuffle import errors
from spec.shuffle.layouts import (
    ACK_FIELDS,
    COMMON_HEADER,
    CREDIT_FIELDS,
    DATA_FIELDS,
    FRAME_HEADER,
    ONE_WAY_MESSAGE,
    TERMINATION_FIELDS,
    MessageType,
)
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    Payload,
    TerminationAckMessage,
    TerminationControlMessage,
)

MIN_FRAME_LENGTH: Final = FRAME_HEADER.sizeof()
"""A frame holds at least its own 13-byte header (Spark would fail later reading the body)."""

SPARK_MAX_FRAME_LENGTH: Final = 2**31 + 6
"""Largest frame Spark's ``TransportFrameDecoder`` accepts: it requires frame_length - 8 < 2^31 - 1."""

DEFAULT_MAX_FRAME_LENGTH: Final = 256 * 1024 * 1024
"""Largest frame accepted unless configured otherwise: stricter than Spark's 2^31 + 6, so a
reference peer is not made to allocate 2 GiB on the word of a stranger."""


def _struct_of(layout: Struct) -> struct.Struct:
    """A ``struct`` format equivalent to a construct Struct of fixed-size integer fields."""
    codes = []
    for sub in layout.subcons:
        field: Any = sub
        while not isinstance(field, FormatField):
            field = field.subcon
        fmt: str = field.fmtstr
        codes.append(fmt.lstrip("<>=!"))
    return struct.Struct(">" + "".join(codes))


_HEADER = _struct_of(COMMON_HEADER)
_TYPE_ID = struct.Struct(_HEADER.format[:2])
_FRAME = _struct_of(FRAME_HEADER)
_DATA = struct.Struct(_HEADER.format + _struct_of(DATA_FIELDS).format[1:])
_CREDIT = struct.Struct(_HEADER.format + _struct_of(CREDIT_FIELDS).format[1:])
_TERMINATION = struct.Struct(_HEADER.format + _struct_of(TERMINATION_FIELDS).format[1:])
_ACK = struct.Struct(_HEADER.format + _struct_of(ACK_FIELDS).format[1:])

HEADER_LENGTH: Final = {
    MessageType.DATA_MESSAGE_UNSAFE_ROW: _DATA.size,
    MessageType.CREDIT_CONTROL_MESSAGE: _CREDIT.size,
    MessageType.TERMINATION_CONTROL_MESSAGE: _TERMINATION.size,
    MessageType.TERMINATION_ACK_MESSAGE: _ACK.size,
}
"""Spark's ``headerLength()``: the fixed part of each body (32, 24, 20, 20)."""

FRAME_HEADER_LENGTH: Final = _FRAME.size


def body_length(message: Message) -> int:
    """Length of the encoded body."""
    if isinstance(message, DataMessage):
        return _DATA.size + len(message.payload)
    return HEADER_LENGTH[message.type]


def encode_head(message: Message) -> bytes:
    """The fixed part of a body; for DATA the payload follows as a separate component."""
    if isinstance(message, DataMessage):
        return _DATA.pack(
            message.type, message.seq, message.writer_id, message.reader_id,
            len(message.payload), message.checksum,
        )
    if isinstance(message, CreditMessage):
        return _CREDIT.pack(
            message.type, message.seq, message.writer_id, message.reader_id, message.num_messages
        )
    if isinstance(message, TerminationControlMessage):
        return _TERMINATION.pack(message.type, message.seq, message.writer_id, message.reader_id)
    return _ACK.pack(message.type, message.seq, message.writer_id, message.reader_id)


def encode_body(message: Message) -> bytes:
    """The whole body, as Spark's ``StreamingShuffleMessage.encode`` writes it."""
    head = encode_head(message)
    return head + message.payload if isinstance(message, DataMessage) else head


def encode_frame_parts(message: Message) -> tuple[bytes, Payload]:
    """Frame header + fixed body part, and the payload (empty unless DATA), for vectored writes.

    The payload is returned as given, so a socket can send it without a copy.
    """
    length = body_length(message)
    head = _FRAME.pack(FRAME_HEADER_LENGTH + length, ONE_WAY_MESSAGE, length) + encode_head(message)
    return head, message.payload if isinstance(message, DataMessage) else b""


def encode_frame(message: Message) -> bytes:
    """One complete transport frame (OneWayMessage) carrying the message."""
    head, payload = encode_frame_parts(message)
    return head + payload


def decode_body(body: Payload) -> Message:
    """Decode exactly one body; every byte must belong to the message.

    A DATA payload is copied once out of ``body``.
    """
    view = memoryview(body)
    available = len(view)
    # Spark validates the type id before it reads the sequence number.
    if available < _TYPE_ID.size:
        raise errors.TruncatedInput("message type id", _TYPE_ID.size, available)
    (type_id,) = _TYPE_ID.unpack_from(view)
    try:
        kind = MessageType(type_id)
    except ValueError:
        raise errors.UnexpectedMessageType(type_id) from None
    needed = HEADER_LENGTH[kind]
    if available < needed:
        raise errors.TruncatedInput(kind.name, needed, available)
    seq: int
    if kind is MessageType.DATA_MESSAGE_UNSAFE_ROW:
        _, seq, writer_id, reader_id, data_size, checksum = _DATA.unpack_from(view)
        if data_size < 0:
            raise errors.NegativeDataSize(data_size, available - needed)
        if data_size != available - needed:
            raise errors.DataSizeMismatch(data_size, available - needed)
        return DataMessage(seq, writer_id, reader_id, checksum, bytes(view[needed:]))
    if available > needed:
        raise errors.TrailingBytes(kind.name, available - needed)
    if kind is MessageType.CREDIT_CONTROL_MESSAGE:
        _, seq, writer_id, reader_id, num_messages = _CREDIT.unpack_from(view)
        return CreditMessage(writer_id, reader_id, num_messages, seq)
    _, seq, writer_id, reader_id = _TERMINATION.unpack_from(view)
    if kind is MessageType.TERMINATION_CONTROL_MESSAGE:
        return TerminationControlMessage(seq, writer_id, reader_id)
    return TerminationAckMessage(seq, writer_id, reader_id)


def check_frame_header(head: Payload, max_frame_length: int) -> int:
    """Validate a 13-byte frame header and return the body length it announces.

    Runs before anything is allocated for the body: the length is bounded first.
    """
    frame_length, message_type, _declared_body_length = _FRAME.unpack_from(head)
    if not MIN_FRAME_LENGTH <= frame_length <= max_frame_length:
        raise errors.FrameLengthOutOfRange(frame_length, MIN_FRAME_LENGTH, max_frame_length)
    if message_type != ONE_WAY_MESSAGE:
        raise errors.UnsupportedTransportMessage(message_type, ONE_WAY_MESSAGE)
    return int(frame_length) - FRAME_HEADER_LENGTH


def decode_frame(frame: Payload, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> Message:
    """Decode exactly one complete frame (no bytes before or after it)."""
    view = memoryview(frame)
    if len(view) < FRAME_HEADER_LENGTH:
        raise errors.TruncatedInput("frame header", FRAME_HEADER_LENGTH, len(view))
    length = check_frame_header(view, max_frame_length)
    available = len(view) - FRAME_HEADER_LENGTH
    if available < length:
        raise errors.TruncatedInput("frame body", length, available)
    if available > length:
        raise errors.TrailingBytes("frame", available - length)
    return decode_body(view[FRAME_HEADER_LENGTH:])
