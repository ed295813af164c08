"""Framed shuffle connections over reactor streams: encoding, bounded decoding, transcripts.

The transport turns machine messages into frames and bytes back into messages, and nothing else:
the sockets belong to a :class:`reference.net.Reactor` (non-blocking, a fixed number of threads per
task), and each connection's :class:`spec.shuffle.framing.FrameDecoder` is bounded by the longest
frame its peer's role may send, checked before any body byte is buffered. A DATA payload goes to
``sendmsg`` as its own buffer next to the header, so it is never copied into a frame.

With authentication configured (:mod:`spec.auth`), a connection first runs Spark's AuthEngine
handshake: until it completes no byte reaches the frame decoder and nothing may be sent; after it,
each send's frames are sealed as one contiguous buffer and received bytes are opened before decoding.
The handshake does not make a connection useful: a writer's connection stays a stranger (under the
pending cap and the bind timeout) until the machine binds it at its first CREDIT, so a peer that
holds the secret but never asks for anything (or was configured with another cipher) is closed
at the bind timeout like any other.
Without it the connection has no handshake and no cipher, and the plaintext path is unchanged.

A connection's outgoing bytes meet its stream in one place (:meth:`Connection.send`, a whole step's
frames to that peer in one vectored write, sealed as one buffer when encrypted) and its incoming
bytes meet its decoder in one place (:meth:`Connection.decode`, every frame of one read at once);
the connection is used only by the thread that owns its task's machine.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Final, Sequence, TextIO

from reference.net import Stream
from reference.net.reactor import Outgoing
from spec.auth import ClientHandshake, Rejected, ServerHandshake, TransportCipher
from spec.shuffle.codec import DataView, encode_frame, encode_frame_parts, message_of
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import DataMessage, Message, Payload
from spec.shuffle.steps import Send

POLL_S: Final = 0.05
"""How often a waiting task thread looks at its cancellation event."""

class Transcript:
    """Every frame of every connection as JSON lines: ``{"t", "conn", "dir", "hex"}``.

    Outgoing frames are the exact bytes written; incoming frames are re-encoded from the decoded
    message, which reproduces the bytes of any frame the decoder accepts except the
    ``body_length`` field that Spark's decoder ignores.
    """

    def __init__(self, path: str) -> None:
        self._file: TextIO = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, conn: str, direction: str, frame: bytes) -> None:
        line = json.dumps({"t": time.time(), "conn": conn, "dir": direction, "hex": frame.hex()})
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Connection:
    """One framed connection: a reactor stream, its handshake and cipher if any, its bounded decoder
    and its outgoing frames. Used only by the thread that owns the connection."""

    def __init__(self, stream: Stream, max_frame_length: int, *, transcript: Transcript | None = None,
                 handshake: ClientHandshake | ServerHandshake | None = None) -> None:
        """``handshake``: authenticate before any frame (a client's sends its challenge in :meth:`start`)."""
        self.stream = stream
        self._decoder = FrameDecoder(max_frame_length, lent=True)
        self._transcript = transcript
        self._handshake = handshake
        self._cipher: TransportCipher | None = None
        self._repeated: tuple[Message, object, tuple[Payload, ...]] | None = None
        """The last control message encoded, the encoder and its frame: a reader's CREDIT after every DATA
        is the same message object each time (the machine makes it once), so it is encoded once."""

    @property
    def label(self) -> str:
        return self.stream.label

    @property
    def authenticated(self) -> bool:
        """Frames may flow: the handshake completed, or there is none."""
        return self._handshake is None or self._cipher is not None

    def start(self) -> None:
        """A client's first bytes: its handshake challenge (nothing without a handshake)."""
        if isinstance(self._handshake, ClientHandshake):
            self.stream.send([Outgoing((self._handshake.challenge(),))])

    def send(self, sends: Sequence[Send]) -> list[Send]:
        """Write the machine's sends to this peer in order, in one vectored write that does not block;
        return the notifying sends written now.

        The rest are written by the reactor, which reports them through its handler's ``sent``.
        Raises OSError if the connection is closed or failed.
        """
        assert self.authenticated, "a send before the handshake completed"
        encode = encode_frame_parts  # looked up at each call: tests rewrite what the transport encodes
        repeated = self._repeated
        out = []
        for send in sends:
            message = send.message
            if repeated is not None and message is repeated[0] and encode is repeated[1]:
                parts = repeated[2]
            else:
                parts = encode(message)
                if not isinstance(message, DataMessage):
                    repeated = self._repeated = (message, encode, parts)
            out.append(Outgoing(parts, send if send.notify else None))
        if self._transcript is not None:
            for send in sends:
                self._transcript.record(self.label, "out", encode_frame(send.message))
        if self._cipher is not None:
            out = self._sealed(out)
        return [token for token in self.stream.send(out) if isinstance(token, Send)]

    def _sealed(self, out: list[Outgoing]) -> list[Outgoing]:
        """The batch as one ciphertext buffer; its tokens follow it, so each is reported only once the
        whole buffer is written (a DATA's permits never return before its bytes left)."""
        assert self._cipher is not None
        sealed = self._cipher.seal([part for message in out for part in message.parts])
        return [Outgoing((sealed,))] + [Outgoing((), message.token) for message in out if message.token is not None]

    def decode(self, data: memoryview) -> list[Message]:
        """Messages completed by ``data``; raises the codec's typed errors on bad bytes.

        A DATA payload may be a view of ``data``: use the messages before ``data``'s buffer is read into again
        (the tasks apply them to their machines at once, and the reader's copies each record out).
        """
        return [message_of(m) for m in self.decode_views(data)]

    def decode_views(self, data: memoryview) -> list[Message | DataView]:
        """:meth:`decode` with each DATA as the decoder's view instead of a message object (the reader's hot path)."""
        if not self.authenticated:
            data = self._authenticate(data)
        if self._cipher is not None:
            data = memoryview(self._cipher.open(data))
        messages = self._decoder.feed_views(data)
        if self._transcript is not None:
            for message in messages:
                self._transcript.record(self.label, "in", encode_frame(message_of(message)))
        return messages

    def _authenticate(self, data: memoryview) -> memoryview:
        """Feed the handshake; send its reply; return the bytes after it (empty until it completes).

        Raises the handshake's typed error (:class:`spec.auth.AuthError`) when it fails."""
        assert self._handshake is not None
        outcome = self._handshake.receive(data)
        if outcome is None:
            return memoryview(b"")
        if outcome.reply:
            try:
                self.stream.send([Outgoing((outcome.reply,))])
            except OSError:
                pass  # a refusal's reply is a courtesy; an acceptance's lost reply ends the connection anyway
        if isinstance(outcome, Rejected):
            raise outcome.error
        self._cipher = outcome.cipher
        self.stream.proven()
        return memoryview(outcome.rest)

    def end(self) -> None:
        """The peer closed: raises TruncatedInput if it closed inside a frame, an AuthError if it closed
        inside the handshake or inside an encrypted message."""
        if not self.authenticated:
            assert self._handshake is not None
            raise self._handshake.close()
        if self._cipher is not None:
            self._cipher.close()
        self._decoder.close()

    def close(self) -> None:
        self.stream.close()
