"""Postgres logical replication as data and pure code: the replication stream's messages and
pgoutput protocol version 1 (layouts, decoder, status update), the type mapping, and the machine
that turns the stream into source transactions for the data sync protocol.

The names below are the surface a change source, a test or a vector checker needs.
"""

from spec.pgoutput.changes import Op, RowChange, TableImage
from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.messages import (
    PrimaryKeepalive,
    StandbyStatusUpdate,
    XLogData,
    decode_pgoutput,
    decode_replication,
    format_lsn,
    parse_lsn,
)
from spec.pgoutput.transactions import SourceTransaction, TransactionAssembler

__all__ = [
    "Op",
    "PgOutputError",
    "PrimaryKeepalive",
    "RowChange",
    "SourceTransaction",
    "StandbyStatusUpdate",
    "TableImage",
    "TransactionAssembler",
    "XLogData",
    "decode_pgoutput",
    "decode_replication",
    "format_lsn",
    "parse_lsn",
]
