"""Incremental frame decoder: feed bytes as they arrive, get whole messages out.

Sans-IO: the caller owns the socket. The announced frame length is validated against the
configured maximum before a single byte of the body is buffered, so a hostile length cannot make
the decoder allocate. Complete frames that arrive in one chunk are decoded straight from that
chunk (the payload is copied once out of it, or not at all when the caller lends the chunk); only
a partial frame is buffered, and a payload completed in that buffer is handed out as a view of it,
so no payload is copied twice.
"""

from __future__ import annotations

from typing import Callable, Final, TypeVar

from spec.shuffle import errors
from spec.shuffle.codec import (
    DEFAULT_MAX_FRAME_LENGTH,
    FRAME_HEADER_LENGTH,
    HEADER_LENGTH,
    DataView,
    check_frame_header,
    decode_body_at,
    decode_view_at,
)
from spec.shuffle.messages import Message, Payload
from spec.shuffle.registry import Sender, sent_by
from spec.shuffle.records import RECORD_LENGTH
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.writer import flush_threshold

T = TypeVar("T")

DEFAULT_MAX_RECORD_SIZE: Final = 64 * 1024 * 1024
"""Largest serialized record a reader accepts unless configured otherwise (Spark sets no limit
below 2 GiB; a reader should not allocate that much on one writer's word)."""


def max_frame_from_reader() -> int:
    """The longest frame a writer can legitimately receive: the longest of the types a reader sends
    (:mod:`spec.shuffle.registry`: CREDIT and TERMINATION_ACK, fixed-size), so a writer rejects any
    longer frame before buffering a byte of it."""
    sent = sent_by(Sender.READER)
    assert not any(kind.carries_payload for kind in sent), "a reader's frames are bounded by their fixed part"
    return FRAME_HEADER_LENGTH + max(HEADER_LENGTH[kind.type] for kind in sent)


def max_frame_from_writer(settings: ShuffleSettings, max_record_size: int = DEFAULT_MAX_RECORD_SIZE) -> int:
    """The longest frame a reader can legitimately receive: the longest of the types a writer sends
    (:mod:`spec.shuffle.registry`), where the one with a payload (DATA) is a buffer that stayed below the
    flush threshold (90% of networkBufferSize) and then took one more record, of at most
    ``max_record_size`` bytes (records are never split, so a record may exceed the buffer)."""
    below_threshold = max(flush_threshold(settings) - 1, 0)
    payload = below_threshold + RECORD_LENGTH.size + max_record_size
    return FRAME_HEADER_LENGTH + max(HEADER_LENGTH[kind.type] + (payload if kind.carries_payload else 0)
                                     for kind in sent_by(Sender.WRITER))


class FrameDecoder:
    """Turns a byte stream into messages; raises the codec's typed errors on bad input."""

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, *, lent: bool = False) -> None:
        """``lent``: the caller lends each chunk it feeds only until it has used the messages that chunk
        completed (a socket's receive buffer, read into again afterwards), so their payloads may be views of
        the chunk instead of copies. A caller that keeps messages longer leaves it False."""
        self.max_frame_length = max_frame_length
        self.lent = lent
        self._pending = bytearray()
        self._body_length: int | None = None

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a whole frame."""
        return len(self._pending)

    def at_boundary(self) -> bool:
        """True when no partial frame is held: the stream may end here cleanly."""
        return not self._pending

    def feed(self, data: Payload) -> list[Message]:
        """Consume ``data`` and return every message it completes, in order."""
        return self._feed(data, decode_body_at)

    def feed_views(self, data: Payload) -> list[Message | DataView]:
        """:meth:`feed` for the hot path: a DATA comes out as a :data:`spec.shuffle.codec.DataView`, not a message
        object (:func:`spec.shuffle.codec.message_of` makes one); the same checks, errors and payloads."""
        return self._feed(data, decode_view_at)

    def _feed(self, data: Payload, decode: Callable[..., T]) -> list[T]:
        out: list[T] = []
        offset = self._complete_pending(data, out, decode) if self._pending else 0
        end = len(data)
        limit = self.max_frame_length
        while end - offset >= FRAME_HEADER_LENGTH:
            length = check_frame_header(data, limit, offset)
            start = offset + FRAME_HEADER_LENGTH
            if end - start < length:
                break
            offset = start + length
            out.append(decode(data, start, offset, owned=self.lent))
        if offset < end:
            self._pending += memoryview(data)[offset:]
            if len(self._pending) >= FRAME_HEADER_LENGTH:
                self._body_length = check_frame_header(self._pending, limit)
        return out

    def _complete_pending(self, data: Payload, out: list[T], decode: Callable[..., T]) -> int:
        """Top up the held partial frame from ``data``; return how much of ``data`` it took."""
        view = memoryview(data)
        taken = 0
        if self._body_length is None:
            taken = min(FRAME_HEADER_LENGTH - len(self._pending), len(view))
            self._pending += view[:taken]
            if len(self._pending) < FRAME_HEADER_LENGTH:
                return taken
            self._body_length = check_frame_header(self._pending, self.max_frame_length)
        missing = FRAME_HEADER_LENGTH + self._body_length - len(self._pending)
        take = min(missing, len(view) - taken)
        self._pending += view[taken:taken + take]
        if take == missing:
            frame = self._pending
            self._pending = bytearray()
            self._body_length = None
            out.append(decode(frame, FRAME_HEADER_LENGTH, len(frame), owned=True))
        return taken + take

    def close(self) -> None:
        """The stream ended: a partial frame left behind is truncated input."""
        if self._pending:
            needed = FRAME_HEADER_LENGTH + (self._body_length or 0)
            raise errors.TruncatedInput("frame", needed, len(self._pending))
