"""The incremental frame decoder: any chunking gives the same messages; sizes bounded before allocation."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shuffle_strategies import SMALL_MESSAGES

from spec.shuffle import codec, errors
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import DataMessage, Message, TerminationControlMessage


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@given(st.lists(SMALL_MESSAGES, max_size=8), st.lists(st.integers(min_value=0), max_size=30))
def test_any_chunking_yields_the_messages_in_order(messages: list[Message], cuts: list[int]) -> None:
    stream = b"".join(codec.encode_frame(m) for m in messages)
    decoder = FrameDecoder()
    out: list[Message] = []
    for chunk in _chunks(stream, cuts):
        out += decoder.feed(chunk)
    assert out == messages
    assert decoder.at_boundary() and decoder.buffered == 0
    decoder.close()


@given(st.lists(SMALL_MESSAGES, min_size=1, max_size=4), st.data())
def test_a_stream_cut_inside_a_frame_is_truncated_at_close(messages: list[Message], data: st.DataObject) -> None:
    stream = b"".join(codec.encode_frame(m) for m in messages)
    cut = data.draw(st.integers(min_value=1, max_value=len(stream) - 1))
    decoder = FrameDecoder()
    decoder.feed(stream[:cut])
    boundaries = {sum(len(codec.encode_frame(m)) for m in messages[:i]) for i in range(len(messages) + 1)}
    if cut in boundaries:
        assert decoder.at_boundary()
        decoder.close()
    else:
        assert not decoder.at_boundary()
        with pytest.raises(errors.TruncatedInput):
            decoder.close()


def test_oversized_length_is_rejected_from_the_header_alone_byte_by_byte() -> None:
    decoder = FrameDecoder(max_frame_length=1024)
    head = struct.pack(">qbi", 1025, 9, 1012)
    for byte in head[:-1]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(errors.FrameLengthOutOfRange):
        decoder.feed(head[-1:])


def test_announced_length_allocates_nothing_before_the_body_arrives() -> None:
    decoder = FrameDecoder()
    head = struct.pack(">qbi", codec.DEFAULT_MAX_FRAME_LENGTH, 9, codec.DEFAULT_MAX_FRAME_LENGTH - 13)
    tracemalloc.start()
    try:
        decoder.feed(head + b"\x00" * 100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.buffered == 113
    assert peak < 64 * 1024


def test_wrong_transport_type_fails_as_soon_as_the_header_is_complete() -> None:
    frame = bytearray(codec.encode_frame(TerminationControlMessage(0, 1, 2)))
    frame[8] = 4
    decoder = FrameDecoder()
    assert decoder.feed(frame[:12]) == []
    with pytest.raises(errors.UnsupportedTransportMessage):
        decoder.feed(frame[12:13])


def test_bad_body_inside_a_complete_frame_raises_the_body_error() -> None:
    bad = struct.pack(">qbi", 13 + 4, 9, 4) + struct.pack(">i", 77)
    with pytest.raises(errors.UnexpectedMessageType):
        FrameDecoder().feed(codec.encode_frame(TerminationControlMessage(0, 1, 2)) + bad)


def test_large_payload_split_across_many_feeds() -> None:
    message = DataMessage(3, 1, 2, 0, bytes(range(256)) * 200)
    frame = codec.encode_frame(message)
    decoder = FrameDecoder()
    out = [m for start in range(0, len(frame), 1000) for m in decoder.feed(frame[start:start + 1000])]
    assert out == [message]


def test_payload_of_a_buffered_frame_survives_later_feeds() -> None:
    first, second = DataMessage(0, 1, 2, 0, b"A" * 100), DataMessage(1, 1, 2, 0, b"B" * 100)
    stream = codec.encode_frame(first) + codec.encode_frame(second)
    decoder = FrameDecoder()
    chunk = bytearray(stream[50:170])
    assert decoder.feed(stream[:50]) == []
    (got,) = decoder.feed(chunk)
    chunk[:] = bytes(len(chunk))
    assert decoder.feed(stream[170:]) == [second]
    assert got == first
