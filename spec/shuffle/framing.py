"""Incremental frame decoder: feed bytes as they arrive, get whole messages out.

Sans-IO: the caller owns the socket. The announced frame length is validated against the
configured maximum before a single byte of the body is buffered, so a hostile length cannot make
the decoder allocate. Complete frames that arrive in one chunk are decoded straight from that
chunk; only a partial frame is buffered.
"""

from __future__ import annotations

from spec.shuffle import errors
from spec.shuffle.codec import (
    DEFAULT_MAX_FRAME_LENGTH,
    FRAME_HEADER_LENGTH,
    check_frame_header,
    decode_body,
)
from spec.shuffle.messages import Message, Payload


class FrameDecoder:
    """Turns a byte stream into messages; raises the codec's typed errors on bad input."""

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
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
        out: list[Message] = []
        view = memoryview(data)
        if self._pending:
            view = self._complete_pending(view, out)
        offset = 0
        end = len(view)
        while end - offset >= FRAME_HEADER_LENGTH:
            length = check_frame_header(view[offset : offset + FRAME_HEADER_LENGTH], self.max_frame_length)
            start = offset + FRAME_HEADER_LENGTH
            if end - start < length:
                break
            out.append(decode_body(view[start : start + length]))
            offset = start + length
        if offset < end:
            self._pending += view[offset:]
            if len(self._pending) >= FRAME_HEADER_LENGTH:
                self._body_length = check_frame_header(self._pending, self.max_frame_length)
        return out

    def _complete_pending(self, view: memoryview, out: list[Message]) -> memoryview:
        """Top up the held partial frame from ``view``; return what is left of ``view``."""
        if self._body_length is None:
            take = min(FRAME_HEADER_LENGTH - len(self._pending), len(view))
            self._pending += view[:take]
            view = view[take:]
            if len(self._pending) < FRAME_HEADER_LENGTH:
                return view
            self._body_length = check_frame_header(self._pending, self.max_frame_length)
        missing = FRAME_HEADER_LENGTH + self._body_length - len(self._pending)
        take = min(missing, len(view))
        self._pending += view[:take]
        if take == missing:
            frame = self._pending
            self._pending = bytearray()
            self._body_length = None
            out.append(decode_body(memoryview(frame)[FRAME_HEADER_LENGTH:]))
        return view[take:]

    def close(self) -> None:
        """The stream ended: a partial frame left behind is truncated input."""
        if self._pending:
            needed = FRAME_HEADER_LENGTH + (self._body_length or 0)
            raise errors.TruncatedInput("frame", needed, len(self._pending))
