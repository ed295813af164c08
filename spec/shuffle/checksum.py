"""CRC32C (Castagnoli) of DATA payloads, as Spark's ``ShuffleChecksum`` computes it."""

from __future__ import annotations

import crc32c as _crc32c

from spec.shuffle.errors import ChecksumVerificationFailed
from spec.shuffle.messages import DataMessage, Payload


def payload_checksum(payload: Payload) -> int:
    """CRC32C of the payload only (never the header), as the unsigned low 32 bits of the int64 field."""
    return int(_crc32c.crc32c(payload))


def verify_payload(message: DataMessage) -> None:
    """Raise Spark's STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED when the payload's CRC32C
    differs from the message's ``checksum`` (the reader calls this only when checksums are on)."""
    calculated = payload_checksum(message.payload)
    if calculated != message.checksum:
        raise ChecksumVerificationFailed(message.writer_id, message.checksum, calculated, message.data_size)
