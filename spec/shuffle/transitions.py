"""States and transitions of the writer and reader channels, as data.

Each machine classifies an input into one event of its channel (for example an ack whose seq
matches, or one whose seq does not) and looks the pair (state, event) up here. A pair that is
not listed is not allowed: :data:`WRITER_REJECTIONS` / :data:`READER_REJECTIONS` name the
error it ends in (a typed :class:`~spec.shuffle.errors.ShuffleError` when the peer caused it, a
:class:`~spec.shuffle.steps.UsageError` when the caller did). The docs' state diagrams are
generated from these tables, and a test enumerates every pair.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Final, Generic, Iterator, Mapping, TypeVar

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
                                        'or naming another writer (SHOULD: Spark 4.3.0 ignores the ids).'),
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
    ReaderChannelEvent.MISMATCHED_IDS: ("DATA or TERMINATION_CONTROL naming another writer or reader than this "
                                        "connection's pair (SHOULD: Spark 4.3.0 ignores the ids)."),
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


Observer = Callable[["Table[Any, Any]", Any, Any], None]
"""Called with (table, state, event) for every pair a machine looks up, before the answer is given."""


class Table(Generic[S, E]):
    """One channel's transitions, the error each unlisted pair ends in, and the errors of listed failures.

    The machines move their channels only through :meth:`apply`, so the table is the one place that
    says what a pair does and which error it ends in; observers see every lookup (model checks
    count the pairs they exercise with them).
    """

    __slots__ = ("name", "initial", "transitions", "rejections", "failures", "meanings", "_outcomes", "_observers")

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
        self._observers: list[Observer] = []

    def apply(self, state: S, event: E) -> Moved[S] | Rejected:
        """What ``event`` does to a channel in ``state``."""
        for observer in self._observers:
            observer(self, state, event)
        return self._outcomes[(state, event)]

    @contextmanager
    def observed(self, observer: Observer) -> Iterator[None]:
        """Call ``observer`` on every lookup while the block runs."""
        self._observers.append(observer)
        try:
            yield
        finally:
            self._observers.remove(observer)


WS, WE = WriterChannelState, WriterChannelEvent
RS, RE = ReaderChannelState, ReaderChannelEvent

WRITER_TRANSITIONS: Final[Mapping[tuple[WriterChannelState, WriterChannelEvent], WriterChannelState]] = {
    (WS.AWAITING_CREDIT, WE.CREDIT): WS.OPEN,
    (WS.AWAITING_CREDIT, WE.FLUSH): WS.AWAITING_CREDIT,
    (WS.AWAITING_CREDIT, WE.FINISH): WS.TERMINATING,
    (WS.AWAITING_CREDIT, WE.TIMEOUT): WS.FAILED,
    (WS.AWAITING_CREDIT, WE.ACK_WRONG_SEQ): WS.FAILED,
    (WS.AWAITING_CREDIT, WE.UNEXPECTED): WS.FAILED,
    (WS.AWAITING_CREDIT, WE.MISMATCHED_IDS): WS.FAILED,
    (WS.OPEN, WE.CREDIT): WS.OPEN,
    (WS.OPEN, WE.FLUSH): WS.OPEN,
    (WS.OPEN, WE.FINISH): WS.TERMINATING,
    (WS.OPEN, WE.ACK_WRONG_SEQ): WS.FAILED,
    (WS.OPEN, WE.UNEXPECTED): WS.FAILED,
    (WS.OPEN, WE.CLOSE): WS.FAILED,
    (WS.OPEN, WE.SEND_FAILED): WS.FAILED,
    (WS.OPEN, WE.FOREIGN_CONNECTION): WS.FAILED,
    (WS.OPEN, WE.MISMATCHED_IDS): WS.FAILED,
    (WS.TERMINATING, WE.CREDIT): WS.TERMINATING,
    (WS.TERMINATING, WE.ACK): WS.TERMINATED,
    (WS.TERMINATING, WE.ACK_WRONG_SEQ): WS.FAILED,
    (WS.TERMINATING, WE.UNEXPECTED): WS.FAILED,
    (WS.TERMINATING, WE.CLOSE): WS.FAILED,
    (WS.TERMINATING, WE.TIMEOUT): WS.FAILED,
    (WS.TERMINATING, WE.ACK_TIMEOUT): WS.FAILED,
    (WS.TERMINATING, WE.SEND_FAILED): WS.FAILED,
    (WS.TERMINATING, WE.FOREIGN_CONNECTION): WS.FAILED,
    (WS.TERMINATING, WE.MISMATCHED_IDS): WS.FAILED,
    (WS.TERMINATED, WE.CREDIT): WS.TERMINATED,
    (WS.TERMINATED, WE.ACK): WS.TERMINATED,
    (WS.TERMINATED, WE.ACK_WRONG_SEQ): WS.FAILED,
    (WS.TERMINATED, WE.UNEXPECTED): WS.FAILED,
    (WS.TERMINATED, WE.CLOSE): WS.TERMINATED,
    (WS.TERMINATED, WE.FOREIGN_CONNECTION): WS.FAILED,
    (WS.TERMINATED, WE.MISMATCHED_IDS): WS.FAILED,
    (WS.AWAITING_CREDIT, WE.LEAVE): WS.LEFT,
    (WS.OPEN, WE.LEAVE): WS.LEFT,
    (WS.TERMINATING, WE.LEAVE): WS.LEFT,
    (WS.LEFT, WE.LEAVE): WS.LEFT,
    (WS.LEFT, WE.CREDIT): WS.LEFT,
    (WS.LEFT, WE.FINISH): WS.LEFT,
    (WS.LEFT, WE.SEND_FAILED): WS.LEFT,
    (WS.LEFT, WE.ACK_WRONG_SEQ): WS.FAILED,
    (WS.LEFT, WE.UNEXPECTED): WS.FAILED,
    (WS.LEFT, WE.MISMATCHED_IDS): WS.FAILED,
}
"""Writer channel: (state, event) -> next state. FAILED is terminal (the whole writer failed); LEFT
ends a channel without its ack (the writer drops its data and ignores its credits)."""

WRITER_REJECTIONS: Final[Mapping[tuple[WriterChannelState, WriterChannelEvent], type[errors.ChannelError] | type[UsageError]]] = {
    (state, event): (
        errors.UnexpectedMessage if event is WE.ACK and state is not WS.FAILED else UsageError
    )
    for state in WS for event in WE
    if (state, event) not in WRITER_TRANSITIONS
}
"""Writer channel: the error every unlisted pair ends in. A matching ack before
TERMINATION_CONTROL is the peer's fault (Spark would count it; this spec rejects it); every other
unlisted pair can only be reached by a caller bug (for example ``write`` after ``finish``, or
input after the machine failed, which the machine ignores instead)."""

READER_TRANSITIONS: Final[Mapping[tuple[ReaderChannelState, ReaderChannelEvent], ReaderChannelState]] = {
    (RS.CONNECTING, RE.CONNECTED): RS.OPEN,
    (RS.CONNECTING, RE.CLOSE): RS.FAILED,
    (RS.OPEN, RE.DATA): RS.OPEN,
    (RS.OPEN, RE.TERMINATION): RS.TERMINATED,
    (RS.OPEN, RE.WRONG_SEQ): RS.FAILED,
    (RS.OPEN, RE.BAD_CHECKSUM): RS.FAILED,
    (RS.OPEN, RE.UNEXPECTED): RS.FAILED,
    (RS.OPEN, RE.CLOSE): RS.FAILED,
    (RS.OPEN, RE.MISMATCHED_IDS): RS.FAILED,
    (RS.TERMINATED, RE.WRONG_SEQ): RS.FAILED,
    (RS.TERMINATED, RE.UNEXPECTED): RS.FAILED,
    (RS.TERMINATED, RE.ACK_WRITTEN): RS.ACKED,
    (RS.TERMINATED, RE.SEND_FAILED): RS.FAILED,
    (RS.TERMINATED, RE.CLOSE): RS.TERMINATED,
    (RS.TERMINATED, RE.MISMATCHED_IDS): RS.FAILED,
    (RS.ACKED, RE.WRONG_SEQ): RS.FAILED,
    (RS.ACKED, RE.UNEXPECTED): RS.FAILED,
    (RS.ACKED, RE.CLOSE): RS.ACKED,
    (RS.ACKED, RE.MISMATCHED_IDS): RS.FAILED,
}
"""Reader channel: (state, event) -> next state. FAILED is terminal (the whole reader failed)."""

_PEER_EVENTS: Final = frozenset({RE.DATA, RE.TERMINATION, RE.BAD_CHECKSUM})

READER_REJECTIONS: Final[Mapping[tuple[ReaderChannelState, ReaderChannelEvent], type[errors.ChannelError] | type[UsageError]]] = {
    (state, event): (
        errors.UnexpectedMessage
        if event in _PEER_EVENTS and state in (RS.TERMINATED, RS.ACKED)
        else UsageError
    )
    for state in RS for event in RE
    if (state, event) not in READER_TRANSITIONS
}
"""Reader channel: the error every unlisted pair ends in. DATA or a second TERMINATION_CONTROL
after the terminator is the peer's fault (Spark would queue it; this spec rejects it); every other
unlisted pair is a caller bug (a message before ``connected``, an ack completion that was never
asked for, input after the machine failed, which the machine ignores instead)."""

WRITER_ERRORS: Final[Mapping[tuple[WriterChannelState, WriterChannelEvent], type[errors.ChannelError]]] = {
    (WS.AWAITING_CREDIT, WE.TIMEOUT): errors.WriterConnectionTimeout,
    (WS.TERMINATING, WE.TIMEOUT): errors.WriterConnectionTimeout,
    (WS.TERMINATING, WE.ACK_TIMEOUT): errors.TerminationAckTimeout,
    (WS.OPEN, WE.SEND_FAILED): errors.SendFailed,
    (WS.TERMINATING, WE.SEND_FAILED): errors.SendFailed,
    **{(s, WE.ACK_WRONG_SEQ): errors.IncorrectSequenceNumber for s in WS if s is not WS.FAILED},
    **{(s, WE.UNEXPECTED): errors.UnexpectedMessage for s in WS if s is not WS.FAILED},
    (WS.OPEN, WE.CLOSE): errors.ConnectionClosedBeforeTermination,
    (WS.TERMINATING, WE.CLOSE): errors.ConnectionClosedBeforeTermination,
    **{(s, WE.FOREIGN_CONNECTION): errors.ReaderAlreadyBound for s in (WS.OPEN, WS.TERMINATING, WS.TERMINATED)},
    **{(s, WE.MISMATCHED_IDS): errors.MismatchedChannelIds for s in WS if s is not WS.FAILED},
}
"""Listed writer transitions into FAILED, and the error each one reports."""

READER_ERRORS: Final[Mapping[tuple[ReaderChannelState, ReaderChannelEvent], type[errors.ChannelError]]] = {
    (RS.CONNECTING, RE.CLOSE): errors.ConnectionClosedBeforeTermination,
    (RS.OPEN, RE.CLOSE): errors.ConnectionClosedBeforeTermination,
    (RS.OPEN, RE.BAD_CHECKSUM): errors.ChecksumVerificationFailed,
    (RS.TERMINATED, RE.SEND_FAILED): errors.SendFailed,
    **{(s, RE.WRONG_SEQ): errors.IncorrectSequenceNumber for s in (RS.OPEN, RS.TERMINATED, RS.ACKED)},
    **{(s, RE.UNEXPECTED): errors.UnexpectedMessage for s in (RS.OPEN, RS.TERMINATED, RS.ACKED)},
    **{(s, RE.MISMATCHED_IDS): errors.MismatchedChannelIds for s in (RS.OPEN, RS.TERMINATED, RS.ACKED)},
}
"""Listed reader transitions into FAILED, and the error each one reports."""

WRITER_TABLE: Final = Table(
    name="writer channel", initial=WS.AWAITING_CREDIT, transitions=WRITER_TRANSITIONS,
    rejections=WRITER_REJECTIONS, failures=WRITER_ERRORS, meanings=WRITER_EVENT_MEANINGS,
)
READER_TABLE: Final = Table(
    name="reader channel", initial=RS.CONNECTING, transitions=READER_TRANSITIONS,
    rejections=READER_REJECTIONS, failures=READER_ERRORS, meanings=READER_EVENT_MEANINGS,
)
