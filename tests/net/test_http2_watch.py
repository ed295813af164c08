"""A relay's view of a gRPC connection from HTTP/2 frame headers (spec/http2_watch.py): the handshake ends
with the client's SETTINGS acknowledgement, a stream carries a request once its first gRPC message came
whole, and the server's END_STREAM or a reset ends it; bytes may arrive cut anywhere."""

from __future__ import annotations

import pytest

from benchmarks.sync_attacks import frame
from spec.admission import ConnectionUse
from spec.http2_watch import ACK, DATA, END_STREAM, HEADERS, PADDED, PREFACE, RST_STREAM, SETTINGS, ConnectionWatch

HANDSHAKE = PREFACE + frame(SETTINGS, 0, 0) + frame(SETTINGS, ACK, 0)
FIRST_MESSAGE = b"\0" + (7).to_bytes(4, "big") + b"message"
"""A gRPC message: not compressed, 7 bytes."""


def _use(watch: ConnectionWatch) -> ConnectionUse:
    """The watch's verdict now (a call, so that mypy does not keep the last one it saw)."""
    return watch.use


def _fed(watch: ConnectionWatch, data: bytes, cut: int = 0) -> ConnectionWatch:
    """``data`` from the client, in pieces of ``cut`` bytes (0: at once)."""
    for at in range(0, len(data), cut or len(data) or 1):
        watch.from_client(data[at:at + (cut or len(data))])
    return watch


@pytest.mark.parametrize("cut", [0, 1, 4, 10])
def test_the_handshake_ends_with_the_clients_settings_ack(cut: int) -> None:
    watch = _fed(ConnectionWatch(16), PREFACE + frame(SETTINGS, 0, 0, b"\0" * 6), cut)
    assert _use(watch) == ConnectionUse.HANDSHAKE  # the slow-loris stops here
    assert _fed(watch, frame(SETTINGS, ACK, 0), cut).use == ConnectionUse.IDLE


def test_a_connection_that_is_not_http2_never_ends_its_handshake() -> None:
    watch = _fed(ConnectionWatch(16), b"GET / HTTP/1.1\r\n\r\n" + frame(SETTINGS, ACK, 0))
    assert _use(watch) == ConnectionUse.HANDSHAKE


@pytest.mark.parametrize("cut", [0, 1, 3, 12])
def test_a_stream_carries_a_request_once_its_first_message_came_whole(cut: int) -> None:
    watch = _fed(ConnectionWatch(16), HANDSHAKE + frame(HEADERS, 0x4, 1, b"h" * 20), cut)
    assert _use(watch) == ConnectionUse.WAITING
    _fed(watch, frame(DATA, 0, 1, FIRST_MESSAGE[:6]) + frame(DATA, 0, 1, FIRST_MESSAGE[6:-1]), cut)
    assert _use(watch) == ConnectionUse.WAITING  # part of a first message holds nothing
    _fed(watch, frame(DATA, 0, 1, FIRST_MESSAGE[-1:] + b"more"), cut)
    assert _use(watch) == ConnectionUse.BUSY


@pytest.mark.parametrize("end", [frame(HEADERS, END_STREAM | 0x4, 1, b"trailers"), frame(RST_STREAM, 0, 1, b"\0" * 4)],
                         ids=["trailers", "reset"])
def test_the_servers_end_of_the_stream_or_a_reset_ends_it(end: bytes) -> None:
    watch = _fed(ConnectionWatch(16), HANDSHAKE + frame(HEADERS, 0x4, 1) + frame(DATA, END_STREAM, 1, FIRST_MESSAGE))
    assert _use(watch) == ConnectionUse.BUSY  # the client's END_STREAM only half-closes: the answer is due
    watch.from_server(frame(SETTINGS, 0, 0) + frame(HEADERS, 0x4, 1, b"headers") + frame(DATA, 0, 1, b"answer"))
    assert _use(watch) == ConnectionUse.BUSY
    watch.from_server(end)
    assert _use(watch) == ConnectionUse.IDLE


def test_a_client_reset_ends_a_stream() -> None:
    watch = _fed(ConnectionWatch(16), HANDSHAKE + frame(HEADERS, 0x4, 1) + frame(HEADERS, 0x4, 3))
    _fed(watch, frame(RST_STREAM, 0, 1, b"\0" * 4))
    assert _use(watch) == ConnectionUse.WAITING
    _fed(watch, frame(RST_STREAM, 0, 3, b"\0" * 4))
    assert _use(watch) == ConnectionUse.IDLE


def test_padded_data_and_streams_beyond_the_limit_carry_no_request() -> None:
    watch = _fed(ConnectionWatch(1), HANDSHAKE + frame(HEADERS, 0x4, 1) + frame(HEADERS, 0x4, 3)
                 + frame(DATA, 0, 3, FIRST_MESSAGE) + frame(DATA, PADDED, 1, b"\0" + FIRST_MESSAGE))
    assert _use(watch) == ConnectionUse.WAITING
