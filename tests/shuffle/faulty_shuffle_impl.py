"""A deliberately broken ``exec:`` shuffle implementation, to prove the suite catches deviations.

It is the reference endpoint with one fault injected through the runtime's fault hook: every
sequence number it sends is one too high (a writer numbers DATA from 1; a reader's
TERMINATION_ACK echoes seq + 1).
"""

from __future__ import annotations

import dataclasses
import sys

from conformance.shuffle import reference_target
from spec.shuffle.messages import CreditMessage, Message


def off_by_one(message: Message) -> Message:
    return message if isinstance(message, CreditMessage) else dataclasses.replace(message, seq=message.seq + 1)


if __name__ == "__main__":
    sys.exit(reference_target.main(fault=off_by_one))
