"""Framing of serialized records inside one DATA payload.

Spark's writer streams rows through its serializer into the reader's buffer, which for
``UnsafeRow`` writes each row as a big-endian ``int32`` length followed by the row bytes; a buffer
is sent whole, so one DATA carries many records and a record is never split across messages.
"""

from __future__ import annotations

import struct
from typing import Final, Iterable

from spec.shuffle import errors
from spec.shuffle.messages import DataPayload, Gathered, Payload

RECORD_LENGTH: Final = struct.Struct(">i")
"""The length prefix of every record."""


def encode_record(record: Payload) -> bytes:
    """One record as it appears in a payload."""
    return RECORD_LENGTH.pack(len(record)) + bytes(record)


def encode_records(records: Iterable[Payload]) -> bytes:
    """A payload holding ``records`` in order."""
    return b"".join(encode_record(r) for r in records)


def decode_records(payload: DataPayload) -> tuple[bytes, ...]:
    """Split a payload into its records; a length running past the end is truncated input."""
    view = memoryview(bytes(payload) if isinstance(payload, Gathered) else payload)
    out: list[bytes] = []
    offset = 0
    while offset < len(view):
        if len(view) - offset < RECORD_LENGTH.size:
            raise errors.TruncatedInput("record length", RECORD_LENGTH.size, len(view) - offset)
        (length,) = RECORD_LENGTH.unpack_from(view, offset)
        offset += RECORD_LENGTH.size
        if length < 0 or length > len(view) - offset:
            raise errors.TruncatedInput("record", length, len(view) - offset)
        out.append(bytes(view[offset : offset + length]))
        offset += length
    return tuple(out)
