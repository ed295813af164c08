"""A deliberately broken ``exec:`` shuffle implementation, to prove the suite catches deviations.

It is the reference endpoint with one fault: every sequence number it sends is one too high (a
writer numbers DATA from 1; a reader's TERMINATION_ACK echoes seq + 1).
"""

from __future__ import annotations

import dataclasses
import sys

from conformance.targets import reference_shuffle
from spec.shuffle.codec import encode_frame
from spec.shuffle.messages import CreditMessage, Message


def off_by_one(message: Message) -> bytes:
    if isinstance(message, CreditMessage):
        return encode_frame(message)
    return encode_frame(dataclasses.replace(message, seq=message.seq + 1))


if __name__ == "__main__":
    reference_shuffle.encode_frame = off_by_one
    sys.exit(reference_shuffle.main())
