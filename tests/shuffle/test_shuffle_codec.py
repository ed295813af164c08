"""The fast codec: full-range round trips, agreement with the layouts, typed errors with parameters."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shuffle_strategies import MESSAGES

from spec.shuffle import codec, errors
from spec.shuffle.layouts import FIELDS_BY_TYPE, MESSAGE_BODY
from spec.shuffle.messages import CreditMessage, DataMessage, Message, TerminationAckMessage


def _fields(message: Message) -> dict[str, int]:
    return {sub.name: getattr(message, sub.name) for sub in FIELDS_BY_TYPE[message.type].subcons}


@given(MESSAGES)
def test_body_and_frame_round_trip_over_full_signed_ranges(message: Message) -> None:
    body = codec.encode_body(message)
    assert len(body) == codec.body_length(message)
    assert codec.decode_body(body) == message
    frame = codec.encode_frame(message)
    assert frame[codec.FRAME_HEADER_LENGTH:] == body
    assert codec.decode_frame(frame, codec.SPARK_MAX_FRAME_LENGTH) == message


@given(MESSAGES)
def test_fast_codec_agrees_with_construct_layouts(message: Message) -> None:
    body = codec.encode_body(message)
    parsed = MESSAGE_BODY.parse(body)
    assert (parsed.header.type_id, parsed.header.seq) == (message.type, message.seq)
    assert {k: v for k, v in parsed.fields.items() if not k.startswith("_")} == _fields(message)
    payload = bytes(message.payload) if isinstance(message, DataMessage) else None
    assert MESSAGE_BODY.build({"header": {"type_id": message.type, "seq": message.seq},
                               "fields": _fields(message), "payload": payload}) == body


@given(st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_raise_a_codec_error(data: bytes) -> None:
    for decode in (codec.decode_body, codec.decode_frame):
        try:
            decode(data)
        except errors.CodecError as exc:
            assert exc.condition and exc.parameters is not None


def test_frame_parts_hand_the_payload_over_without_copying() -> None:
    payload = bytearray(b"x" * 1000)
    message = DataMessage(seq=1, writer_id=2, reader_id=3, checksum=0, payload=payload)
    head, body_payload = codec.encode_frame_parts(message)
    assert body_payload is payload
    assert head + body_payload == codec.encode_frame(message)


def test_decoded_payload_does_not_alias_the_input_buffer() -> None:
    frame = bytearray(codec.encode_frame(DataMessage(seq=0, writer_id=1, reader_id=2, checksum=0, payload=b"abc")))
    message = codec.decode_frame(frame)
    frame[-1] = 0
    assert isinstance(message, DataMessage) and bytes(message.payload) == b"abc"


def test_unknown_type_is_checked_before_the_sequence_number() -> None:
    with pytest.raises(errors.UnexpectedMessageType) as info:
        codec.decode_body(struct.pack(">i", 9))
    assert info.value.message_type == 9
    assert info.value.message == "Unknown message type: 9"
    assert info.value.condition == "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE"


@pytest.mark.parametrize(("data", "error", "params"), [
    (b"\x00\x00\x00", errors.TruncatedInput, {"what": "message type id", "needed": 4, "available": 3}),
    (codec.encode_body(CreditMessage(writer_id=1, reader_id=2))[:-1], errors.TruncatedInput,
     {"what": "CREDIT_CONTROL_MESSAGE", "needed": 24, "available": 23}),
    (codec.encode_body(TerminationAckMessage(seq=1, writer_id=2, reader_id=3)) + b"\x00", errors.TrailingBytes,
     {"what": "TERMINATION_ACK_MESSAGE", "trailing": 1}),
    (struct.pack(">iqiiiq", 1, 0, 3, 7, -1, 0) + b"ab", errors.NegativeDataSize, {"dataSize": -1, "available": 2}),
    (struct.pack(">iqiiiq", 1, 0, 3, 7, 3, 0) + b"ab", errors.DataSizeMismatch, {"dataSize": 3, "available": 2}),
    (struct.pack(">iqiiiq", 1, 0, 3, 7, 1, 0) + b"ab", errors.DataSizeMismatch, {"dataSize": 1, "available": 2}),
])
def test_body_errors_carry_their_parameters(data: bytes, error: type[errors.CodecError],
                                            params: dict[str, object]) -> None:
    with pytest.raises(error) as info:
        codec.decode_body(data)
    assert dict(info.value.parameters) == params
    assert info.value.to_json()["error"] == error.condition


def test_data_size_errors_use_sparks_message() -> None:
    with pytest.raises(errors.DataSizeMismatch, match=r"Invalid DataMessage dataSize=3, readable bytes after header=2"):
        codec.decode_body(struct.pack(">iqiiiq", 1, 0, 3, 7, 3, 0) + b"ab")


@pytest.mark.parametrize(("frame_length", "maximum"), [(12, 100), (0, 100), (-1, 100), (101, 100),
                                                       (codec.SPARK_MAX_FRAME_LENGTH + 1, codec.SPARK_MAX_FRAME_LENGTH)])
def test_frame_length_is_bounded(frame_length: int, maximum: int) -> None:
    head = struct.pack(">qbi", frame_length, 9, 0)
    with pytest.raises(errors.FrameLengthOutOfRange) as info:
        codec.check_frame_header(head, maximum)
    assert dict(info.value.parameters) == {"frameLength": frame_length, "minimum": 13, "maximum": maximum}


def test_frame_at_the_maximum_is_accepted() -> None:
    frame = codec.encode_frame(TerminationAckMessage(seq=1, writer_id=2, reader_id=3))
    assert codec.decode_frame(frame, len(frame)) == TerminationAckMessage(seq=1, writer_id=2, reader_id=3)


def test_wrong_transport_type_names_both_types() -> None:
    frame = bytearray(codec.encode_frame(CreditMessage(writer_id=1, reader_id=2)))
    frame[8] = 3
    with pytest.raises(errors.UnsupportedTransportMessage) as info:
        codec.decode_frame(frame)
    assert dict(info.value.parameters) == {"messageType": 3, "expected": 9}


def test_error_json_writes_integers_as_decimal_strings() -> None:
    error = errors.FrameLengthOutOfRange(2**62, 13, 100)
    assert error.to_json() == {"error": "FRAME_LENGTH_OUT_OF_RANGE", "frameLength": str(2**62), "minimum": "13",
                               "maximum": "100", "message": error.message}
