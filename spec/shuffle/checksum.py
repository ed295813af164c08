"""CRC32C (Castagnoli) of DATA payloads, as Spark's ``ShuffleChecksum`` computes it."""

from __future__ import annotations

import crc32c as _crc32c

from spec.shuffle.errors import ChecksumVerificationFailed
from spec.shuffle.messages import DataMessage, DataPayload, Gathered


def payload_checksum(payload: DataPayload) -> int:
    """CRC32C of the payload only (never the header), as the unsigned low 32 bits of the int64 field;
    a gathered payload's runs over its buffers in turn (no join)."""
    if isinstance(payload, Gathered):
        crc = 0
        for part in payload.parts:
            crc = _crc32c.crc32c(part, crc)
        return int(crc)
    return int(_crc32c.crc32c(payload))


def verify_payload(message: DataMessage) -> None:
    """Raise Spark's STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED when the payload's CRC32C
    differs from the message's ``checksum`` (the reader calls this only when checksums are on)."""
    calculated = payload_checksum(message.payload)
    if calculated != message.checksum:
        raise ChecksumVerificationFailed(message.writer_id, message.checksum, calculated, message.data_size)
