"""Seafowl's data sync over Arrow Flight as data and pure code: commands and responses, the
server's endpoint (admission order, the flush schedule, its deadlines) around the sync-writer
machine (memory and durable sequence numbers), the client's machine (what it sends, skips,
replays and retries), change squashing and the errors.

The names below are the surface a server, a client or a test needs; the modules hold the rest.
"""

from spec.sync.client import Holding, RequestTries, SyncClientMachine
from spec.sync.errors import SyncError
from spec.sync.messages import (
    ColumnDescriptor,
    ColumnRole,
    StorageLocation,
    SyncCommand,
    SyncResponse,
    TableFormat,
    decode_command,
    decode_descriptor_cmd,
    decode_response,
)
from spec.sync.schema import SyncSchema
from spec.sync.server import SyncServerEndpoint
from spec.sync.squash import SquashedChange
from spec.sync.writer import SyncSettings, SyncWriter

__all__ = [
    "ColumnDescriptor",
    "ColumnRole",
    "Holding",
    "RequestTries",
    "SquashedChange",
    "StorageLocation",
    "SyncClientMachine",
    "SyncCommand",
    "SyncError",
    "SyncResponse",
    "SyncSchema",
    "SyncServerEndpoint",
    "SyncSettings",
    "SyncWriter",
    "TableFormat",
    "decode_command",
    "decode_descriptor_cmd",
    "decode_response",
]
