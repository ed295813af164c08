"""Framed socket I/O: vectored sends, bounded reads, optional wire transcripts and fault injection.

The transport moves bytes and nothing else: it encodes the messages a machine asked for and
decodes what arrives with :class:`spec.shuffle.framing.FrameDecoder` (frame length bounded before
any body byte is buffered). A DATA payload goes to ``socket.sendmsg`` as its own buffer next to
the header, so it is never copied into a frame. Every blocking call polls a cancellation event
with a short timeout, so no wait outlives the task that started it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import replace
from typing import Callable, Final, Sequence, TextIO

from spec.shuffle.codec import DEFAULT_MAX_FRAME_LENGTH, encode_frame, encode_frame_parts
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import DataMessage, Message, Payload

POLL_S: Final = 0.05
"""How often a blocked socket call looks at its cancellation event."""

RECV_SIZE: Final = 256 * 1024
"""Bytes asked of the kernel per read; the receive buffer is reused, so this bounds a read's memory."""

FaultHook = Callable[[Message], Message]
"""Applied to each outgoing message after the machine produced it (tests only)."""


class Cancelled(Exception):
    """The wait was abandoned because the owning task is shutting down."""


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


def corrupt_payload(message: Message) -> Message:
    """Fault hook: flip one payload bit of every DATA *after* its checksum was computed."""
    if isinstance(message, DataMessage) and message.data_size:
        payload = bytearray(message.payload)
        payload[0] ^= 0x01
        return replace(message, payload=bytes(payload))
    return message


class Connection:
    """One framed TCP connection. Sends are serialised by a lock; one thread receives."""

    def __init__(
        self, sock: socket.socket, label: str, cancel: threading.Event, *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, transcript: Transcript | None = None,
        fault: FaultHook | None = None,
    ) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(POLL_S)
        self.sock = sock
        self.label = label
        self._cancel = cancel
        self._decoder = FrameDecoder(max_frame_length)
        self._buffer = bytearray(RECV_SIZE)
        self._transcript = transcript
        self._fault = fault
        self._send_lock = threading.Lock()
        self.bytes_sent = 0
        self.bytes_received = 0

    def send(self, messages: Sequence[Message]) -> None:
        """Write ``messages`` in order with as few ``sendmsg`` calls as the kernel allows."""
        parts: list[Payload] = []
        for message in messages:
            if self._fault is not None:
                message = self._fault(message)
            head, payload = encode_frame_parts(message)
            parts.append(head)
            if payload:
                parts.append(payload)
            if self._transcript is not None:
                self._transcript.record(self.label, "out", encode_frame(message))
        with self._send_lock:
            self._send_parts(parts)

    def _send_parts(self, parts: list[Payload]) -> None:
        views = [memoryview(p) for p in parts]
        while views:
            if self._cancel.is_set():
                raise Cancelled(self.label)
            try:
                sent = self.sock.sendmsg(views[:512])
            except socket.timeout:
                continue
            self.bytes_sent += sent
            while sent:
                first = len(views[0])
                if sent >= first:
                    sent -= first
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    def receive(self) -> list[Message] | None:
        """Messages completed by one bounded read: ``[]`` on timeout, ``None`` on a clean close.

        Raises the codec's typed errors on bad bytes, and TruncatedInput if the peer closes
        inside a frame.
        """
        try:
            n = self.sock.recv_into(self._buffer)
        except socket.timeout:
            return []
        if n == 0:
            self._decoder.close()
            return None
        self.bytes_received += n
        messages = self._decoder.feed(memoryview(self._buffer)[:n])
        if self._transcript is not None:
            for message in messages:
                self._transcript.record(self.label, "in", encode_frame(message))
        return messages

    def close(self) -> None:
        """Close the socket; safe to call from any thread, more than once."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

