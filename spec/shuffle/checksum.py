"""CRC32C (Castagnoli) of DATA payloads, as Spark's ``ShuffleChecksum`` computes it."""

from __future__ import annotations

import crc32c as _crc32c

from spec.shuffle.messages import Payload


def payload_checksum(payload: Payload) -> int:
    """CRC32C of the payload only (never the header), as the unsigned low 32 bits of the int64 field."""
    return int(_crc32c.crc32c(payload))
