"""States and transitions of the writer and reader channels, as data.

Each machine classifies an input into one event of its channel (for example an ack whose seq
matches, or one whose seq does not) and looks the pair (state, event) up here. A pair that is
not listed is not allowed: :data:`WRITER_REJECTIONS` / :data:`READER_REJECTIONS` name the
error it ends in (a typed :class:`~spec.shuffle.errors.ShuffleError` when the peer caused it, a
:class:`~spec.shuffle.steps.UsageError` when the caller did). The docs' state diagrams are
generated from these tables, and a test enumerates every pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Generic, Mapping, TypeVar

from spec.shuffle import errors
from spec.shuffle.steps import UsageError


class WriterChannelState(str, Enum):
    """A writer's channel to one reader."""

    AWAITING_CREDIT = "AWAITING_CREDIT"
    OPEN = "OPEN"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"
    LEFT = "LEFT"
    FAILED = "FAILED"


class WriterChannelEvent(str, Enum):
    """Inputs of a writer channel, after classification by the writer machine."""

    CREDIT = "CREDIT"
    FLUSH = "FLUSH"
    FINISH = "FINISH"
    ACK = "ACK"
    ACK_WRONG_SEQ = "ACK_WRONG_SEQ"
    UNEXPECTED = "UNEXPECTED"
    CLOSE = "CLOSE"
    TIMEOUT = "TIMEOUT"
    ACK_TIMEOUT = "ACK_TIMEOUT"
    SEND_FAILED = "SEND_FAILED"
    FOREIGN_CONNECTION = "FOREIGN_CONNECTION"
    MISMATCHED_IDS = "MISMATCHED_IDS"
    LEAVE = "LEAVE"


class ReaderChannelState(str, Enum):
    """A reader's connection to one writer."""

    CONNECTING = "CONNECTING"
    OPEN = "OPEN"
    TERMINATED = "TERMINATED"
    ACKED = "ACKED"
    FAILED = "FAILED"


class ReaderChannelEvent(str, Enum):
    """Inputs of a reader channel, after classification by the reader machine."""

    CONNECTED = "CONNECTED"
    DATA = "DATA"
    TERMINATION = "TERMINATION"
    WRONG_SEQ = "WRONG_SEQ"
    BAD_CHECKSUM = "BAD_CHECKSUM"
    UNEXPECTED = "UNEXPECTED"
    ACK_WRITTEN = "ACK_WRITTEN"
    SEND_FAILED = "SEND_FAILED"
    CLOSE = "CLOSE"
    MISMATCHED_IDS = "MISMATCHED_IDS"
    CONNECT_TIMEOUT = "CONNECT_TIMEOUT"


WRITER_EVENT_MEANINGS: Final[Mapping[WriterChannelEvent, str]] = {
    WriterChannelEvent.CREDIT: 'A CREDIT naming this reader (the first one binds; later ones are advisory and ignored).',
    WriterChannelEvent.FLUSH: 'A buffer became a DATA message (queued until the bind, sent after it).',
    WriterChannelEvent.FINISH: 'Input ended: last flush done, TERMINATION_CONTROL queued or sent.',
    WriterChannelEvent.ACK: 'TERMINATION_ACK whose seq equals the last seq sent on this channel.',
    WriterChannelEvent.ACK_WRONG_SEQ: 'TERMINATION_ACK whose seq differs from the last seq sent.',
    WriterChannelEvent.UNEXPECTED: 'DATA or TERMINATION_CONTROL received by a writer.',
    WriterChannelEvent.CLOSE: 'The bound connection closed.',
    WriterChannelEvent.TIMEOUT: 'writerConnectionTimeout passed without a bind.',
    WriterChannelEvent.ACK_TIMEOUT: 'The opt-in termination-ack timeout passed (Spark 4.3.0 waits forever).',
    WriterChannelEvent.SEND_FAILED: 'The socket write of a DATA failed.',
    WriterChannelEvent.FOREIGN_CONNECTION: ('CREDIT or TERMINATION_ACK for this reader on a connection other than the '
                                            'one bound to it (SHOULD: Spark 4.3.0 ignores it).'),
    WriterChannelEvent.MISMATCHED_IDS: ("CREDIT or TERMINATION_ACK on this reader's connection naming another reader, "
                                        'or a handshake CREDIT naming another writer than the directory id, or a '
                                        'later CREDIT or ack another than the partition id (SHOULD: Spark 4.3.0 '
                                        'ignores the ids).'),
    WriterChannelEvent.LEAVE: ('The run does not serve this reader, or (when readers may leave) its connection closed '
                               'or failed before its ack: it took what it needed. Its data is dropped, no ack awaited '
                               '(an extension: Spark 4.3.0 has no partial runs).'),
}
READER_EVENT_MEANINGS: Final[Mapping[ReaderChannelEvent, str]] = {
    ReaderChannelEvent.CONNECTED: 'The connection is up: send the handshake CREDIT.',
    ReaderChannelEvent.DATA: 'DATA with seq = last+1 and a matching checksum: surface it, send CREDIT.',
    ReaderChannelEvent.TERMINATION: 'TERMINATION_CONTROL with seq = last+1: answer with TERMINATION_ACK.',
    ReaderChannelEvent.WRONG_SEQ: 'Any message whose seq is not last+1 (checked first, for every type, as Spark does).',
    ReaderChannelEvent.BAD_CHECKSUM: 'DATA whose CRC32C does not match (checksums enabled).',
    ReaderChannelEvent.UNEXPECTED: 'CREDIT or TERMINATION_ACK received by a reader.',
    ReaderChannelEvent.ACK_WRITTEN: "The TERMINATION_ACK's socket write completed.",
    ReaderChannelEvent.SEND_FAILED: "The TERMINATION_ACK's socket write failed.",
    ReaderChannelEvent.CLOSE: 'The connection closed.',
    ReaderChannelEvent.MISMATCHED_IDS: ("DATA or TERMINATION_CONTROL naming another reader, or another partition id "
                                        "than the connection's first DATA or TERMINATION_CONTROL (SHOULD: Spark 4.3.0 "
                                        "ignores the ids)."),
    ReaderChannelEvent.CONNECT_TIMEOUT: ('Failed attempts to connect have spanned the connect timeout (an addition: '
                                         'Spark 4.3.0 keeps trying).'),
}
"""What each event means, for the generated specification (two maps: the str enums compare by value)."""


class WriterState(str, Enum):
    """A writer task as a whole."""

    RUNNING = "RUNNING"
    FINISHING = "FINISHING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class ReaderState(str, Enum):
    """A reader task as a whole."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


S = TypeVar("S", WriterChannelState, ReaderChannelState)
E = TypeVar("E", WriterChannelEvent, ReaderChannelEvent)


@dataclass(frozen=True, slots=True)
class Moved(Generic[S]):
    """A listed transition; ``error`` is the failure the table names when ``target`` is FAILED."""

    target: S
    error: type[errors.ChannelError] | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """An unlisted pair and the error it ends in: a peer's fault, or :class:`UsageError` (the caller's)."""

    error: type[errors.ChannelError] | type[UsageError]


class Table(Generic[S, E]):
    """One channel's transitions, the error each unlisted pair ends in, and the errors of listed failures.

    The machines move their channels only through :meth:`apply`, so the table is the one place that
    says what a pair does and which error it ends in (tests watch the lookups by wrapping it).
    """

    __slots__ = ("name", "initial", "transitions", "rejections", "failures", "meanings", "_outcomes")

    def __init__(
        self, *, name: str, initial: S, transitions: Mapping[tuple[S, E], S],
        rejections: Mapping[tuple[S, E], type[errors.ChannelError] | type[UsageError]],
        failures: Mapping[tuple[S, E], type[errors.ChannelError]], meanings: Mapping[E, str],
    ) -> None:
        self.name: str = name
        self.initial: S = initial
        self.transitions: Mapping[tuple[S, E], S] = transitions
        self.rejections: Mapping[tuple[S, E], type[errors.ChannelError] | type[UsageError]] = rejections
        self.failures: Mapping[tuple[S, E], type[errors.ChannelError]] = failures
        self.meanings: Mapping[E, str] = meanings
        self._outcomes: dict[tuple[S, E], Moved[S] | Rejected] = {
            **{pair: Moved(target, failures.get(pair)) for pair, target in transitions.items()},
            **{pair: Rejected(error) for pair, error in rejections.items()},
        }

    def apply(self, state: S, event: E) -> Moved[S] | Rejected:
        """What ``event`` does to a channel in ``state``."""
        return self._outcomes[(state, event)]


WRITER_TRANSITIONS: Final[Mapping[tuple[WriterChannelState, WriterChannelEvent], WriterChannelState]] = {
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.CREDIT): WriterChannelState.OPEN,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.FLUSH): WriterChannelState.AWAITING_CREDIT,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.FINISH): WriterChannelState.TERMINATING,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.TIMEOUT): WriterChannelState.FAILED,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.ACK_WRONG_SEQ): WriterChannelState.FAILED,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.UNEXPECTED): WriterChannelState.FAILED,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.MISMATCHED_IDS): WriterChannelState.FAILED,
    (WriterChannelState.OPEN, WriterChannelEvent.CREDIT): WriterChannelState.OPEN,
    (WriterChannelState.OPEN, WriterChannelEvent.FLUSH): WriterChannelState.OPEN,
    (WriterChannelState.OPEN, WriterChannelEvent.FINISH): WriterChannelState.TERMINATING,
    (WriterChannelState.OPEN, WriterChannelEvent.ACK_WRONG_SEQ): WriterChannelState.FAILED,
    (WriterChannelState.OPEN, WriterChannelEvent.UNEXPECTED): WriterChannelState.FAILED,
    (WriterChannelState.OPEN, WriterChannelEvent.CLOSE): WriterChannelState.FAILED,
    (WriterChannelState.OPEN, WriterChannelEvent.SEND_FAILED): WriterChannelState.FAILED,
    (WriterChannelState.OPEN, WriterChannelEvent.FOREIGN_CONNECTION): WriterChannelState.FAILED,
    (WriterChannelState.OPEN, WriterChannelEvent.MISMATCHED_IDS): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.CREDIT): WriterChannelState.TERMINATING,
    (WriterChannelState.TERMINATING, WriterChannelEvent.ACK): WriterChannelState.TERMINATED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.ACK_WRONG_SEQ): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.UNEXPECTED): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.CLOSE): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.TIMEOUT): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.ACK_TIMEOUT): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.SEND_FAILED): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.FOREIGN_CONNECTION): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATING, WriterChannelEvent.MISMATCHED_IDS): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.CREDIT): WriterChannelState.TERMINATED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.ACK): WriterChannelState.TERMINATED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.ACK_WRONG_SEQ): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.UNEXPECTED): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.CLOSE): WriterChannelState.TERMINATED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.FOREIGN_CONNECTION): WriterChannelState.FAILED,
    (WriterChannelState.TERMINATED, WriterChannelEvent.MISMATCHED_IDS): WriterChannelState.FAILED,
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.LEAVE): WriterChannelState.LEFT,
    (WriterChannelState.OPEN, WriterChannelEvent.LEAVE): WriterChannelState.LEFT,
    (WriterChannelState.TERMINATING, WriterChannelEvent.LEAVE): WriterChannelState.LEFT,
    (WriterChannelState.LEFT, WriterChannelEvent.LEAVE): WriterChannelState.LEFT,
    (WriterChannelState.LEFT, WriterChannelEvent.CREDIT): WriterChannelState.LEFT,
    (WriterChannelState.LEFT, WriterChannelEvent.FINISH): WriterChannelState.LEFT,
    (WriterChannelState.LEFT, WriterChannelEvent.SEND_FAILED): WriterChannelState.LEFT,
    (WriterChannelState.LEFT, WriterChannelEvent.ACK_WRONG_SEQ): WriterChannelState.FAILED,
    (WriterChannelState.LEFT, WriterChannelEvent.UNEXPECTED): WriterChannelState.FAILED,
    (WriterChannelState.LEFT, WriterChannelEvent.MISMATCHED_IDS): WriterChannelState.FAILED,
}
"""Writer channel: (state, event) -> next state. FAILED is terminal (the whole writer failed); LEFT
ends a channel without its ack (the writer drops its data and ignores its credits)."""

WRITER_REJECTIONS: Final[Mapping[tuple[WriterChannelState, WriterChannelEvent], type[errors.ChannelError] | type[UsageError]]] = {
    (state, event): (
        errors.UnexpectedMessage if event is WriterChannelEvent.ACK and state is not WriterChannelState.FAILED else UsageError
    )
    for state in WriterChannelState for event in WriterChannelEvent
    if (state, event) not in WRITER_TRANSITIONS
}
"""Writer channel: the error every unlisted pair ends in. A matching ack before
TERMINATION_CONTROL is the peer's fault (Spark would count it; this spec rejects it); every other
unlisted pair can only be reached by a caller bug (for example ``write`` after ``finish``, or
input after the machine failed, which the machine ignores instead)."""

READER_TRANSITIONS: Final[Mapping[tuple[ReaderChannelState, ReaderChannelEvent], ReaderChannelState]] = {
    (ReaderChannelState.CONNECTING, ReaderChannelEvent.CONNECTED): ReaderChannelState.OPEN,
    (ReaderChannelState.CONNECTING, ReaderChannelEvent.CLOSE): ReaderChannelState.FAILED,
    (ReaderChannelState.CONNECTING, ReaderChannelEvent.CONNECT_TIMEOUT): ReaderChannelState.FAILED,
    (ReaderChannelState.OPEN, ReaderChannelEvent.DATA): ReaderChannelState.OPEN,
    (ReaderChannelState.OPEN, ReaderChannelEvent.TERMINATION): ReaderChannelState.TERMINATED,
    (ReaderChannelState.OPEN, ReaderChannelEvent.WRONG_SEQ): ReaderChannelState.FAILED,
    (ReaderChannelState.OPEN, ReaderChannelEvent.BAD_CHECKSUM): ReaderChannelState.FAILED,
    (ReaderChannelState.OPEN, ReaderChannelEvent.UNEXPECTED): ReaderChannelState.FAILED,
    (ReaderChannelState.OPEN, ReaderChannelEvent.CLOSE): ReaderChannelState.FAILED,
    (ReaderChannelState.OPEN, ReaderChannelEvent.MISMATCHED_IDS): ReaderChannelState.FAILED,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.WRONG_SEQ): ReaderChannelState.FAILED,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.UNEXPECTED): ReaderChannelState.FAILED,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.ACK_WRITTEN): ReaderChannelState.ACKED,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.SEND_FAILED): ReaderChannelState.FAILED,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.CLOSE): ReaderChannelState.TERMINATED,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.MISMATCHED_IDS): ReaderChannelState.FAILED,
    (ReaderChannelState.ACKED, ReaderChannelEvent.WRONG_SEQ): ReaderChannelState.FAILED,
    (ReaderChannelState.ACKED, ReaderChannelEvent.UNEXPECTED): ReaderChannelState.FAILED,
    (ReaderChannelState.ACKED, ReaderChannelEvent.CLOSE): ReaderChannelState.ACKED,
    (ReaderChannelState.ACKED, ReaderChannelEvent.MISMATCHED_IDS): ReaderChannelState.FAILED,
}
"""Reader channel: (state, event) -> next state. FAILED is terminal (the whole reader failed)."""

_PEER_EVENTS: Final = frozenset({
    ReaderChannelEvent.DATA, ReaderChannelEvent.TERMINATION, ReaderChannelEvent.BAD_CHECKSUM,
})

READER_REJECTIONS: Final[Mapping[tuple[ReaderChannelState, ReaderChannelEvent], type[errors.ChannelError] | type[UsageError]]] = {
    (state, event): (
        errors.UnexpectedMessage
        if event in _PEER_EVENTS and state in (ReaderChannelState.TERMINATED, ReaderChannelState.ACKED)
        else UsageError
    )
    for state in ReaderChannelState for event in ReaderChannelEvent
    if (state, event) not in READER_TRANSITIONS
}
"""Reader channel: the error every unlisted pair ends in. DATA or a second TERMINATION_CONTROL
after the terminator is the peer's fault (Spark would queue it; this spec rejects it); every other
unlisted pair is a caller bug (a message before ``connected``, an ack completion that was never
asked for, input after the machine failed, which the machine ignores instead)."""

_WRITER_NOT_FAILED: Final = tuple(s for s in WriterChannelState if s is not WriterChannelState.FAILED)
_WRITER_BOUND: Final = (WriterChannelState.OPEN, WriterChannelState.TERMINATING, WriterChannelState.TERMINATED)
"""A reader's CREDIT has bound the channel."""
_READER_CONNECTED: Final = (ReaderChannelState.OPEN, ReaderChannelState.TERMINATED, ReaderChannelState.ACKED)

WRITER_ERRORS: Final[Mapping[tuple[WriterChannelState, WriterChannelEvent], type[errors.ChannelError]]] = {
    (WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.TIMEOUT): errors.WriterConnectionTimeout,
    (WriterChannelState.TERMINATING, WriterChannelEvent.TIMEOUT): errors.WriterConnectionTimeout,
    (WriterChannelState.TERMINATING, WriterChannelEvent.ACK_TIMEOUT): errors.TerminationAckTimeout,
    (WriterChannelState.OPEN, WriterChannelEvent.SEND_FAILED): errors.SendFailed,
    (WriterChannelState.TERMINATING, WriterChannelEvent.SEND_FAILED): errors.SendFailed,
    **{(s, WriterChannelEvent.ACK_WRONG_SEQ): errors.IncorrectSequenceNumber for s in _WRITER_NOT_FAILED},
    **{(s, WriterChannelEvent.UNEXPECTED): errors.UnexpectedMessage for s in _WRITER_NOT_FAILED},
    (WriterChannelState.OPEN, WriterChannelEvent.CLOSE): errors.ConnectionClosedBeforeTermination,
    (WriterChannelState.TERMINATING, WriterChannelEvent.CLOSE): errors.ConnectionClosedBeforeTermination,
    **{(s, WriterChannelEvent.FOREIGN_CONNECTION): errors.ReaderAlreadyBound for s in _WRITER_BOUND},
    **{(s, WriterChannelEvent.MISMATCHED_IDS): errors.MismatchedChannelIds for s in _WRITER_NOT_FAILED},
}
"""Listed writer transitions into FAILED, and the error each one reports."""

READER_ERRORS: Final[Mapping[tuple[ReaderChannelState, ReaderChannelEvent], type[errors.ChannelError]]] = {
    (ReaderChannelState.CONNECTING, ReaderChannelEvent.CLOSE): errors.ConnectionClosedBeforeTermination,
    (ReaderChannelState.CONNECTING, ReaderChannelEvent.CONNECT_TIMEOUT): errors.WriterUnreachable,
    (ReaderChannelState.OPEN, ReaderChannelEvent.CLOSE): errors.ConnectionClosedBeforeTermination,
    (ReaderChannelState.OPEN, ReaderChannelEvent.BAD_CHECKSUM): errors.ChecksumVerificationFailed,
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.SEND_FAILED): errors.SendFailed,
    **{(s, ReaderChannelEvent.WRONG_SEQ): errors.IncorrectSequenceNumber for s in _READER_CONNECTED},
    **{(s, ReaderChannelEvent.UNEXPECTED): errors.UnexpectedMessage for s in _READER_CONNECTED},
    **{(s, ReaderChannelEvent.MISMATCHED_IDS): errors.MismatchedChannelIds for s in _READER_CONNECTED},
}
"""Listed reader transitions into FAILED, and the error each one reports."""

WRITER_TABLE: Final = Table(
    name="writer channel", initial=WriterChannelState.AWAITING_CREDIT, transitions=WRITER_TRANSITIONS,
    rejections=WRITER_REJECTIONS, failures=WRITER_ERRORS, meanings=WRITER_EVENT_MEANINGS,
)
READER_TABLE: Final = Table(
    name="reader channel", initial=ReaderChannelState.CONNECTING, transitions=READER_TRANSITIONS,
    rejections=READER_REJECTIONS, failures=READER_ERRORS, meanings=READER_EVENT_MEANINGS,
)
