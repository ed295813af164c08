"""Connection attacks on a sync server, from raw sockets and a gRPC channel (issue 37's reproductions).

- ``idle``: a connection that completes the HTTP/2 preface, acknowledges the server's SETTINGS and
  answers its PINGs, and opens no stream;
- ``slow-loris``: the preface and part of a HEADERS frame, the server's SETTINGS never acknowledged;
- ``silent-streams``: one gRPC connection opening ``DoPut`` streams that never send a message.

Every socket is served by one thread (a selector); ``close()`` ends them all.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import grpc

from spec.sync.flight import DO_PUT_METHOD, FLIGHT_SERVICE

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, SETTINGS, PING, GOAWAY = 0x1, 0x4, 0x6, 0x7
ACK = 0x1
KINDS = ("idle", "slow-loris")


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


class ConnectionCrowd:
    """``count`` raw HTTP/2 connections of one kind to ``host:port``; ``open`` says how many the server left open."""

    def __init__(self, host: str, port: int, kind: str, count: int) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown attack {kind!r}")
        self.kind = kind
        self._selector = selectors.DefaultSelector()
        self._buffers: dict[socket.socket, bytes] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        for _ in range(count):
            sock = socket.create_connection((host, port), timeout=10)
            sock.setblocking(False)
            if kind == "idle":
                sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
            else:  # a HEADERS frame announcing 64 bytes, of which 8 come
                sock.sendall(PREFACE + frame(SETTINGS, 0, 0)[:9] + frame(HEADERS, 0x4, 1, b"\0" * 64)[:17])
            self._buffers[sock] = b""
            self._selector.register(sock, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name=f"attack-{kind}", daemon=True)
        self._thread.start()

    @property
    def open(self) -> int:
        with self._lock:
            return len(self._buffers)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            for key, _ in self._selector.select(0.1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    self._drop(sock)
                    continue
                if self.kind == "idle":
                    self._answer(sock, self._buffers[sock] + data)

    def _answer(self, sock: socket.socket, data: bytes) -> None:
        """Acknowledge SETTINGS and PINGs, as a live client does; keep a partial frame for later."""
        replies = b""
        while len(data) >= 9:
            length = int.from_bytes(data[:3], "big")
            if len(data) < 9 + length:
                break
            kind, flags, payload = data[3], data[4], data[9:9 + length]
            if kind == SETTINGS and not flags & ACK:
                replies += frame(SETTINGS, ACK, 0)
            elif kind == PING and not flags & ACK:
                replies += frame(PING, ACK, 0, payload)
            data = data[9 + length:]
        with self._lock:
            if sock in self._buffers:
                self._buffers[sock] = data
        if replies:
            try:
                sock.sendall(replies)
            except OSError:
                self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._buffers.pop(sock, None)
        self._selector.unregister(sock)
        sock.close()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(5)
        with self._lock:
            for sock in self._buffers:
                sock.close()
            self._buffers.clear()
        self._selector.close()


class SilentStreams:
    """``count`` ``DoPut`` streams on one gRPC connection, none of which sends a message."""

    def __init__(self, target: str, count: int) -> None:
        self._release = threading.Event()
        self._channel = grpc.insecure_channel(target)
        put: grpc.StreamStreamMultiCallable[bytes, bytes] = self._channel.stream_stream(f"/{FLIGHT_SERVICE}/{DO_PUT_METHOD}")
        self.calls: list[Any] = [put(self._nothing()) for _ in range(count)]  # grpc's call futures

    def _nothing(self) -> Iterator[bytes]:
        self._release.wait()
        return
        yield b""  # a generator that sends nothing

    def ended(self) -> int:
        """Streams the server ended."""
        return sum(1 for call in self.calls if call.done())

    def close(self) -> None:
        self._release.set()
        for call in self.calls:
            call.cancel()
        self._channel.close()
