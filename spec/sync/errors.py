"""Typed sync-protocol errors carrying Seafowl's exact message texts.

``status`` names the gRPC status a Flight server answers with (Seafowl maps
schema errors, undecodable commands and invalid messages to INVALID_ARGUMENT).
The errors after ``UnsupportedFormat`` are this project's additions (confinement,
sequence numbers, table schemas, limits); their texts name only what the client sent.
"""

from __future__ import annotations

import re
from typing import ClassVar

from spec.errors import ProtocolError


class SyncError(ProtocolError):
    """Base of every sync-protocol error; ``message`` is the exact text put on the wire, and so is ``str()``."""

    condition: ClassVar[str] = "SYNC_ERROR"
    status: ClassVar[str] = "INTERNAL"

    @classmethod
    def text(cls, message: str) -> str:
        return message


class CommandDecodeError(SyncError):
    """The FlightDescriptor command is not a decodable ``DataSyncCommand``."""

    condition = "COMMAND_DECODE_ERROR"
    status = "INVALID_ARGUMENT"


class SyncSchemaError(SyncError):
    """Column descriptors do not describe the batch (Seafowl's ``SyncError::SchemaError``)."""

    condition = "SCHEMA_ERROR"
    status = "INVALID_ARGUMENT"

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid sync schema: {reason}", reason=reason)
        self.reason = reason


class SyncInvalidMessage(SyncError):
    """A put breaks the transaction rules (Seafowl's ``SyncError::InvalidMessage``).

    Seafowl puts only ``reason`` into the gRPC status, so ``message`` is the reason.
    """

    condition = "INVALID_MESSAGE"
    status = "INVALID_ARGUMENT"

    def __init__(self, reason: str, **parameters: object) -> None:
        super().__init__(reason, **parameters)
        self.reason = reason


class InterleavedTransaction(SyncInvalidMessage):
    """A put from another origin arrived while a transaction was still open."""

    condition = "INTERLEAVED_TRANSACTION"

    def __init__(self, origin: str, open_origin: str) -> None:
        super().__init__(
            f"Transaction from a new origin ({origin}) started without finishing "
            f"the transaction from the previous one ({open_origin})",
            origin=origin, openOrigin=open_origin,
        )


class EmptyTransaction(SyncInvalidMessage):
    """A transaction opened by a put with no rows but a sequence number."""

    condition = "EMPTY_TRANSACTION"

    def __init__(self, origin: str, sequence: int) -> None:
        super().__init__(f"Received empty transaction for origin {origin} with sequence number {sequence}",
                         origin=origin, sequence=sequence)


class UnsupportedFormat(SyncError):
    """The command asks for a table format this server does not write (Iceberg)."""

    condition = "NOT_IMPLEMENTED"
    status = "INTERNAL"

    def __init__(self) -> None:
        super().__init__("Not implemented")


class InvalidTablePath(SyncError):
    """A table path that is not a relative name inside the store root."""

    condition = "INVALID_TABLE_PATH"
    status = "INVALID_ARGUMENT"

    SHOWN_CHARACTERS: ClassVar[int] = 100

    def __init__(self, path: str, reason: str) -> None:
        shown = repr(path[:self.SHOWN_CHARACTERS]) + ("..." if len(path) > self.SHOWN_CHARACTERS else "")
        super().__init__(f"Invalid table path {shown}: {reason}", path=path, reason=reason)


class StoreLocationRefused(SyncError):
    """A command names its own ``StorageLocation`` and no allowed location covers it."""

    condition = "STORE_LOCATION_REFUSED"
    status = "PERMISSION_DENIED"

    def __init__(self, location: str) -> None:
        super().__init__(f"Storage location {location!r} is not allowed on this server", location=location)


class SequenceNotIncreasing(SyncInvalidMessage):
    """A transaction closes with a number at or below the origin's memory number and above its durable one."""

    condition = "SEQUENCE_NOT_INCREASING"

    def __init__(self, origin: str, sequence: int, memory: int, durable: int | None) -> None:
        super().__init__(
            f"Sequence number {sequence} for origin {origin} does not follow the last received "
            f"transaction ({memory}) and is not a replay of a durable one (durable: {durable})",
            origin=origin, sequence=sequence, memory=memory, durable=durable,
        )
        self.origin, self.sequence, self.memory, self.durable = origin, sequence, memory, durable


class PartlyNullKey(SyncInvalidMessage):
    """A row whose old or new key has some key columns null and others not."""

    condition = "PARTLY_NULL_KEY"

    def __init__(self, row: int, role: str) -> None:
        super().__init__(f"Row {row} has a partly null {role} key: a key is either all null or has no null column",
                         row=row, role=role)


class TableSchemaMismatch(SyncError):
    """A put whose columns cannot be applied to the table it names (stored or pending)."""

    condition = "TABLE_SCHEMA_MISMATCH"
    status = "INVALID_ARGUMENT"

    def __init__(self, table: str, problems: list[str]) -> None:
        super().__init__(f"Put does not match table {table}: {'; '.join(problems)}", table=table, problems=problems)
        self.table, self.problems = table, problems


class PutTooLarge(SyncError):
    """A message above the message-size limit, or a put larger than the memory high-watermark itself."""

    condition = "PUT_TOO_LARGE"
    status = "RESOURCE_EXHAUSTED"

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} of {size} bytes exceeds the server's limit of {limit} bytes",
                         what=what, size=size, limit=limit)


class ServerDraining(SyncError):
    """The server is shutting down: it flushes what it holds and takes no more puts."""

    condition = "SERVER_DRAINING"
    status = "UNAVAILABLE"

    def __init__(self) -> None:
        super().__init__("The sync server is shutting down; retry against its successor")


class InterruptedPut(SyncError):
    """The client's stream broke before it finished: the put is dropped whole."""

    condition = "INTERRUPTED_PUT"
    status = "CANCELLED"

    def __init__(self) -> None:
        super().__init__("The put's stream was cancelled before it completed; nothing of it was kept")


class FlightDataError(SyncError):
    """A ``FlightData`` stream that is not a Flight put: undecodable message, no schema before a batch."""

    condition = "FLIGHT_DATA_ERROR"
    status = "INVALID_ARGUMENT"

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid Flight put: {reason}", reason=reason)


class UnstorableSchema(SyncError):
    """A put whose columns or values no table can store (duplicate names, nested or null types, overflow)."""

    condition = "UNSTORABLE_SCHEMA"
    status = "INVALID_ARGUMENT"

    def __init__(self, table: str, problem: str) -> None:
        super().__init__(f"Put for table {table} cannot be stored: {problem}", table=table, problem=problem)


class PutSlotsBusy(SyncError):
    """Every put slot is held by a put whose first message arrived: the server is busy, retry later."""

    condition = "PUT_SLOTS_BUSY"
    status = "RESOURCE_EXHAUSTED"

    def __init__(self, slots: int) -> None:
        super().__init__(f"All {slots} put slots are in use (--max-concurrent-puts); retry later", slots=slots)


class StreamDeadlineExceeded(SyncError):
    """A stream ran past one of the server's deadlines; ``setting`` names the flag that sets it."""

    condition = "STREAM_DEADLINE_EXCEEDED"
    status = "DEADLINE_EXCEEDED"

    def __init__(self, what: str, setting: str, seconds: float) -> None:
        super().__init__(f"{what} within {setting} ({seconds:g} s); nothing of the put was kept",
                         setting=setting, seconds=seconds)
        self.setting = setting


class BearerTokenRequired(SyncError):
    """A put without the server's bearer token: refused before anything of its stream is read or held."""

    condition = "BEARER_TOKEN_REQUIRED"
    status = "UNAUTHENTICATED"

    def __init__(self) -> None:
        super().__init__("A valid bearer token is required")


class TransactionDiscarded(SyncError):
    """The origin's open transaction received no put for the transaction timeout and was dropped."""

    condition = "TRANSACTION_DISCARDED"
    status = "ABORTED"

    def __init__(self, origin: str, timeout_s: float) -> None:
        super().__init__(
            f"The open transaction of origin {origin} received no put for {timeout_s} s and was discarded; "
            "replay from the last durable sequence number",
            origin=origin, timeoutS=timeout_s,
        )
        self.origin = origin


class ServerRestarted(SyncError):
    """A put named a server life other than this server's (the server-life extension): the client last heard
    from a server that has since stopped, so what that server held in memory may be lost. Nothing of the put is
    recorded; the client connects again, and its probe shows the restart."""

    condition = "SERVER_RESTARTED"
    status = "FAILED_PRECONDITION"

    def __init__(self, origin: str, told: int, life: int) -> None:
        super().__init__(
            f"The put of origin {origin} was sent to server life {told}, but this server's life is {life}: "
            "probe, then replay what is not durable",
            origin=origin, told=told, life=life,
        )


def refusals() -> list[type[SyncError]]:
    """Every sync error the spec defines (the subclasses of ``SyncError`` imported so far, depth first): the table
    of conditions a refusal may carry."""
    out: list[type[SyncError]] = []
    pending = list(reversed(SyncError.__subclasses__()))
    while pending:
        cls = pending.pop()
        out.append(cls)
        pending += reversed(cls.__subclasses__())
    return out


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters as spaces (what a status may carry)."""
    return "".join(" " if ord(ch) < 0x20 or ord(ch) == 0x7F else ch for ch in text)


CONDITION_PATTERN = re.compile(r"\[sync-condition: ([A-Z_]+)\]")
"""How a refusal's condition travels after its text: Flight clients see only a status and one line."""


def wire_text(error: SyncError) -> str:
    """The one line a refusal carries: its text, then its condition in the form ``condition_in`` reads."""
    return f"{one_line(error.message)} [sync-condition: {error.condition}]"


def condition_in(text: str) -> str | None:
    """The condition a refusal's text carries (``wire_text``), if it carries one."""
    found = CONDITION_PATTERN.findall(text)
    return found[-1] if found else None  # the last: what a client sent, quoted earlier in a text, cannot pose as it
