"""Typed sync-protocol errors carrying Seafowl's exact message texts.

``status`` names the gRPC status a Flight server answers with (Seafowl maps
schema errors, undecodable commands and invalid messages to INVALID_ARGUMENT).
"""

from __future__ import annotations


class SyncError(Exception):
    """Base of every sync-protocol error; ``message`` is the exact text put on the wire."""

    condition = "SYNC_ERROR"
    status = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CommandDecodeError(SyncError):
    """The FlightDescriptor command is not a decodable ``DataSyncCommand``."""

    condition = "COMMAND_DECODE_ERROR"
    status = "INVALID_ARGUMENT"


class SyncSchemaError(SyncError):
    """Column descriptors do not describe the batch (Seafowl's ``SyncError::SchemaError``)."""

    condition = "SCHEMA_ERROR"
    status = "INVALID_ARGUMENT"

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid sync schema: {reason}")
        self.reason = reason


class SyncInvalidMessage(SyncError):
    """A put breaks the transaction rules (Seafowl's ``SyncError::InvalidMessage``).

    Seafowl puts only ``reason`` into the gRPC status, so ``message`` is the reason.
    """

    condition = "INVALID_MESSAGE"
    status = "INVALID_ARGUMENT"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InterleavedTransaction(SyncInvalidMessage):
    """A put from another origin arrived while a transaction was still open."""

    condition = "INTERLEAVED_TRANSACTION"

    def __init__(self, origin: str, open_origin: str) -> None:
        super().__init__(
            f"Transaction from a new origin ({origin}) started without finishing "
            f"the transaction from the previous one ({open_origin})"
        )


class EmptyTransaction(SyncInvalidMessage):
    """A transaction opened by a put with no rows but a sequence number."""

    condition = "EMPTY_TRANSACTION"

    def __init__(self, origin: str, sequence: int) -> None:
        super().__init__(f"Received empty transaction for origin {origin} with sequence number {sequence}")


class UnsupportedFormat(SyncError):
    """The command asks for a table format this server does not write (Iceberg)."""

    condition = "NOT_IMPLEMENTED"
    status = "INTERNAL"

    def __init__(self) -> None:
        super().__init__("Not implemented")
