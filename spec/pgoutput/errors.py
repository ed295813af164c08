"""Typed errors of the pgoutput stream: bytes that are not a message, and messages that break
the stream's rules (a change outside a transaction, a relation never described, an unchanged
TOAST value nothing can supply, a column type the source does not map).

Each names the message and what was wrong in one line, so the source can stop with it as is.
"""

from __future__ import annotations

from typing import ClassVar

from spec.errors import ProtocolError


class PgOutputError(ProtocolError):
    """Base of every error of the pgoutput decoder and transaction assembler."""

    condition: ClassVar[str] = "PGOUTPUT_ERROR"


class MalformedMessage(PgOutputError):
    """The bytes do not parse as the message their tag names (truncated, trailing bytes, bad part tag)."""

    condition = "PGOUTPUT_MALFORMED"

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"malformed {kind} message: {reason}", kind=kind, reason=reason)


class UnknownMessage(PgOutputError):
    """The first byte is no message tag this protocol version defines."""

    condition = "PGOUTPUT_UNKNOWN_MESSAGE"

    def __init__(self, stream: str, tag: int) -> None:
        shown = chr(tag) if 0x20 < tag < 0x7F else f"0x{tag:02x}"
        super().__init__(f"unknown {stream} message tag {shown!r}", stream=stream, tag=tag)


class OutOfOrder(PgOutputError):
    """A message where the transaction structure does not allow it (a change before Begin, a nested Begin,
    a Commit whose LSN is not the one its Begin announced)."""

    condition = "PGOUTPUT_OUT_OF_ORDER"


class UnknownRelation(PgOutputError):
    """A change names a relation id no Relation message described on this stream."""

    condition = "PGOUTPUT_UNKNOWN_RELATION"

    def __init__(self, relation_id: int) -> None:
        super().__init__(f"change for relation id {relation_id}, which no Relation message described",
                         relation_id=relation_id)


class UnresolvedToast(PgOutputError):
    """An unchanged TOAST value that the change needs in full and the stream did not send."""

    condition = "PGOUTPUT_UNRESOLVED_TOAST"

    def __init__(self, table: str, column: str, why: str) -> None:
        super().__init__(f"table {table}: column {column} is an unchanged TOAST value {why}; "
                         f"set REPLICA IDENTITY FULL on {table}", table=table, column=column)


class NoReplicaIdentity(PgOutputError):
    """A relation without key columns: its updates and deletes cannot be applied by key."""

    condition = "PGOUTPUT_NO_REPLICA_IDENTITY"

    def __init__(self, table: str) -> None:
        super().__init__(f"table {table} has no replica identity key (a primary key, or REPLICA IDENTITY "
                         f"USING INDEX, or FULL with a primary key)", table=table)


class UnmappedType(PgOutputError):
    """A column whose Postgres type has no faithful Arrow type here, or a value that type cannot hold."""

    condition = "PGOUTPUT_UNMAPPED_TYPE"

    def __init__(self, table: str, column: str, reason: str) -> None:
        super().__init__(f"table {table}: column {column}: {reason}", table=table, column=column, reason=reason)


class UnappliableSchemaChange(PgOutputError):
    """An ALTER TABLE the Delta table cannot follow: a column's type now maps to another Arrow type,
    or the replica identity key changed (the sync server would refuse every later put of the table)."""

    condition = "PGOUTPUT_UNAPPLIABLE_SCHEMA_CHANGE"

    def __init__(self, table: str, change: str) -> None:
        super().__init__(f"table {table}: {change}, which its Delta table cannot follow; start the table over: stop, "
                         f"drop the slot and the Delta table's directory, and run again with --create-slot "
                         f"(the initial snapshot copies the tables as they are)", table=table, change=change)
