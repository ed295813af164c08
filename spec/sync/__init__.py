"""Seafowl's data sync over Arrow Flight as data and pure code: commands and responses, the
sync-writer machine (memory and durable sequence numbers), the client's machine (what it sends,
skips and replays), change squashing and the errors.

The names below are the surface a server, a client or a test needs; the modules hold the rest.
"""

from spec.sync.client import Holding, SyncClientMachine
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
from spec.sync.squash import SquashedChange
from spec.sync.writer import SyncSettings, SyncWriter

__all__ = [
    "ColumnDescriptor",
    "ColumnRole",
    "Holding",
    "SquashedChange",
    "StorageLocation",
    "SyncClientMachine",
    "SyncCommand",
    "SyncError",
    "SyncResponse",
    "SyncSchema",
    "SyncSettings",
    "SyncWriter",
    "TableFormat",
    "decode_command",
    "decode_descriptor_cmd",
    "decode_response",
]
