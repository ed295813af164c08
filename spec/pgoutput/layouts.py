"""pgoutput (protocol version 1) and the replication stream's own messages as construct layouts.

Two layers travel inside a replication connection's CopyData messages:

- the streaming replication protocol: the server sends XLogData (``w``) around each piece of
  output and primary keepalives (``k``); the client sends standby status updates (``r``);
- pgoutput's logical replication messages inside each XLogData.

All integers are big-endian and signed as Postgres declares them (``Int32``, ``Int64``); LSNs
and timestamps are ``Int64`` on the wire (timestamps in microseconds since 2000-01-01 UTC).
A ``String`` is NUL-terminated UTF-8. Everything else in this package is derived from these
layouts: the decoder, the generated spec (docs/spec/pgoutput.md) and the vectors.
"""

from __future__ import annotations

from enum import Enum

from construct import (
    Array,
    Bytes,
    Const,
    CString,
    GreedyBytes,
    If,
    Int8ub,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    Int64ub,
    Peek,
    Struct,
    this,
)

LSN = Int64ub
"""An XLogRecPtr: an unsigned 64-bit WAL position (printed as ``X/Y``, the high and low 32 bits in hex)."""

TIMESTAMP = Int64sb
"""A TimestampTz: microseconds since 2000-01-01 00:00:00 UTC."""

STRING = CString("utf8")


class PgOutputTag(bytes, Enum):
    """The first byte of each pgoutput message."""

    BEGIN = b"B"
    MESSAGE = b"M"
    COMMIT = b"C"
    ORIGIN = b"O"
    RELATION = b"R"
    TYPE = b"Y"
    INSERT = b"I"
    UPDATE = b"U"
    DELETE = b"D"
    TRUNCATE = b"T"


class ReplicationTag(bytes, Enum):
    """The first byte of each replication-stream message inside CopyData."""

    XLOG_DATA = b"w"
    PRIMARY_KEEPALIVE = b"k"
    STANDBY_STATUS_UPDATE = b"r"


class ColumnKind(bytes, Enum):
    """How one column of a TupleData travels."""

    NULL = b"n"
    UNCHANGED_TOAST = b"u"
    TEXT = b"t"
    BINARY = b"b"


VALUE_KINDS = (ColumnKind.TEXT.value[0], ColumnKind.BINARY.value[0])

TUPLE_COLUMN = Struct(
    "kind" / Int8ub * "n: NULL, u: unchanged TOAST value (not sent), t: text format, b: binary format",
    "length" / If(lambda ctx: ctx.kind in VALUE_KINDS, Int32sb) * "only for t and b: length of the value",
    "value" / If(lambda ctx: ctx.kind in VALUE_KINDS, Bytes(this.length)) * "only for t and b: the value",
)

TUPLE_DATA = Struct(
    "count" / Int16sb * "number of columns",
    "columns" / Array(this.count, TUPLE_COLUMN) * "one part per column, in the relation's column order",
)

BEGIN = Struct(
    "final_lsn" / LSN * "LSN of the transaction's commit record",
    "commit_time" / TIMESTAMP * "commit timestamp",
    "xid" / Int32ub * "transaction id",
)

LOGICAL_MESSAGE = Struct(
    "flags" / Int8ub * "1: transactional (pg_logical_emit_message), 0: not",
    "lsn" / LSN * "LSN of the message",
    "prefix" / STRING * "the message's prefix",
    "length" / Int32sb * "length of the content",
    "content" / Bytes(this.length) * "the content",
)

COMMIT = Struct(
    "flags" / Int8ub * "unused, 0",
    "commit_lsn" / LSN * "LSN of the commit record (the Begin's final_lsn)",
    "end_lsn" / LSN * "end of the commit record",
    "commit_time" / TIMESTAMP * "commit timestamp",
)

ORIGIN = Struct(
    "commit_lsn" / LSN * "LSN of the commit on the origin server",
    "name" / STRING * "replication origin name",
)

RELATION_COLUMN = Struct(
    "flags" / Int8ub * "1: part of the replica identity key, 0: not",
    "name" / STRING * "column name",
    "type_oid" / Int32ub * "data type OID",
    "type_modifier" / Int32sb * "atttypmod (-1: none)",
)

RELATION = Struct(
    "relation_id" / Int32ub * "relation OID, named by later changes",
    "namespace" / STRING * "schema (empty for pg_catalog)",
    "name" / STRING * "table name",
    "replica_identity" / Int8ub * "relreplident: d default (primary key), n nothing, f full, i index",
    "count" / Int16sb * "number of columns (generated columns are left out)",
    "columns" / Array(this.count, RELATION_COLUMN),
)

TYPE = Struct(
    "type_oid" / Int32ub * "data type OID",
    "namespace" / STRING * "schema (empty for pg_catalog)",
    "name" / STRING * "type name",
)

INSERT = Struct(
    "relation_id" / Int32ub * "relation OID",
    "new_tag" / Const(b"N") * "N: a new tuple follows",
    "new" / TUPLE_DATA,
)

_OLD_TAGS = (ord("K"), ord("O"))

UPDATE = Struct(
    "relation_id" / Int32ub * "relation OID",
    "old_tag" / Peek(Int8ub) * "K: old key follows (the key changed), O: old tuple follows (REPLICA IDENTITY FULL); else N",
    "old" / If(lambda ctx: ctx.old_tag in _OLD_TAGS, Struct(Bytes(1), "tuple" / TUPLE_DATA)) * "present for K and O",
    "new_tag" / Const(b"N") * "N: the new tuple follows",
    "new" / TUPLE_DATA,
)

DELETE = Struct(
    "relation_id" / Int32ub * "relation OID",
    "old_tag" / Bytes(1) * "K: old key follows, O: old tuple follows (REPLICA IDENTITY FULL)",
    "old" / TUPLE_DATA,
)

TRUNCATE = Struct(
    "count" / Int32sb * "number of relations",
    "options" / Int8ub * "bit 1: CASCADE, bit 2: RESTART IDENTITY",
    "relation_ids" / Array(this.count, Int32ub) * "relation OIDs",
)

PGOUTPUT_BODIES = {
    PgOutputTag.BEGIN: BEGIN,
    PgOutputTag.MESSAGE: LOGICAL_MESSAGE,
    PgOutputTag.COMMIT: COMMIT,
    PgOutputTag.ORIGIN: ORIGIN,
    PgOutputTag.RELATION: RELATION,
    PgOutputTag.TYPE: TYPE,
    PgOutputTag.INSERT: INSERT,
    PgOutputTag.UPDATE: UPDATE,
    PgOutputTag.DELETE: DELETE,
    PgOutputTag.TRUNCATE: TRUNCATE,
}
"""The body after the tag byte, per pgoutput message."""

XLOG_DATA = Struct(
    "wal_start" / LSN * "WAL position of the start of the data (0 inside a transaction's messages)",
    "wal_end" / LSN * "current end of WAL on the server",
    "send_time" / TIMESTAMP * "server clock at transmission",
    "data" / GreedyBytes * "one pgoutput message",
)

PRIMARY_KEEPALIVE = Struct(
    "wal_end" / LSN * "current end of WAL on the server",
    "send_time" / TIMESTAMP * "server clock at transmission",
    "reply_requested" / Int8ub * "1: answer with a standby status update at once (or be disconnected)",
)

STANDBY_STATUS_UPDATE = Struct(
    "written_lsn" / LSN * "last WAL byte + 1 received and written",
    "flushed_lsn" / LSN * "last WAL byte + 1 flushed: a logical slot's confirmed_flush_lsn moves here",
    "applied_lsn" / LSN * "last WAL byte + 1 applied",
    "client_time" / TIMESTAMP * "client clock at transmission",
    "reply_requested" / Int8ub * "1: the server should answer with a keepalive at once",
)

REPLICATION_BODIES = {
    ReplicationTag.XLOG_DATA: XLOG_DATA,
    ReplicationTag.PRIMARY_KEEPALIVE: PRIMARY_KEEPALIVE,
    ReplicationTag.STANDBY_STATUS_UPDATE: STANDBY_STATUS_UPDATE,
}
"""The body after the tag byte, per replication-stream message."""
