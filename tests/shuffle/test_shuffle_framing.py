"""The incremental frame decoder: any chunking gives the same messages; sizes bounded before allocation."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shuffle_strategies import SMALL_MESSAGES

from spec.shuffle import codec, errors
from spec.shuffle.framing import FrameDecoder, max_frame_from_reader, max_frame_from_writer
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.records import RECORD_LENGTH
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.writer import WriterMachine, flush_threshold


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
    frame = bytearray(codec.encode_frame(TerminationControlMessage(seq=0, writer_id=1, reader_id=2)))
    frame[8] = 4
    decoder = FrameDecoder()
    assert decoder.feed(frame[:12]) == []
    with pytest.raises(errors.UnsupportedTransportMessage):
        decoder.feed(frame[12:13])


def test_bad_body_inside_a_complete_frame_raises_the_body_error() -> None:
    bad = struct.pack(">qbi", 13 + 4, 9, 4) + struct.pack(">i", 77)
    with pytest.raises(errors.UnexpectedMessageType):
        FrameDecoder().feed(codec.encode_frame(TerminationControlMessage(seq=0, writer_id=1, reader_id=2)) + bad)


def test_large_payload_split_across_many_feeds() -> None:
    message = DataMessage(seq=3, writer_id=1, reader_id=2, checksum=0, payload=bytes(range(256)) * 200)
    frame = codec.encode_frame(message)
    decoder = FrameDecoder()
    out = [m for start in range(0, len(frame), 1000) for m in decoder.feed(frame[start:start + 1000])]
    assert out == [message]


def test_payload_of_a_buffered_frame_survives_later_feeds() -> None:
    first = DataMessage(seq=0, writer_id=1, reader_id=2, checksum=0, payload=b"A" * 100)
    second = DataMessage(seq=1, writer_id=1, reader_id=2, checksum=0, payload=b"B" * 100)
    stream = codec.encode_frame(first) + codec.encode_frame(second)
    decoder = FrameDecoder()
    chunk = bytearray(stream[50:170])
    assert decoder.feed(stream[:50]) == []
    (got,) = decoder.feed(chunk)
    chunk[:] = bytes(len(chunk))
    assert decoder.feed(stream[170:]) == [second]
    assert got == first


@pytest.mark.parametrize("lent", [False, True])
def test_a_lent_chunk_is_viewed_and_a_kept_one_copied(lent: bool) -> None:
    """A lent chunk (a receive buffer read into again after its messages were used) is not copied;
    otherwise the payload must outlive the chunk. Frames completed in the decoder's own buffer
    survive either way."""
    whole = DataMessage(seq=0, writer_id=1, reader_id=2, checksum=0, payload=b"A" * 100)
    split = DataMessage(seq=1, writer_id=1, reader_id=2, checksum=0, payload=b"B" * 100)
    stream = codec.encode_frame(whole) + codec.encode_frame(split)
    decoder = FrameDecoder(lent=lent)
    chunk = bytearray(stream[:200])
    (got,) = decoder.feed(memoryview(chunk))
    chunk[:] = bytes(len(chunk))
    (rest,) = decoder.feed(memoryview(bytearray(stream[200:])))
    assert rest == split
    assert bytes(got.payload) == (bytes(100) if lent else b"A" * 100)


# -- the longest frame each role can legitimately receive -----------------------------------------

def test_a_writer_accepts_exactly_the_control_frames_a_reader_sends() -> None:
    credit = codec.encode_frame(CreditMessage(writer_id=3, reader_id=7, num_messages=1))
    ack = codec.encode_frame(TerminationAckMessage(seq=6, writer_id=3, reader_id=7))
    assert max_frame_from_reader() == len(credit) == 37 and len(ack) < len(credit)
    decoder = FrameDecoder(max_frame_from_reader())
    assert decoder.feed(credit + ack) == [CreditMessage(writer_id=3, reader_id=7, num_messages=1),
                                          TerminationAckMessage(seq=6, writer_id=3, reader_id=7)]
    with pytest.raises(errors.FrameLengthOutOfRange):
        decoder.feed(codec.encode_frame(DataMessage(seq=0, writer_id=3, reader_id=7, checksum=0, payload=b"")))


@given(st.integers(min_value=1, max_value=64), st.lists(st.integers(min_value=0, max_value=100), max_size=60))
def test_no_data_frame_a_writer_sends_exceeds_the_reader_limit(buffer_size: int, sizes: list[int]) -> None:
    """Whatever the records (none longer than the limit's record size), every DATA fits the reader's bound."""
    settings = ShuffleSettings(network_buffer_size=buffer_size, writer_max_memory=1 << 20)
    machine = WriterMachine(0, 0, 1, settings, 0.0)
    machine.received("conn", CreditMessage(writer_id=0, reader_id=0, num_messages=1), 0.0)
    limit = max_frame_from_writer(settings, max_record_size=100)
    steps = [machine.write(0, bytes(size), 0.0) for size in sizes] + [machine.finish(0.0)]
    frames = [codec.encode_frame(send.message) for step in steps for send in step.sends]
    assert all(len(frame) <= limit for frame in frames)


def test_the_reader_limit_is_reached_by_a_buffer_just_below_the_threshold_and_one_largest_record() -> None:
    settings = ShuffleSettings(network_buffer_size=100, writer_max_memory=1 << 20)
    machine = WriterMachine(0, 0, 1, settings, 0.0)
    machine.received("conn", CreditMessage(writer_id=0, reader_id=0, num_messages=1), 0.0)
    below = flush_threshold(settings) - 1 - RECORD_LENGTH.size  # framed, it leaves the buffer one byte short
    assert machine.write(0, bytes(below), 0.0).sends == ()
    (send,) = machine.write(0, bytes(1000), 0.0).sends
    assert len(codec.encode_frame(send.message)) == max_frame_from_writer(settings, max_record_size=1000)
