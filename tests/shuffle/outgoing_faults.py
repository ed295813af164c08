"""Faults injected from tests into the runtime's outgoing messages, without a hook in production code.

The transport encodes every message it writes with ``encode_frame_parts``; a test rewrites each
message before that encoding for as long as the context lasts (every connection of the process).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import Callable, Iterator

from reference.shuffle import transport
from spec.shuffle.messages import CreditMessage, DataMessage, Message, Payload


@contextmanager
def rewriting_outgoing(rewrite: Callable[[Message], Message]) -> Iterator[None]:
    """Every message the runtime writes is ``rewrite(message)`` while the block runs."""
    original = transport.encode_frame_parts

    def encode(message: Message) -> tuple[Payload, ...]:
        return original(rewrite(message))

    transport.encode_frame_parts = encode
    try:
        yield
    finally:
        transport.encode_frame_parts = original


def corrupt_next_data() -> None:
    """In this process only (a PySpark worker, say): corrupt the payload of the next DATA the runtime
    writes, then write as before (a worker reused by a later task is not left broken)."""
    original = transport.encode_frame_parts

    def encode(message: Message) -> tuple[Payload, ...]:
        if isinstance(message, DataMessage) and message.data_size:
            transport.encode_frame_parts = original
            message = corrupt_payload(message)
        return original(message)

    transport.encode_frame_parts = encode


def corrupt_payload(message: Message) -> Message:
    """Flip one payload bit of every DATA *after* its checksum was computed."""
    if isinstance(message, DataMessage) and message.data_size:
        payload = bytearray(bytes(message.payload))
        payload[0] ^= 0x01
        return dataclasses.replace(message, payload=bytes(payload))
    return message


def off_by_one(message: Message) -> Message:
    """Every sequence number one too high (a writer numbers DATA from 1; an ack echoes seq + 1)."""
    return message if isinstance(message, CreditMessage) else dataclasses.replace(message, seq=message.seq + 1)
