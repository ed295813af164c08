"""What a relay learns of a gRPC connection from its HTTP/2 frame headers, sans-IO (RFC 9113 3.4, 4.1, 6).

A relay that admits connections (``spec.admission.ConnectionAdmission``) needs each one's
``ConnectionUse`` without decoding what it carries. The client's preface and its acknowledgement of
the server's SETTINGS end the handshake; a client's HEADERS opens a stream; the stream carries a
request once its first gRPC message (a 5-byte prefix, its length, then the message) has come whole,
so a stream trickling part of one is still only waiting (gRPC ends it at its first-message
deadline); the server's END_STREAM (its trailers) or a RST_STREAM either way ends it. Payloads are
skipped, except the first 5 bytes of a stream's data: a watch holds at most a frame header's 9
bytes, the preface and ``max_streams`` streams of a few integers each.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec.admission import ConnectionUse

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADER_BYTES = 9
DATA, HEADERS, RST_STREAM, SETTINGS = 0x0, 0x1, 0x3, 0x4
END_STREAM = ACK = 0x1
PADDED = 0x8
GRPC_PREFIX_BYTES = 5
"""A gRPC message's prefix: a compressed flag and a 4-byte big-endian length."""


@dataclass(frozen=True)
class FrameHeader:
    length: int
    kind: int
    flags: int
    stream: int


@dataclass(frozen=True)
class DataBytes:
    """A piece of an unpadded DATA frame's payload: its first bytes (at most a gRPC prefix's) and its size."""

    stream: int
    head: bytes
    size: int


class FrameReader:
    """The frame headers of one direction of an HTTP/2 connection, and its unpadded DATA payloads' pieces."""

    __slots__ = ("_preface", "malformed", "_partial", "_skip", "_data_stream")

    def __init__(self, preface: bytes = b"") -> None:
        self._preface = preface
        """What is left to come of the preface; a byte that differs makes the stream ``malformed``."""
        self.malformed = False
        self._partial = b""
        self._skip = 0
        self._data_stream: int | None = None
        """The stream of the DATA payload being skipped, if its bytes are reported."""

    def feed(self, data: bytes) -> list[FrameHeader | DataBytes]:
        """What ``data``, the next bytes of the direction, holds (nothing once malformed)."""
        found: list[FrameHeader | DataBytes] = []
        at, end = 0, len(data)
        while at < end and not self.malformed:
            if self._preface:
                piece = data[at:at + len(self._preface)]
                self.malformed = not self._preface.startswith(piece)
                self._preface = self._preface[len(piece):]
                at += len(piece)
            elif self._skip:
                step = min(self._skip, end - at)
                if self._data_stream is not None:
                    found.append(DataBytes(self._data_stream, data[at:at + min(step, GRPC_PREFIX_BYTES)], step))
                self._skip -= step
                at += step
            else:
                piece = data[at:at + FRAME_HEADER_BYTES - len(self._partial)]
                at += len(piece)
                header = self._partial + piece
                if len(header) < FRAME_HEADER_BYTES:
                    self._partial = header
                    break
                self._partial = b""
                frame = FrameHeader(int.from_bytes(header[0:3], "big"), header[3], header[4],
                                    int.from_bytes(header[5:9], "big") & 0x7FFFFFFF)
                found.append(frame)
                self._skip = frame.length
                self._data_stream = frame.stream if frame.kind == DATA and not frame.flags & PADDED else None
        return found


class _Stream:
    """A client stream: the first bytes of its data (up to a gRPC prefix), how many came, and whether its
    first message came whole (``busy``)."""

    __slots__ = ("prefix", "received", "busy")

    def __init__(self) -> None:
        self.prefix = b""
        self.received = 0
        self.busy = False

    def carries_request(self) -> bool:
        """Its first gRPC message came whole."""
        if len(self.prefix) < GRPC_PREFIX_BYTES:
            return False
        return self.received >= GRPC_PREFIX_BYTES + int.from_bytes(self.prefix[1:5], "big")


class ConnectionWatch:
    """One connection's use, from the bytes relayed each way; at most ``max_streams`` open streams are watched
    (the server's SETTINGS_MAX_CONCURRENT_STREAMS: a client opening more gets them refused by the server)."""

    __slots__ = ("max_streams", "_client", "_server", "_settings_acked", "_streams", "_busy")

    def __init__(self, max_streams: int) -> None:
        self.max_streams = max_streams
        self._client = FrameReader(PREFACE)
        self._server = FrameReader()
        self._settings_acked = False
        self._streams: dict[int, _Stream] = {}
        self._busy = 0
        """Open streams whose first message came whole (a count: an idle connection holds no set)."""

    def from_client(self, data: bytes) -> None:
        for event in self._client.feed(data):
            if isinstance(event, DataBytes):
                self._client_data(event)
            elif event.kind == SETTINGS and event.flags & ACK:
                self._settings_acked = True
            elif (event.kind == HEADERS and event.stream and event.stream not in self._streams
                    and len(self._streams) < self.max_streams):
                self._streams[event.stream] = _Stream()
            elif event.kind == RST_STREAM:
                self._end(event.stream)

    def _client_data(self, data: DataBytes) -> None:
        stream = self._streams.get(data.stream)
        if stream is None or stream.busy:
            return
        stream.prefix += data.head[:GRPC_PREFIX_BYTES - len(stream.prefix)]
        stream.received += data.size
        if stream.carries_request():
            stream.busy = True
            self._busy += 1

    def from_server(self, data: bytes) -> None:
        for event in self._server.feed(data):
            if isinstance(event, FrameHeader) and (
                    event.kind == RST_STREAM or (event.kind in (HEADERS, DATA) and event.flags & END_STREAM)):
                self._end(event.stream)

    def _end(self, stream_id: int) -> None:
        stream = self._streams.pop(stream_id, None)
        if stream is not None and stream.busy:
            self._busy -= 1

    @property
    def use(self) -> ConnectionUse:
        if not self._settings_acked or self._client.malformed:
            return ConnectionUse.HANDSHAKE
        if self._busy:
            return ConnectionUse.BUSY
        return ConnectionUse.WAITING if self._streams else ConnectionUse.IDLE
