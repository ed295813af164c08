"""Typed errors of the streaming shuffle, named after Spark 4.3.0's error conditions.

Every error carries its condition name and the parameters Spark reports with it, so a test (or a
peer in another language) can compare failures exactly rather than by message text. Codec errors
(bad bytes) and behaviour errors (a well-formed message at the wrong time) share one base, itself a
:class:`spec.errors.ProtocolError` like the errors of the other two protocols.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from spec.errors import ProtocolError


class ShuffleError(ProtocolError):
    """Base of every streaming-shuffle error: a condition name plus named parameters."""

    condition: ClassVar[str] = "STREAMING_SHUFFLE_ERROR"


class CodecError(ShuffleError):
    """The bytes do not form a message; raised by the layouts, never by the machines."""


class UnexpectedMessageType(CodecError):
    """A body type id other than 1..4 (Spark: IllegalArgumentException "Unknown message type: N")."""

    condition = "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE"

    def __init__(self, message_type: int) -> None:
        super().__init__(f"Unknown message type: {message_type}", messageType=message_type)
        self.message_type = message_type


class TruncatedInput(CodecError):
    """The input ends inside a header or fixed fields (Spark: Netty IndexOutOfBoundsException)."""

    condition = "TRUNCATED_INPUT"

    def __init__(self, what: str, needed: int, available: int) -> None:
        super().__init__(
            f"{what} needs {needed} bytes but only {available} are present",
            what=what, needed=needed, available=available,
        )


class TrailingBytes(CodecError):
    """Bytes left after a fixed-size body or after a whole frame (Spark ignores the former)."""

    condition = "TRAILING_BYTES"

    def __init__(self, what: str, trailing: int) -> None:
        super().__init__(f"{trailing} bytes left after the {what}", what=what, trailing=trailing)


class NegativeDataSize(CodecError):
    """A DATA body declares a negative data_size."""

    condition = "NEGATIVE_DATA_SIZE"

    def __init__(self, data_size: int, available: int) -> None:
        super().__init__(
            f"Invalid DataMessage dataSize={data_size}, readable bytes after header={available}",
            dataSize=data_size, available=available,
        )


class DataSizeMismatch(CodecError):
    """A DATA data_size differs from the bytes after the 32-byte fixed part (Spark: same message as a negative size)."""

    condition = "DATA_SIZE_MISMATCH"

    def __init__(self, data_size: int, available: int) -> None:
        super().__init__(
            f"Invalid DataMessage dataSize={data_size}, readable bytes after header={available}",
            dataSize=data_size, available=available,
        )


class FrameLengthOutOfRange(CodecError):
    """frame_length below 13 or above the decoder's maximum, checked before anything is allocated."""

    condition = "FRAME_LENGTH_OUT_OF_RANGE"

    def __init__(self, frame_length: int, minimum: int, maximum: int) -> None:
        super().__init__(
            f"frame length {frame_length} is outside [{minimum}, {maximum}]",
            frameLength=frame_length, minimum=minimum, maximum=maximum,
        )


class UnsupportedTransportMessage(CodecError):
    """The transport type byte is not OneWayMessage (9), the only type shuffle peers send."""

    condition = "UNSUPPORTED_TRANSPORT_MESSAGE_TYPE"

    def __init__(self, message_type: int, expected: int) -> None:
        super().__init__(
            f"transport message type {message_type} is not OneWayMessage ({expected})",
            messageType=message_type, expected=expected,
        )


class BehaviourError(ShuffleError):
    """A well-formed message arrived where the protocol does not allow it, or a peer broke a rule in time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """What a machine knows when one of its channels fails.

    The channel table decides which :class:`ChannelError` a (state, event) pair ends in; that
    error takes its parameters from here, so a machine never names the error itself. The fields
    after ``sent`` are filled by the input that observed them (a seq, a checksum, a cause).
    """

    shuffle_id: int
    writer_id: int
    reader_id: int
    peer_role: str
    """The other side: "reader" on a writer, "writer" on a reader."""
    handler: str
    """Spark's handler class of this side (it names unexpected messages)."""
    sent: str
    """What this side writes and waits on the completion of ("data", "termination acknowledgment")."""
    timeout_ms: int = -1
    message_type: str = ""
    expected: int = -1
    actual: int = -1
    checksum: int = 0
    calculated: int = 0
    data_length: int = 0
    cause: str = ""
    named_writer_id: int = -1
    named_reader_id: int = -1
    """The ids a message named, when they are not the channel's."""

    @property
    def peer_id(self) -> int:
        return self.reader_id if self.peer_role == "reader" else self.writer_id


class ChannelError(BehaviourError):
    """An error a channel table names for a (state, event) pair; built from the machine's :class:`Fault`."""

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        raise NotImplementedError(f"{cls.__name__} is not named by a channel table")


class IncorrectSequenceNumber(ChannelError):
    """A DATA or TERMINATION_CONTROL seq is not last+1, or an ack's seq is not the last seq sent."""

    condition = "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER"

    def __init__(
        self, message_type: str, writer_id: int, reader_id: int, expected: int, actual: int
    ) -> None:
        super().__init__(
            f"Streaming shuffle {message_type} between writer {writer_id} and reader {reader_id} "
            f"expected to have sequence number {expected}, but the actual sequence number is "
            f"{actual}. Please verify that the messages are sent in order.",
            messageType=message_type, writerId=writer_id, readerId=reader_id,
            expSeqNum=expected, actSeqNum=actual,
        )
        self.expected = expected
        self.actual = actual

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.message_type, fault.writer_id, fault.reader_id, fault.expected, fault.actual)


class ChecksumVerificationFailed(ChannelError):
    """A DATA payload's CRC32C differs from its checksum field (checked when checksums are enabled)."""

    condition = "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"

    def __init__(self, writer_id: int, expected: int, calculated: int, data_length: int) -> None:
        super().__init__(
            f"Checksum verification failed for buffer from writer {writer_id}. Expected: "
            f"{expected}, Calculated: {calculated}, Data length: {data_length}.",
            writerId=writer_id, expectedChecksum=expected,
            calculatedChecksum=calculated, dataLength=data_length,
        )

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.writer_id, fault.checksum, fault.calculated, fault.data_length)


class WriterWaitTimeout(ChannelError):
    """A writer waited longer than its timeout for a reader to do ``waiting_for``."""

    waiting_for: ClassVar[str]

    def __init__(self, shuffle_id: int, writer_id: int, timeout_ms: int, reader_id: int) -> None:
        super().__init__(
            f"Streaming shuffle {shuffle_id} writer {writer_id} timed out after {timeout_ms} ms "
            f"waiting for reader {reader_id} to {self.waiting_for}.",
            shuffleId=shuffle_id, writerId=writer_id, timeoutMs=timeout_ms, readerId=reader_id,
        )

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.shuffle_id, fault.writer_id, fault.timeout_ms, fault.reader_id)


class WriterConnectionTimeout(WriterWaitTimeout):
    """A reader did not bind its channel (first CREDIT) within writerConnectionTimeout."""

    condition = "STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT"
    waiting_for = "connect"


class UnexpectedMessage(ChannelError):
    """A known message type arrived at the side that never receives it (Spark's handlers' IAE)."""

    condition = "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE"

    def __init__(self, handler: str, message_type: str) -> None:
        super().__init__(
            f"Unexpected message type in {handler}: {message_type}",
            handler=handler, messageType=message_type,
        )

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.handler, fault.message_type)


class ConnectionClosedBeforeTermination(ChannelError):
    """A peer's connection closed before its stream was terminated (SparkException, no condition)."""

    condition = "CONNECTION_CLOSED_BEFORE_TERMINATION"

    def __init__(self, role: str, peer_id: int) -> None:
        text = (
            f"Connection to streaming shuffle writer {peer_id} closed before termination; the writer "
            "task likely failed."
            if role == "writer"
            else f"Connection from streaming shuffle reader {peer_id} closed before termination; the "
            "reader task likely failed."
        )
        super().__init__(text, role=role, peerId=peer_id)

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.peer_role, fault.peer_id)


class ReaderAlreadyBound(ChannelError):
    """SHOULD (Spark 4.3.0 keeps the first binding, ignores the rest): CREDIT or ack for a reader bound to another connection."""

    condition = "READER_ALREADY_BOUND"

    def __init__(self, writer_id: int, reader_id: int) -> None:
        super().__init__(
            f"Streaming shuffle writer {writer_id}: reader {reader_id} is already bound to another connection.",
            writerId=writer_id, readerId=reader_id,
        )

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.writer_id, fault.reader_id)


class MismatchedChannelIds(ChannelError):
    """SHOULD (Spark 4.3.0 never compares them): a message names another reader than its connection's, or
    another writer id than the one Spark keeps on it (the handshake CREDIT the directory id, every other
    message the partition id the connection's first DATA or TERMINATION_CONTROL named)."""

    condition = "MISMATCHED_CHANNEL_IDS"

    def __init__(self, message_type: str, writer_id: int, reader_id: int, expected_writer_id: int,
                 expected_reader_id: int) -> None:
        super().__init__(
            f"{message_type} names writer {writer_id} and reader {reader_id} on the connection between "
            f"writer {expected_writer_id} and reader {expected_reader_id}.",
            messageType=message_type, writerId=writer_id, readerId=reader_id,
            expectedWriterId=expected_writer_id, expectedReaderId=expected_reader_id,
        )

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.message_type, fault.named_writer_id, fault.named_reader_id, fault.writer_id,
                   fault.reader_id)


class UnknownPeer(BehaviourError):
    """A message names a reader or writer id outside the shuffle (Spark: index out of bounds)."""

    condition = "UNKNOWN_PEER_ID"

    def __init__(self, role: str, peer_id: int, count: int) -> None:
        super().__init__(
            f"Index {peer_id} out of bounds for length {count} ({role} id)",
            role=role, peerId=peer_id, count=count,
        )


class TaskAborted(BehaviourError):
    """The local task ended without finishing its stream (killed, or its input failed)."""

    condition = "TASK_ABORTED"

    def __init__(self, reason: str) -> None:
        super().__init__(reason, reason=reason)


class TerminationAckTimeout(WriterWaitTimeout):
    """Opt-in (not in Spark 4.3.0, which waits forever): a reader did not acknowledge termination in time."""

    condition = "STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT"
    waiting_for = "acknowledge termination"


class WriterUnreachable(ChannelError):
    """Every attempt to connect to a registered writer failed (refused, timed out, cut in the handshake)
    for longer than the reader's connect timeout (an addition: Spark 4.3.0's reader has no such bound)."""

    condition = "STREAMING_SHUFFLE_WRITER_UNREACHABLE"

    def __init__(self, shuffle_id: int, writer_id: int, reader_id: int, timeout_ms: int, cause: str) -> None:
        super().__init__(
            f"writer {writer_id} of shuffle {shuffle_id} could not be reached by reader {reader_id} "
            f"for {timeout_ms} ms: {cause}",
            shuffleId=shuffle_id, writerId=writer_id, readerId=reader_id, timeoutMs=timeout_ms, cause=cause)
        self.writer_id = writer_id

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.shuffle_id, fault.writer_id, fault.reader_id, fault.timeout_ms, fault.cause)


class SendFailed(ChannelError):
    """A socket write the protocol depends on failed (Spark: the write listener's error)."""

    condition = "STREAMING_SHUFFLE_SEND_FAILED"

    def __init__(self, what: str, role: str, peer_id: int, cause: str) -> None:
        super().__init__(f"Error sending {what} to shuffle {role} {peer_id}: {cause}",
                         what=what, role=role, peerId=peer_id, cause=cause)

    @classmethod
    def from_fault(cls, fault: Fault) -> Self:
        return cls(fault.sent, fault.peer_role, fault.peer_id, fault.cause)
