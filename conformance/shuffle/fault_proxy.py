"""A TCP proxy between a streaming-shuffle reader and a writer that breaks one rule on purpose.

It forwards whole transport frames and applies one fault, once: flip a byte of a DATA payload
(the reader's checksum must catch it), drop a CREDIT after the handshake (the reader's credit
accounting is broken), or swap a DATA with the frame after it (a sequence gap). The monitor, watching
both legs, must name each. Everything else passes through unchanged.
"""

from __future__ import annotations

import socket
import struct
import threading
from enum import Enum
from typing import Final

from spec.shuffle.codec import FRAME_HEADER_LENGTH
from spec.shuffle.layouts import MessageType

_LENGTH: Final = struct.Struct(">q")
_TYPE_ID: Final = struct.Struct(">i")
DATA_PAYLOAD_OFFSET: Final = FRAME_HEADER_LENGTH + 32
"""A DATA frame's payload starts after the frame header and the 32-byte DATA header."""


class Fault(str, Enum):
    FLIP_PAYLOAD_BYTE = "flip-payload-byte"
    DROP_CREDIT = "drop-credit"
    REORDER = "reorder"


def _type_id(frame: bytes) -> int:
    return int(_TYPE_ID.unpack_from(frame, FRAME_HEADER_LENGTH)[0])


class FaultProxy:
    """Listens on ``host`` (port 0), forwards each accepted connection to ``upstream``, faults the first chance."""

    def __init__(self, host: str, upstream: tuple[str, int], fault: Fault) -> None:
        self.fault = fault
        self.applied = threading.Event()
        self._upstream = upstream
        self._lock = threading.Lock()
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, name="fault-proxy", daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                reader, _ = self._listener.accept()
            except OSError:
                return
            writer = socket.create_connection(self._upstream)
            self._sockets += [reader, writer]
            for source, target, to_reader in ((writer, reader, True), (reader, writer, False)):
                thread = threading.Thread(target=self._pump, args=(source, target, to_reader), daemon=True)
                self._threads.append(thread)
                thread.start()

    def _claim(self) -> bool:
        """True for exactly one caller: the fault is applied once."""
        with self._lock:
            if self.applied.is_set():
                return False
            self.applied.set()
            return True

    def _pump(self, source: socket.socket, target: socket.socket, to_reader: bool) -> None:
        held: bytes | None = None
        credits = 0
        try:
            for frame in _FrameIterator(source):
                kind = _type_id(frame)
                if to_reader and kind == MessageType.DATA_MESSAGE_UNSAFE_ROW:
                    if self.fault is Fault.FLIP_PAYLOAD_BYTE and len(frame) > DATA_PAYLOAD_OFFSET and self._claim():
                        flipped = bytearray(frame)
                        flipped[DATA_PAYLOAD_OFFSET] ^= 0xFF
                        frame = bytes(flipped)
                    elif self.fault is Fault.REORDER and held is None and self._claim():
                        held = frame
                        continue
                elif not to_reader and kind == MessageType.CREDIT_CONTROL_MESSAGE:
                    credits += 1
                    if self.fault is Fault.DROP_CREDIT and credits > 1 and self._claim():
                        continue
                target.sendall(frame)
                if held is not None:
                    target.sendall(held)
                    held = None
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop accepting and end every connection (shutdown wakes the threads blocked on them)."""
        for sock in [self._listener, *self._sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5.0)


class _FrameIterator:
    """Whole transport frames read from a socket, until it closes."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def __iter__(self) -> _FrameIterator:
        return self

    def __next__(self) -> bytes:
        while True:
            if len(self._buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(self._buffer)
                if length < FRAME_HEADER_LENGTH + _TYPE_ID.size or length > 1 << 28:
                    raise OSError(f"not a shuffle frame (length {length})")
                if len(self._buffer) >= length:
                    frame = bytes(self._buffer[:length])
                    del self._buffer[:length]
                    return frame
            chunk = self._sock.recv(65536)
            if not chunk:
                raise StopIteration
            self._buffer += chunk
