"""Encoding and decoding of message bodies and transport frames.

The hot path uses ``struct`` formats and field orders *derived from* the construct layouts in
:mod:`spec.shuffle.layouts` (never written by hand), so the bytes have one source of truth;
the test suite proves both paths agree on every vector. Which types exist, and which class each
decodes to, is :mod:`spec.shuffle.registry`'s: an id it does not list is UNEXPECTED_MESSAGE_TYPE.
Decoding follows Spark's order of checks, bounds every size read from the wire before using it,
and copies a payload at most once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable, Final

from construct import FormatField, Struct

from spec.shuffle import errors
from spec.shuffle.layouts import COMMON_HEADER, FRAME_HEADER, ONE_WAY_MESSAGE, MessageType
from spec.shuffle.messages import DataMessage, Gathered, Message, Payload
from spec.shuffle.registry import KINDS, MessageKind

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
FRAME_HEADER_LENGTH: Final = _FRAME.size


@dataclass(frozen=True, slots=True)
class _Codec:
    """Everything needed to encode or decode one message type, derived from its layout."""

    kind: MessageType
    row: MessageKind
    body: struct.Struct
    """Common header + fields, i.e. the fixed part of the body."""
    encode_body: Callable[[Any], bytes]
    encode_frame_parts: Callable[[Any], tuple[Payload, ...]]
    """Frame header + fixed body part in one ``pack``, then the payload's buffers as given (none unless DATA)."""


def _codec(row: MessageKind) -> _Codec:
    """The encoders of one type, derived from its layout: the ``struct`` formats concatenate the
    layouts' field formats, and the values are read by the layouts' field names, in their order."""
    kind = row.type
    body = struct.Struct(_HEADER.format + _struct_of(row.fields).format[1:])
    pack_body, pack_frame = body.pack, struct.Struct(_FRAME.format + body.format[1:]).pack
    names = row.field_names
    values = attrgetter(*names)
    type_id, fixed = int(kind), body.size

    if row.carries_payload:
        def encode_body(m: Any) -> bytes:
            payload = m.payload
            return pack_body(type_id, *values(m)) + (bytes(payload) if type(payload) is Gathered else payload)

        def encode_frame_parts(m: Any) -> tuple[Payload, ...]:
            payload = m.payload
            size = fixed + len(payload)
            head = pack_frame(FRAME_HEADER_LENGTH + size, ONE_WAY_MESSAGE, size, type_id, *values(m))
            return (head, *payload.parts) if type(payload) is Gathered else (head, payload)
    else:
        def encode_body(m: Any) -> bytes:
            return pack_body(type_id, *values(m))

        def encode_frame_parts(m: Any) -> tuple[Payload, ...]:
            return (pack_frame(FRAME_HEADER_LENGTH + fixed, ONE_WAY_MESSAGE, fixed, type_id, *values(m)),)

    return _Codec(kind, row, body, encode_body, encode_frame_parts)


_CODECS: Final[dict[type[Any], _Codec]] = {row.message: _codec(row) for row in KINDS.values()}
"""Each registered message class's codec; a class missing here has no encoding (KeyError, a caller's bug)."""
_BY_ID: Final = {int(c.kind): c for c in _CODECS.values()}
_DATA_ID: Final = int(MessageType.DATA_MESSAGE_UNSAFE_ROW)
_DATA = _CODECS[DataMessage].body

HEADER_LENGTH: Final = {c.kind: c.body.size for c in _CODECS.values()}
"""Spark's ``headerLength()``: the fixed part of each body (32, 24, 20, 20)."""


def body_length(message: Message) -> int:
    """Length of the encoded body."""
    fixed = _CODECS[type(message)].body.size
    return fixed + len(message.payload) if isinstance(message, DataMessage) else fixed


def encode_body(message: Message) -> bytes:
    """The whole body, as Spark's ``StreamingShuffleMessage.encode`` writes it."""
    return _CODECS[type(message)].encode_body(message)


def encode_frame_parts(message: Message) -> tuple[Payload, ...]:
    """Frame header + fixed body part, then the payload's buffers (none unless DATA), for vectored writes.

    The payload's buffers are returned as given (a gathered payload's each in turn), so a socket can
    send them without a copy.
    """
    return _CODECS[type(message)].encode_frame_parts(message)


def encode_frame(message: Message) -> bytes:
    """One complete transport frame (OneWayMessage) carrying the message."""
    return b"".join(_CODECS[type(message)].encode_frame_parts(message))


def decode_body(body: Payload) -> Message:
    """Decode exactly one body; every byte must belong to the message.

    A DATA payload is copied once out of ``body``.
    """
    return decode_body_at(body, 0, len(body))


DataView = tuple[int, int, int, int, int, Payload]
"""A DATA body read into its fields without a message object: the values of :data:`DATA_VIEW_FIELDS`, in order."""

DATA_VIEW_FIELDS: Final = tuple(
    [sub.name for sub in COMMON_HEADER.subcons if sub.name != "type_id"]
    + [sub.name for sub in KINDS[MessageType.DATA_MESSAGE_UNSAFE_ROW].fields.subcons] + ["payload"])
"""The fields of a :data:`DataView`, derived from the layouts: the header and DATA fields in wire order
(``seq, writer_id, reader_id, data_size, checksum``), then the payload."""

_DATA_SIZE_AT: Final = 1 + DATA_VIEW_FIELDS.index("data_size")
"""Where ``data_size`` is in the unpacked DATA body (after its type id)."""


def decode_body_at(buf: Payload, start: int, end: int, *, owned: bool = False) -> Message:
    """Decode the body held in ``buf[start:end]`` without slicing the buffer first.

    A DATA payload is copied out of ``buf`` unless ``owned`` says the caller hands ``buf`` over
    (nobody else will write to it) or lends it for as long as the message is used: the payload is
    then a view of it, and is never copied.
    """
    return message_of(decode_view_at(buf, start, end, owned=owned))


def message_of(decoded: Message | DataView) -> Message:
    """The typed message of what :func:`decode_view_at` returned (a DATA view becomes a DataMessage)."""
    if not isinstance(decoded, tuple):
        return decoded
    fields: dict[str, Any] = {name: value for name, value in zip(DATA_VIEW_FIELDS, decoded) if name != "data_size"}
    return DataMessage(**fields)


CONTROL_BODY_MAX: Final = max(c.body.size for c in _CODECS.values() if not c.row.carries_payload)
"""The longest body that is not a DATA (a CREDIT's 24 bytes); a DATA body is longer (32 bytes at least)."""

DECODED_CONTROLS_KEPT: Final = 256
"""Distinct short bodies remembered with what they decoded to; one more empties the memo."""

_decoded_controls: dict[bytes, Message | DataView] = {}
"""Short bodies decoded before, with what each became: a reader sends the same CREDIT after every DATA, so a
writer decodes it once. Decoding is a function of the bytes and messages are immutable, so a body found here gives
what decoding it again would; only bodies that decoded are kept, so every error is raised every time."""


def decode_view_at(buf: Payload, start: int, end: int, *, owned: bool = False) -> Message | DataView:
    """:func:`decode_body_at` for the hot path: every check and the same errors, but a DATA body becomes
    a :data:`DataView` (its fields as they were unpacked, and its payload) instead of a message object.
    A body no longer than a control message's is decoded once (:data:`_decoded_controls`)."""
    if end - start > CONTROL_BODY_MAX:
        return _decoded_at(buf, start, end, owned)
    body = bytes(buf[start:end])
    known = _decoded_controls.get(body)
    if known is None:
        known = _decoded_at(body, 0, len(body), True)
        if len(_decoded_controls) >= DECODED_CONTROLS_KEPT:
            _decoded_controls.clear()
        _decoded_controls[body] = known
    return known


def _decoded_at(buf: Payload, start: int, end: int, owned: bool) -> Message | DataView:
    """Every check, in Spark's order, of the body in ``buf[start:end]``, and what it decodes to."""
    available = end - start
    # Spark validates the type id before it reads the sequence number.
    if available < _TYPE_ID.size:
        raise errors.TruncatedInput("message type id", _TYPE_ID.size, available)
    (type_id,) = _TYPE_ID.unpack_from(buf, start)
    c = _BY_ID.get(type_id)
    if c is None:
        raise errors.UnexpectedMessageType(type_id)
    needed = c.body.size
    if available < needed:
        raise errors.TruncatedInput(c.kind.name, needed, available)
    if type_id == _DATA_ID:
        fields = _DATA.unpack_from(buf, start)
        data_size = fields[_DATA_SIZE_AT]
        if data_size < 0:
            raise errors.NegativeDataSize(data_size, available - needed)
        if data_size != available - needed:
            raise errors.DataSizeMismatch(data_size, available - needed)
        first = start + needed
        payload: Payload
        if owned:
            payload = memoryview(buf)[first:end]
        else:
            payload = buf[first:end] if isinstance(buf, bytes) else bytes(memoryview(buf)[first:end])
        view: DataView = fields[1:] + (payload,)
        return view
    if available > needed:
        raise errors.TrailingBytes(c.kind.name, available - needed)
    message: Message = c.row.message(**dict(zip(c.row.field_names, c.body.unpack_from(buf, start)[1:])))
    return message


def check_frame_header(buf: Payload, max_frame_length: int, offset: int = 0) -> int:
    """Validate the 13-byte frame header at ``offset`` and return the body length it announces.

    Runs before anything is allocated for the body: the length is bounded first.
    """
    frame_length, message_type, _declared_body_length = _FRAME.unpack_from(buf, offset)
    if not MIN_FRAME_LENGTH <= frame_length <= max_frame_length:
        raise errors.FrameLengthOutOfRange(frame_length, MIN_FRAME_LENGTH, max_frame_length)
    if message_type != ONE_WAY_MESSAGE:
        raise errors.UnsupportedTransportMessage(message_type, ONE_WAY_MESSAGE)
    return int(frame_length) - FRAME_HEADER_LENGTH


def decode_frame(frame: Payload, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> Message:
    """Decode exactly one complete frame (no bytes before or after it)."""
    size = len(frame)
    if size < FRAME_HEADER_LENGTH:
        raise errors.TruncatedInput("frame header", FRAME_HEADER_LENGTH, size)
    length = check_frame_header(frame, max_frame_length)
    available = size - FRAME_HEADER_LENGTH
    if available < length:
        raise errors.TruncatedInput("frame body", length, available)
    if available > length:
        raise errors.TrailingBytes("frame", available - length)
    return decode_body_at(frame, FRAME_HEADER_LENGTH, size)
