"""Seafowl's data-sync protobuf messages, wire-compatible field for field.

The descriptors are built at import time with ``descriptor_pb2`` instead of
generated code, so there is no generated file to drift from Seafowl's
``clade/proto/{sync,schema}.proto`` (reproduced in docs/sync.md); golden
encodings in the tests pin every field number and type.  Typed dataclasses wrap the
dynamic message classes so the rest of the code never touches untyped
protobuf objects.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, cast

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from spec.sync.errors import CommandDecodeError

COMMAND_TYPE_URL = "DataSyncCommand"
"""The bare ``type_url`` of the ``Any`` wrapping a command (Seafowl's convention)."""

MAX_MESSAGE_BYTES = 128 * 1024 * 1024
"""Largest gRPC message a sync server accepts."""


TRUNCATE_FIELD = 100
"""``DataSyncCommand.truncate`` (bool): streamwire's extension, numbered far from Seafowl's fields.

A put with ``truncate`` set empties its table at the put's place in the stream, then applies the
put's own rows (none, or those that followed the truncation in the source transaction); the put
carries the table's column descriptors and Arrow schema like any other. It is never a probe, even
with no rows and no sequence number. A server without the extension ignores the field: it would
take a truncating put without rows for a probe (or an empty put) and keep the rows, so a client
sends one only to a server it knows has the extension (docs/sync.md, "Extension: truncate")."""

SERVER_LIFE_FIELD = 101
"""``DataSyncResponse.server_life`` and ``DataSyncCommand.server_life`` (uint64, optional): streamwire's
extension. A server draws a number when it starts and puts it in every response of its life; a client puts
the one it last heard in every put. A server refuses, unrecorded, a put naming another life
(:class:`~spec.sync.errors.ServerRestarted`): the client's channel reached a restarted server without a
failed call (gRPC reconnects by itself), so no probe showed the restart, and recording the put would move
the origin's memory number past what the client was told, hiding that the old server's memory was lost.
The client then connects again and its probe shows the restart (docs/sync.md, "Extension: server life").
Either side without the extension leaves the field out and nothing changes."""


class ColumnRole(enum.IntEnum):
    """Role of a batch column (``clade.sync.ColumnRole``)."""

    OLD_PK = 0
    NEW_PK = 1
    CHANGED = 2
    VALUE = 3


class TableFormat(enum.IntEnum):
    """Lakehouse table format (``clade.schema.TableFormat``)."""

    DELTA = 0
    ICEBERG = 1


_F = descriptor_pb2.FieldDescriptorProto


def proto_field(
    msg: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    ftype: int,
    *,
    type_name: str = "",
    repeated: bool = False,
    proto3_optional: bool = False,
) -> None:
    f = msg.field.add(name=name, number=number, type=ftype)
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name:
        f.type_name = type_name
    if proto3_optional:
        # proto3 `optional` is a synthetic one-field oneof named `_<field>`.
        f.proto3_optional = True
        f.oneof_index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=f"_{name}")


def proto_enum(fd: descriptor_pb2.FileDescriptorProto, name: str, values: type[enum.IntEnum]) -> None:
    e = fd.enum_type.add(name=name)
    for v in values:
        e.value.add(name=v.name, number=int(v))


def _schema_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="schema.proto", package="clade.schema", syntax="proto3")
    proto_enum(fd, "TableFormat", TableFormat)
    loc = fd.message_type.add(name="StorageLocation")
    proto_field(loc, "location", 1, _F.TYPE_STRING)
    entry = loc.nested_type.add(name="OptionsEntry")
    entry.options.map_entry = True
    proto_field(entry, "key", 1, _F.TYPE_STRING)
    proto_field(entry, "value", 2, _F.TYPE_STRING)
    proto_field(loc, "options", 2, _F.TYPE_MESSAGE, type_name=".clade.schema.StorageLocation.OptionsEntry", repeated=True)
    proto_field(loc, "name", 3, _F.TYPE_STRING)
    return fd


def _sync_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="sync.proto", package="clade.sync", syntax="proto3", dependency=["schema.proto"]
    )
    proto_enum(fd, "ColumnRole", ColumnRole)
    cd = fd.message_type.add(name="ColumnDescriptor")
    proto_field(cd, "role", 1, _F.TYPE_ENUM, type_name=".clade.sync.ColumnRole")
    proto_field(cd, "name", 2, _F.TYPE_STRING)
    cmd = fd.message_type.add(name="DataSyncCommand")
    proto_field(cmd, "path", 1, _F.TYPE_STRING)
    proto_field(cmd, "store", 2, _F.TYPE_MESSAGE, type_name=".clade.schema.StorageLocation")
    proto_field(cmd, "column_descriptors", 3, _F.TYPE_MESSAGE, type_name=".clade.sync.ColumnDescriptor", repeated=True)
    proto_field(cmd, "origin", 4, _F.TYPE_STRING)
    proto_field(cmd, "sequence_number", 5, _F.TYPE_UINT64, proto3_optional=True)
    proto_field(cmd, "format", 6, _F.TYPE_ENUM, type_name=".clade.schema.TableFormat")
    proto_field(cmd, "truncate", TRUNCATE_FIELD, _F.TYPE_BOOL)  # streamwire's extension (not in Seafowl)
    proto_field(cmd, "server_life", SERVER_LIFE_FIELD, _F.TYPE_UINT64, proto3_optional=True)  # likewise
    resp = fd.message_type.add(name="DataSyncResponse")
    proto_field(resp, "accepted", 1, _F.TYPE_BOOL)
    proto_field(resp, "memory_sequence_number", 2, _F.TYPE_UINT64, proto3_optional=True)
    proto_field(resp, "durable_sequence_number", 3, _F.TYPE_UINT64, proto3_optional=True)
    proto_field(resp, "first", 4, _F.TYPE_BOOL)
    proto_field(resp, "server_life", SERVER_LIFE_FIELD, _F.TYPE_UINT64, proto3_optional=True)  # streamwire's
    return fd


FILE_DESCRIPTORS = (_schema_file(), _sync_file())
"""The two ``FileDescriptorProto`` s, in dependency order."""

_POOL = descriptor_pool.DescriptorPool()
for _fd in FILE_DESCRIPTORS:
    _POOL.Add(_fd)


def _cls(full_name: str) -> type[Message]:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))


CommandMessage = _cls("clade.sync.DataSyncCommand")
ResponseMessage = _cls("clade.sync.DataSyncResponse")


@dataclass(frozen=True, kw_only=True)
class ColumnDescriptor:
    """One batch column's role and logical name; ``role`` may be an unknown int off the wire."""

    role: int
    name: str


@dataclass(frozen=True, kw_only=True)
class StorageLocation:
    """Root URL of a store plus object-store options."""

    location: str
    options: dict[str, str] = field(default_factory=dict)
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class SyncCommand:
    """A decoded ``DataSyncCommand``."""

    path: str
    origin: str
    column_descriptors: tuple[ColumnDescriptor, ...] = ()
    sequence_number: int | None = None
    store: StorageLocation | None = None
    format: int = TableFormat.DELTA
    truncate: bool = False
    """Empty the table before this put's rows (the truncate extension, :data:`TRUNCATE_FIELD`)."""
    server_life: int | None = None
    """The server life the client last heard (the server-life extension, :data:`SERVER_LIFE_FIELD`)."""

    def to_message(self) -> Message:
        """The protobuf message for this command."""
        m: Any = CommandMessage()
        m.path = self.path
        m.origin = self.origin
        for cd in self.column_descriptors:
            m.column_descriptors.add(role=cd.role, name=cd.name)
        if self.sequence_number is not None:
            m.sequence_number = self.sequence_number
        if self.store is not None:
            m.store.location = self.store.location
            m.store.options.update(self.store.options)
            m.store.name = self.store.name
        m.format = self.format
        m.truncate = self.truncate
        if self.server_life is not None:
            m.server_life = self.server_life
        return cast(Message, m)

    def encode(self) -> bytes:
        """Encoded ``DataSyncCommand`` (without the ``Any`` wrapper)."""
        return self.to_message().SerializeToString(deterministic=True)

    def to_descriptor_cmd(self) -> bytes:
        """FlightDescriptor ``cmd`` bytes: an ``Any`` with the bare type_url ``DataSyncCommand``."""
        wrapper = any_pb2.Any(type_url=COMMAND_TYPE_URL, value=self.encode())
        return wrapper.SerializeToString(deterministic=True)


def _parse(message: Message, data: bytes, what: str) -> Any:
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise CommandDecodeError(f"Couldn't decode {what}: {exc}") from exc
    return message


def _optional(m: Any, name: str) -> int | None:
    return int(getattr(m, name)) if m.HasField(name) else None


def decode_command(data: bytes) -> SyncCommand:
    """Decode an encoded ``DataSyncCommand``; raises CommandDecodeError on malformed bytes."""
    m = _parse(CommandMessage(), data, "command")
    store = None
    if m.HasField("store"):
        store = StorageLocation(location=m.store.location, options=dict(m.store.options), name=m.store.name)
    return SyncCommand(
        path=m.path,
        origin=m.origin,
        column_descriptors=tuple(ColumnDescriptor(role=int(cd.role), name=cd.name) for cd in m.column_descriptors),
        sequence_number=_optional(m, "sequence_number"),
        store=store,
        format=int(m.format),
        truncate=bool(m.truncate),
        server_life=_optional(m, "server_life"),
    )


def decode_descriptor_cmd(data: bytes) -> SyncCommand:
    """Decode FlightDescriptor ``cmd`` bytes (``Any`` wrapping a command)."""
    wrapper = _parse(any_pb2.Any(), data, "command")
    if wrapper.type_url != COMMAND_TYPE_URL:
        raise CommandDecodeError(f"Unsupported command type_url: {wrapper.type_url!r}")
    return decode_command(wrapper.value)


@dataclass(frozen=True, kw_only=True)
class SyncResponse:
    """A ``DataSyncResponse``: acceptance plus the origin's memory/durable sequence numbers."""

    accepted: bool
    memory_sequence_number: int | None
    durable_sequence_number: int | None
    first: bool
    server_life: int | None = None
    """The life of the server that answered (the server-life extension, :data:`SERVER_LIFE_FIELD`)."""

    def encode(self) -> bytes:
        """Encoded ``DataSyncResponse`` (the PutResult ``app_metadata``)."""
        m: Any = ResponseMessage(accepted=self.accepted, first=self.first)
        if self.memory_sequence_number is not None:
            m.memory_sequence_number = self.memory_sequence_number
        if self.durable_sequence_number is not None:
            m.durable_sequence_number = self.durable_sequence_number
        if self.server_life is not None:
            m.server_life = self.server_life
        return cast(bytes, m.SerializeToString(deterministic=True))


def decode_response(data: bytes) -> SyncResponse:
    """Decode a ``DataSyncResponse``; raises CommandDecodeError on malformed bytes."""
    m = _parse(ResponseMessage(), data, "response")
    return SyncResponse(
        accepted=bool(m.accepted),
        memory_sequence_number=_optional(m, "memory_sequence_number"),
        durable_sequence_number=_optional(m, "durable_sequence_number"),
        first=bool(m.first),
        server_life=_optional(m, "server_life"),
    )
