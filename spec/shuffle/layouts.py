"""The bytes of the streaming shuffle as construct layouts: the single source of truth.

Everything else that touches bytes (the fast codec, the generated spec, the vectors) is derived
from these definitions. Integers are signed big-endian like Java's ``int``/``long``; the layouts
accept the full signed range, because semantic checks belong to the state machines.
"""

from __future__ import annotations

from enum import IntEnum

from construct import Bytes, Error, FixedSized, If, Int8sb, Int32sb, Int64sb, Struct, Switch, Terminated, this


class MessageType(IntEnum):
    """Spark's ``StreamingShuffleMessageType``: the explicit wire id, not the Java ordinal."""

    DATA_MESSAGE_UNSAFE_ROW = 1
    CREDIT_CONTROL_MESSAGE = 2
    TERMINATION_CONTROL_MESSAGE = 3
    TERMINATION_ACK_MESSAGE = 4


ONE_WAY_MESSAGE = 9
"""``org.apache.spark.network.protocol.Message.Type.OneWayMessage``: the transport type of every frame."""

COMMON_HEADER = Struct(
    "type_id" / Int32sb * "message type id (1..4), see MessageType",
    "seq" / Int64sb * "per (writer, reader) sequence number; 0 on CREDIT_CONTROL",
)

DATA_FIELDS = Struct(
    "writer_id" / Int32sb * "writer (map task partition id)",
    "reader_id" / Int32sb * "reader (reduce partition id)",
    "data_size" / Int32sb * "payload length in bytes; must be >= 0 and equal the bytes that follow",
    "checksum" / Int64sb * "CRC32C of the payload in the low 32 bits (high bits 0); 0 when disabled",
)

CREDIT_FIELDS = Struct(
    "writer_id" / Int32sb * "writer the credit is for",
    "reader_id" / Int32sb * "reader granting the credit; binds the channel on the first credit",
    "num_messages" / Int32sb * "credits granted; advisory in Spark 4.3.0 (always 1)",
)

TERMINATION_FIELDS = Struct(
    "writer_id" / Int32sb * "writer ending its stream to this reader",
    "reader_id" / Int32sb * "reader the stream ends at",
)

ACK_FIELDS = Struct(
    "writer_id" / Int32sb * "writer whose termination is acknowledged",
    "reader_id" / Int32sb * "reader acknowledging; header seq echoes the terminator's seq",
)

FIELDS_BY_TYPE = {
    MessageType.DATA_MESSAGE_UNSAFE_ROW: DATA_FIELDS,
    MessageType.CREDIT_CONTROL_MESSAGE: CREDIT_FIELDS,
    MessageType.TERMINATION_CONTROL_MESSAGE: TERMINATION_FIELDS,
    MessageType.TERMINATION_ACK_MESSAGE: ACK_FIELDS,
}
"""The fields after the common header, per message type."""

DATA_BODY = Struct(
    "header" / COMMON_HEADER,
    "fields" / DATA_FIELDS,
    "payload" / Bytes(this.fields.data_size) * "serialized records, data_size bytes",
)
"""A whole DATA body: header, fields, then the payload as a separate component."""

FRAME_HEADER = Struct(
    "frame_length" / Int64sb * "length of the whole frame, these 8 bytes included (13 + body length)",
    "message_type" / Int8sb * "transport message type; 9 = OneWayMessage",
    "body_length" / Int32sb * "body length as written by Spark's encoder; Spark's decoder ignores it",
)
"""Spark's transport frame (``MessageEncoder`` / ``TransportFrameDecoder``) around each body."""

MESSAGE_BODY = Struct(
    "header" / COMMON_HEADER,
    "fields" / Switch(this.header.type_id, {int(k): v for k, v in FIELDS_BY_TYPE.items()}, default=Error),
    "payload" / If(
        this.header.type_id == MessageType.DATA_MESSAGE_UNSAFE_ROW, Bytes(this.fields.data_size)
    ) * "DATA only: serialized records, data_size bytes",
    If(this.header.type_id == MessageType.DATA_MESSAGE_UNSAFE_ROW, Terminated),
)
"""Any body, as Spark's ``StreamingShuffleMessage.decode`` reads it (unknown type ids fail).

A DATA payload must end the body exactly. Like Spark, the layout ignores bytes after the
fields of a fixed-size message; the codec is
stricter and rejects them (a compatible sender never writes them).
"""

FRAME = Struct(
    "header" / FRAME_HEADER,
    "body" / FixedSized(this.header.frame_length - FRAME_HEADER.sizeof(), MESSAGE_BODY),
)
"""One transport frame: the body is the rest of the frame (``body_length`` is not consulted)."""
