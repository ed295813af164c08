"""Typed pgoutput and replication-stream messages, decoded from bytes and encoded back.

:func:`decode_pgoutput` reads one pgoutput message (the data of one XLogData, or one row of
``pg_logical_slot_get_binary_changes``); :func:`decode_replication` reads one CopyData payload
of a replication connection; :meth:`StandbyStatusUpdate.encode` is the client's answer. Bytes that
do not parse as their tag's layout (truncated, with trailing bytes, an unknown part tag) raise
:class:`MalformedMessage`; an unknown tag raises :class:`UnknownMessage`. No I/O, no clocks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Union

from construct import Construct, ConstructError, Struct, Terminated

from spec.pgoutput.errors import MalformedMessage, UnknownMessage
from spec.pgoutput.layouts import (
    PGOUTPUT_BODIES,
    REPLICATION_BODIES,
    STANDBY_STATUS_UPDATE,
    ColumnKind,
    PgOutputTag,
    ReplicationTag,
)


@dataclass(frozen=True, slots=True)
class TupleValue:
    """One column of a TupleData: NULL, an unchanged TOAST value (not sent), or a text/binary value."""

    kind: ColumnKind
    value: bytes | None = None


TupleData = tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Begin:
    """Opens a transaction; ``final_lsn`` is its commit record's LSN."""

    final_lsn: int
    commit_time: int
    xid: int


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    """A ``pg_logical_emit_message`` (sent with the ``messages`` option)."""

    transactional: bool
    lsn: int
    prefix: str
    content: bytes


@dataclass(frozen=True, slots=True)
class Commit:
    """Closes the transaction its Begin opened."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int


@dataclass(frozen=True, slots=True)
class Origin:
    """The replication origin a transaction was replayed from."""

    commit_lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class RelationColumn:
    """One column of a Relation message."""

    key: bool
    """Part of the replica identity (every column under REPLICA IDENTITY FULL)."""
    name: str
    type_oid: int
    type_modifier: int


@dataclass(frozen=True, slots=True)
class Relation:
    """A table's description, sent before its first change on a stream and after each schema change."""

    relation_id: int
    namespace: str
    name: str
    replica_identity: str
    """``d`` default (primary key), ``n`` nothing, ``f`` full, ``i`` index."""
    columns: tuple[RelationColumn, ...]

    @property
    def table(self) -> str:
        """``schema/table``: the relation's name as a sync table path."""
        return f"{self.namespace or 'pg_catalog'}/{self.name}"


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """A non-built-in type's name (Type message ``Y``), sent before a Relation that uses it."""

    type_oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    """A new row."""

    relation_id: int
    new: TupleData


@dataclass(frozen=True, slots=True)
class Update:
    """A changed row: its new tuple, and its old key or old tuple when Postgres sends one."""

    relation_id: int
    old_kind: str | None
    """``K`` (old key: the key changed), ``O`` (old tuple: REPLICA IDENTITY FULL) or None."""
    old: TupleData | None
    new: TupleData


@dataclass(frozen=True, slots=True)
class Delete:
    """A deleted row's key (``K``) or whole old tuple (``O``)."""

    relation_id: int
    old_kind: str
    old: TupleData


@dataclass(frozen=True, slots=True)
class Truncate:
    """TRUNCATE of one or more relations."""

    cascade: bool
    restart_identity: bool
    relation_ids: tuple[int, ...]


PgOutputMessage = Union[Begin, LogicalMessage, Commit, Origin, Relation, TypeInfo, Insert, Update, Delete, Truncate]


@dataclass(frozen=True, slots=True)
class XLogData:
    """Server to client: one piece of output (a pgoutput message) from the WAL."""

    wal_start: int
    wal_end: int
    send_time: int
    data: bytes


@dataclass(frozen=True, slots=True)
class PrimaryKeepalive:
    """Server to client: the end of WAL; ``reply_requested`` asks for a status update at once."""

    wal_end: int
    send_time: int
    reply_requested: bool


@dataclass(frozen=True, slots=True)
class StandbyStatusUpdate:
    """The client's report; a logical slot's ``confirmed_flush_lsn`` follows ``flushed_lsn``."""

    written_lsn: int
    flushed_lsn: int
    applied_lsn: int
    client_time: int
    reply_requested: bool = False

    def encode(self) -> bytes:
        """The CopyData payload (``r`` and the body)."""
        body: bytes = STANDBY_STATUS_UPDATE.build(dict(
            written_lsn=self.written_lsn, flushed_lsn=self.flushed_lsn, applied_lsn=self.applied_lsn,
            client_time=self.client_time, reply_requested=int(self.reply_requested)))
        return ReplicationTag.STANDBY_STATUS_UPDATE.value + body


ReplicationMessage = Union[XLogData, PrimaryKeepalive, StandbyStatusUpdate]

_WHOLE: dict[bytes, Construct] = {
    **{tag.value: Struct("body" / body, Terminated) for tag, body in PGOUTPUT_BODIES.items()},
    **{tag.value: Struct("body" / body, Terminated) for tag, body in REPLICATION_BODIES.items()},
}


def _parse(kind: str, tag: bytes, data: bytes) -> Any:
    try:
        return _WHOLE[tag].parse(data[1:]).body
    except ConstructError as exc:
        raise MalformedMessage(kind, _reason(exc)) from None
    except (ValueError, UnicodeDecodeError) as exc:  # negative lengths, names that are not UTF-8
        raise MalformedMessage(kind, type(exc).__name__) from None


def _reason(exc: ConstructError) -> str:
    name = type(exc).__name__
    if "non-negative" in str(exc):
        return "negative length"
    return {"StreamError": "truncated", "TerminatedError": "trailing bytes", "ConstError": "missing N (new tuple) tag",
            "StringError": "a name is not UTF-8", "RangeError": "a negative count"}.get(name, name)


def _tuple(kind: str, parsed: Any) -> TupleData:
    out = []
    for column in parsed.columns:
        try:
            column_kind = ColumnKind(bytes([column.kind]))
        except ValueError:
            raise MalformedMessage(kind, f"unknown TupleData column kind 0x{column.kind:02x}") from None
        if column.length is not None and column.length < 0:
            raise MalformedMessage(kind, "negative column length")
        out.append(TupleValue(column_kind, column.value))
    return tuple(out)


_XLOG_HEADER = struct.Struct(">QQq")
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">I")
_LENGTH = struct.Struct(">i")
_NULL_VALUE = TupleValue(ColumnKind.NULL)
_UNCHANGED_VALUE = TupleValue(ColumnKind.UNCHANGED_TOAST)
_T, _B, _N, _U, _K, _O, _NEW, _INSERT = (ord(c) for c in "tbnuKONI")


class _NotPlain(Exception):
    """The fast path met something other than a well-formed message: the layouts decide (and name the fault)."""


def _fast_tuple(data: bytes, pos: int) -> tuple[TupleData, int]:
    (count,) = _INT16.unpack_from(data, pos)
    pos += 2
    if count < 0:
        raise _NotPlain
    out: list[TupleValue] = []
    for _ in range(count):
        kind = data[pos]
        pos += 1
        if kind == _T or kind == _B:
            (length,) = _LENGTH.unpack_from(data, pos)
            pos += 4
            end = pos + length
            if length < 0 or end > len(data):
                raise _NotPlain
            out.append(TupleValue(ColumnKind.TEXT if kind == _T else ColumnKind.BINARY, data[pos:end]))
            pos = end
        elif kind == _N:
            out.append(_NULL_VALUE)
        elif kind == _U:
            out.append(_UNCHANGED_VALUE)
        else:
            raise _NotPlain
    return tuple(out), pos


def _fast_change(data: bytes) -> PgOutputMessage:
    """Insert, Update and Delete (nearly every message of a busy stream) read with ``struct``: the same fields as
    their layouts, for well-formed messages only; anything else raises _NotPlain."""
    tag = data[0]
    (relation_id,) = _INT32.unpack_from(data, 1)
    if tag == ord("I"):
        if data[5] != _NEW:
            raise _NotPlain
        new, end = _fast_tuple(data, 6)
        message: PgOutputMessage = Insert(relation_id, new)
    elif tag == ord("U"):
        old_kind, old, pos = None, None, 5
        if data[5] in (_K, _O):
            old_kind = chr(data[5])
            old, pos = _fast_tuple(data, 6)
        if data[pos] != _NEW:
            raise _NotPlain
        new, end = _fast_tuple(data, pos + 1)
        message = Update(relation_id, old_kind, old, new)
    else:
        if data[5] not in (_K, _O):
            raise _NotPlain
        old, end = _fast_tuple(data, 6)
        message = Delete(relation_id, chr(data[5]), old)
    if end != len(data):
        raise _NotPlain
    return message


def split_insert(data: bytes, width: int) -> list[bytes | None] | None:
    """The values of an Insert message whose tuple is ``width`` text values and NULLs (None: NULL), as
    :func:`decode_pgoutput` reads them; None for any other message (decode it to learn what it is)."""
    if len(data) < 8 or data[0] != _INSERT or data[5] != _NEW or int.from_bytes(data[6:8], "big") != width:
        return None
    values: list[bytes | None] = []
    pos, size = 8, len(data)
    try:
        for _ in range(width):
            kind = data[pos]
            if kind == _T:
                (length,) = _LENGTH.unpack_from(data, pos + 1)
                start = pos + 5
                pos = start + length
                if length < 0 or pos > size:
                    return None
                values.append(data[start:pos])
            elif kind == _N:
                values.append(None)
                pos += 1
            else:
                return None
    except (IndexError, struct.error):
        return None
    return values if pos == size else None


def decode_pgoutput(data: bytes) -> PgOutputMessage:
    """One pgoutput protocol-version-1 message."""
    if data[:1] in (b"I", b"U", b"D"):
        try:
            return _fast_change(bytes(data))
        except (_NotPlain, struct.error, IndexError):
            pass  # decoded below, by the layouts, which name what is wrong
    elif data[:1] == b"B" and len(data) == 1 + _BEGIN.size:
        return Begin(*_BEGIN.unpack_from(data, 1))
    elif data[:1] == b"C" and len(data) == 1 + _COMMIT.size:
        return Commit(*_COMMIT.unpack_from(data, 1))
    return decode_by_layouts(data)


def decode_by_layouts(data: bytes) -> PgOutputMessage:
    """One pgoutput message decoded by its layout alone (what :func:`decode_pgoutput`'s fast path must agree with)."""
    if not data:
        raise MalformedMessage("pgoutput", "empty")
    try:
        tag = PgOutputTag(data[:1])
    except ValueError:
        raise UnknownMessage("pgoutput", data[0]) from None
    kind = tag.name.lower()
    p = _parse(kind, tag.value, bytes(data))
    if tag is PgOutputTag.BEGIN:
        return Begin(p.final_lsn, p.commit_time, p.xid)
    if tag is PgOutputTag.MESSAGE:
        return LogicalMessage(bool(p.flags & 1), p.lsn, p.prefix, p.content)
    if tag is PgOutputTag.COMMIT:
        return Commit(p.flags, p.commit_lsn, p.end_lsn, p.commit_time)
    if tag is PgOutputTag.ORIGIN:
        return Origin(p.commit_lsn, p.name)
    if tag is PgOutputTag.RELATION:
        identity = chr(p.replica_identity)
        if identity not in "dnfi":
            raise MalformedMessage(kind, f"unknown replica identity {identity!r}")
        return Relation(p.relation_id, p.namespace, p.name, identity, tuple(
            RelationColumn(bool(c.flags & 1), c.name, c.type_oid, c.type_modifier) for c in p.columns))
    if tag is PgOutputTag.TYPE:
        return TypeInfo(p.type_oid, p.namespace, p.name)
    if tag is PgOutputTag.INSERT:
        return Insert(p.relation_id, _tuple(kind, p.new))
    if tag is PgOutputTag.UPDATE:
        old_kind = chr(p.old_tag) if p.old is not None else None
        return Update(p.relation_id, old_kind, None if p.old is None else _tuple(kind, p.old.tuple), _tuple(kind, p.new))
    if tag is PgOutputTag.DELETE:
        old_kind = p.old_tag.decode("latin-1")
        if old_kind not in ("K", "O"):
            raise MalformedMessage(kind, f"old tuple tag {old_kind!r} is neither K nor O")
        return Delete(p.relation_id, old_kind, _tuple(kind, p.old))
    if p.count < 0:
        raise MalformedMessage(kind, "negative relation count")
    return Truncate(bool(p.options & 1), bool(p.options & 2), tuple(p.relation_ids))


def decode_replication(data: bytes) -> ReplicationMessage:
    """One CopyData payload of a replication connection (either direction)."""
    if data[:1] == b"w" and len(data) >= 1 + _XLOG_HEADER.size:
        wal_start, wal_end, send_time = _XLOG_HEADER.unpack_from(data, 1)
        return XLogData(wal_start, wal_end, send_time, bytes(data[1 + _XLOG_HEADER.size:]))
    if not data:
        raise MalformedMessage("replication", "empty")
    try:
        tag = ReplicationTag(data[:1])
    except ValueError:
        raise UnknownMessage("replication", data[0]) from None
    p = _parse(tag.name.lower(), tag.value, bytes(data))
    if tag is ReplicationTag.XLOG_DATA:
        return XLogData(p.wal_start, p.wal_end, p.send_time, p.data)
    if tag is ReplicationTag.PRIMARY_KEEPALIVE:
        return PrimaryKeepalive(p.wal_end, p.send_time, bool(p.reply_requested))
    return StandbyStatusUpdate(p.written_lsn, p.flushed_lsn, p.applied_lsn, p.client_time, bool(p.reply_requested))


def format_lsn(lsn: int) -> str:
    """Postgres's text form of an LSN: ``X/Y``, high and low 32 bits in upper-case hex."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """The inverse of :func:`format_lsn`; ValueError for anything else."""
    high, sep, low = text.strip().partition("/")
    if not sep or not high or not low or len(high) > 8 or len(low) > 8:
        raise ValueError(f"not an LSN: {text!r}")
    return (int(high, 16) << 32) | int(low, 16)
