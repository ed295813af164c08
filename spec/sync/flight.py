"""Arrow Flight's ``DoPut`` on the wire: the messages of ``Flight.proto`` the sync service speaks.

The sync server serves ``arrow.flight.protocol.FlightService/DoPut`` itself (on grpcio) so that
it holds its own limits; clients keep speaking plain Flight.  The three messages a put uses are
built with ``descriptor_pb2`` from Apache Arrow's ``format/Flight.proto`` (field numbers and
types as there; golden encodings in the tests pin them), like ``spec.sync.messages``.

``FlightData`` is decoded by ``decode_flight_data`` rather than by protobuf: it returns views
into the received bytes, so a message's Arrow body is copied once (into the IPC message that
pyarrow reads), not three times (protobuf's parse, the field access, the IPC message).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from spec.sync.errors import FlightDataError
from spec.sync.messages import proto_enum, proto_field

MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""How large a client makes each record batch message of a put: an eighth of the server's default
``MAX_MESSAGE_BYTES``, so a put of any size fits message by message (a put is bounded by the server's
high-watermark, a message by its message limit)."""

FLIGHT_SERVICE = "arrow.flight.protocol.FlightService"
DO_PUT_METHOD = "DoPut"
DO_PUT_PATH = f"/{FLIGHT_SERVICE}/{DO_PUT_METHOD}"
"""The gRPC method path every Flight client calls for a put."""

_F = descriptor_pb2.FieldDescriptorProto


class DescriptorType(enum.IntEnum):
    """``FlightDescriptor.DescriptorType``."""

    UNKNOWN = 0
    PATH = 1
    CMD = 2


class FlightField(enum.IntEnum):
    """Field numbers of ``FlightData``."""

    FLIGHT_DESCRIPTOR = 1
    DATA_HEADER = 2
    APP_METADATA = 3
    DATA_BODY = 1000


def _flight_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="Flight.proto", package="arrow.flight.protocol", syntax="proto3")
    desc = fd.message_type.add(name="FlightDescriptor")
    enum_fd = descriptor_pb2.FileDescriptorProto()  # proto_enum adds to a file; move the enum into the message
    proto_enum(enum_fd, "DescriptorType", DescriptorType)
    desc.enum_type.extend(enum_fd.enum_type)
    proto_field(desc, "type", 1, _F.TYPE_ENUM, type_name=".arrow.flight.protocol.FlightDescriptor.DescriptorType")
    proto_field(desc, "cmd", 2, _F.TYPE_BYTES)
    proto_field(desc, "path", 3, _F.TYPE_STRING, repeated=True)
    data = fd.message_type.add(name="FlightData")
    proto_field(data, "flight_descriptor", FlightField.FLIGHT_DESCRIPTOR, _F.TYPE_MESSAGE,
                type_name=".arrow.flight.protocol.FlightDescriptor")
    proto_field(data, "data_header", FlightField.DATA_HEADER, _F.TYPE_BYTES)
    proto_field(data, "app_metadata", FlightField.APP_METADATA, _F.TYPE_BYTES)
    proto_field(data, "data_body", FlightField.DATA_BODY, _F.TYPE_BYTES)
    result = fd.message_type.add(name="PutResult")
    proto_field(result, "app_metadata", 1, _F.TYPE_BYTES)
    return fd


FLIGHT_FILE = _flight_file()
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(FLIGHT_FILE)

FlightDescriptorMessage = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("arrow.flight.protocol.FlightDescriptor"))
FlightDataMessage = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("arrow.flight.protocol.FlightData"))
PutResultMessage = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("arrow.flight.protocol.PutResult"))


@dataclass(frozen=True)
class FlightData:
    """One decoded ``FlightData``: the descriptor's raw bytes (if present), the IPC header and body (views)."""

    descriptor: bytes | None
    header: memoryview
    body: memoryview


_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5
_VARINT_MAX_BYTES = 10


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(pos, min(pos + _VARINT_MAX_BYTES, len(data))):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    raise FlightDataError("a FlightData message has a malformed varint")


def decode_flight_data(raw: bytes) -> FlightData:
    """Decode a ``FlightData`` message without copying its header and body; raise FlightDataError."""
    data = memoryview(raw)
    fields: dict[int, memoryview] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == _WIRE_LEN:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise FlightDataError("a FlightData field runs past the end of its message")
            fields[number] = data[pos:pos + length]
            pos += length
        elif wire == _WIRE_VARINT:
            pos = _varint(data, pos)[1]
        elif wire in (_WIRE_I64, _WIRE_I32):
            pos += 8 if wire == _WIRE_I64 else 4
        else:
            raise FlightDataError(f"a FlightData message has a field of unsupported wire type {wire}")
    if pos != len(data):
        raise FlightDataError("a FlightData field runs past the end of its message")
    descriptor = fields.get(FlightField.FLIGHT_DESCRIPTOR)
    empty = memoryview(b"")
    return FlightData(
        descriptor=bytes(descriptor) if descriptor is not None else None,
        header=fields.get(FlightField.DATA_HEADER, empty),
        body=fields.get(FlightField.DATA_BODY, empty),
    )


def descriptor_command(raw: bytes) -> bytes:
    """The ``cmd`` bytes of an encoded ``FlightDescriptor`` (empty unless its type is CMD)."""
    message: Any = FlightDescriptorMessage()
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        raise FlightDataError(f"the FlightDescriptor cannot be decoded: {exc}") from None
    return bytes(message.cmd) if message.type == DescriptorType.CMD else b""


_CONTINUATION = b"\xff\xff\xff\xff"
_IPC_ALIGNMENT = 8


def ipc_message(header: memoryview, body: memoryview) -> pa.ipc.Message:
    """The Arrow IPC message of a ``FlightData``'s header and body (the body is copied once)."""
    padding = -len(header) % _IPC_ALIGNMENT
    frame = bytearray(len(_CONTINUATION) + 4 + len(header) + padding + len(body))
    meta_end = 8 + len(header) + padding
    frame[:8] = _CONTINUATION + struct.pack("<i", len(header) + padding)
    frame[8:8 + len(header)] = header
    frame[meta_end:] = body
    try:
        return pa.ipc.read_message(pa.py_buffer(frame))
    except (pa.ArrowInvalid, OSError) as exc:
        raise FlightDataError(f"a FlightData message is not an Arrow IPC message: {exc}") from None


def encode_put_result(app_metadata: bytes) -> bytes:
    """An encoded ``PutResult`` carrying ``app_metadata``."""
    message: Message = PutResultMessage(app_metadata=app_metadata)
    return message.SerializeToString()


def message_batches(table: pa.Table, max_bytes: int) -> list[pa.RecordBatch]:
    """``table`` as record batches of at most ``max_bytes`` each (a row larger than that alone), in order:
    the messages of one put, so a put of any size stays under the server's message limit."""
    out: list[pa.RecordBatch] = []
    pending = list(reversed(table.combine_chunks().to_batches()))
    while pending:
        batch = pending.pop()
        if batch.nbytes <= max_bytes or batch.num_rows <= 1:
            if batch.num_rows:
                out.append(batch)
            continue
        half = batch.num_rows // 2
        pending += [batch.slice(half), batch.slice(0, half)]
    return out
