"""Spark 4.3.0's streaming shuffle as data and pure code: messages and their bytes, framing, the
writer and reader machines, their settings and errors.

The names below are the surface a runtime or a peer in tests needs; the modules hold the rest
(layouts, checksum and record framing, transition tables, the generated specification).
"""

from spec.shuffle.codec import decode_body, decode_frame, encode_body, encode_frame
from spec.shuffle.errors import BehaviourError, CodecError, ShuffleError
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import (
    Bound,
    Completed,
    Deliver,
    Event,
    Failed,
    PauseReading,
    ProducerBlocked,
    ProducerUnblocked,
    ResumeReading,
    Send,
    Step,
    UsageError,
)
from spec.shuffle.writer import WriterMachine

__all__ = [
    "BehaviourError",
    "Bound",
    "CodecError",
    "Completed",
    "CreditMessage",
    "DataMessage",
    "Deliver",
    "Event",
    "Failed",
    "FrameDecoder",
    "Message",
    "PauseReading",
    "ProducerBlocked",
    "ProducerUnblocked",
    "ReaderMachine",
    "ResumeReading",
    "Send",
    "ShuffleError",
    "ShuffleSettings",
    "Step",
    "TerminationAckMessage",
    "TerminationControlMessage",
    "UsageError",
    "WriterMachine",
    "decode_body",
    "decode_frame",
    "encode_body",
    "encode_frame",
]
