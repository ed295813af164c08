"""Generate the streaming-shuffle wire vectors: ``python -m conformance.shuffle.vectorgen [--check]``.

The vectors are data (Wycheproof-shaped); this tool owns their ids and counts. Each vector
states its expected outcome here, by hand: the generator asserts that the reference codec
agrees before it writes anything, and anchors the encoder on the bytes Spark's own encoder
produced (``shuffle-facts.md`` section 1), so the file cannot silently follow a codec bug.
``--check`` exits 1 when the committed file differs from what the generator produces.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Sequence

from conformance import vectorgen
from conformance.shuffle.vector_suite import check_wire_test, decode_outcome, error_params
from spec.shuffle import codec
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.errors import ShuffleError
from spec.shuffle.jsonform import to_json
from spec.shuffle.layouts import ONE_WAY_MESSAGE, MessageType
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)

VECTOR_DIR: Final = Path(__file__).resolve().parent / "vectors"
WIRE_FILE: Final = VECTOR_DIR / "wire_messages.json"
SCHEMA_NAME: Final = "wire_messages.schema.json"
GENERATOR_VERSION: Final = "1"

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SPEC: Final = "docs/spec/shuffle.md"

NOTES: Final = {
    "SparkReferenceBytes": ("Functionality", "Bytes produced by Spark 4.3.0's own encoder (shuffle-facts.md section 1)."),
    "EdgeInteger": ("EdgeCase", "A signed field at 0, -1 or the int32/int64 minimum or maximum: the codec carries the full Java range; semantic checks belong to the state machines."),
    "LargePayload": ("EdgeCase", "A payload around or above 32 KiB, the default networkBufferSize."),
    "EmptyPayload": ("EdgeCase", "A DATA message with no payload bytes (its CRC32C is 0)."),
    "ChecksumDisabled": ("Functionality", "spark.shuffle.streaming.checksum.enabled=false: the writer sends 0 and the reader does not verify, so any checksum value is carried as-is."),
    "ChecksumMismatch": ("ModifiedChecksum", "Decodes, fails verification: the body is well formed but the checksum is not the payload's CRC32C; a reader verifying checksums fails with STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED."),
    "CreditSeq": ("EdgeCase", "Spark never sets a CREDIT_CONTROL sequence number (it is 0 on the wire); the codec still carries any value."),
    "UnknownMessageType": ("ModifiedType", "A body type id outside 1..4; Spark throws IllegalArgumentException(\"Unknown message type: N\")."),
    "TypeBeforeSeq": ("EdgeCase", "Spark validates the type id before reading the sequence number, so a 4-byte body with a bad id fails as an unknown type, not as truncated."),
    "TruncatedBody": ("TruncatedInput", "The body ends inside its fixed fields; Spark fails with Netty's IndexOutOfBoundsException."),
    "DataSizeMismatch": ("ModifiedLength", "DATA data_size is negative or differs from the bytes after the 32-byte fixed part; Spark throws IllegalArgumentException(\"Invalid DataMessage dataSize=N, readable bytes after header=M\")."),
    "SparkIgnoresTrailingBytes": ("Legacy", "Bytes after the fields of a CREDIT_CONTROL, TERMINATION_CONTROL or TERMINATION_ACK body: Spark's decoder ignores them and accepts the message; the reference rejects them (TRAILING_BYTES). Either behaviour is acceptable; a compatible sender never writes them."),
    "FrameLength": ("ModifiedLength", "frame_length is below 13 (a frame holds at least its header) or above Spark's limit 2^31+6 (TransportFrameDecoder: \"Too large frame\" / \"Frame length should be positive\"). Spark itself accepts 9..12 at the frame layer and then fails decoding the message."),
    "ConfiguredFrameLimit": ("Functionality", "The group's maxFrameLength is a configured limit stricter than Spark's (Spark has no such setting and would accept the larger frame): decoders bound frame_length before allocating."),
    "WrongTransportType": ("ModifiedType", "The transport message type byte is not 9 (OneWayMessage). Spark's pipeline decodes other known types (an RpcRequest (3) frame would even reach the shuffle handler) and rejects unknown ones (\"Unknown message type: B\"); shuffle peers only ever send OneWayMessage, so the reference rejects every other type."),
    "TruncatedFrame": ("TruncatedInput", "The input ends inside the frame header or before frame_length bytes; a stream decoder reports it when the stream ends."),
    "FrameTrailingBytes": ("EdgeCase", "Bytes after one complete frame: decoding exactly one frame fails; a stream decoder returns the message and treats the rest as the start of the next frame (truncated when the stream ends there)."),
    "BodyLengthIgnored": ("Legacy", "The frame's body_length field disagrees with frame_length; Spark's decoder never reads it (the body is the rest of the frame) and neither does the reference, so the message decodes. A stricter implementation may reject it."),
}
"""Flag -> (bugType, description): every flag used is explained here, once."""

HEADER: Final = [
    "Streaming shuffle wire messages of Apache Spark 4.3.0 (spark-network-common, package org.apache.spark.network.shuffle.streaming).",
    "Each test gives the message as JSON (seq and checksum as decimal strings, payload as hex), the body hex and the whole transport frame hex.",
    "valid: encoding the message gives exactly body and frame; decoding them gives the message; with checksumVerification the payload's CRC32C equals checksum.",
    "invalid: decoding frame (a single whole frame, with the group's maxFrameLength) fails with error; so does decoding body when given. With a message, the bytes decode to it and checksum verification fails.",
    "acceptable: implementations may accept (decoding to message) or reject; the reference's behaviour is error when present, else message.",
]


@dataclass(slots=True)
class Group:
    name: str
    description: str
    max_frame_length: int = codec.SPARK_MAX_FRAME_LENGTH
    checksum_verification: bool = True
    tests: list[dict[str, object]] = field(default_factory=list)

    def add(self, comment: str, result: str, flags: Sequence[str], spec_ref: str, *,
            message: Message | None = None, body: bytes | None = None, frame: bytes,
            error: str | None = None) -> None:
        test: dict[str, object] = {"tcId": 0, "comment": comment, "flags": list(flags),
                                   "specRef": f"{SPEC}#{spec_ref}", "result": result}
        if message is not None:
            test["message"] = to_json(message)
        if body is not None:
            test["body"] = body.hex()
        test["frame"] = frame.hex()
        if error is not None:
            outcome = decode_outcome(frame, self.to_json(), frame=True)
            assert isinstance(outcome, ShuffleError) and outcome.condition == error, (comment, outcome)
            test["error"] = error
            test["errorParams"] = error_params(outcome)
        problem = check_wire_test(self.to_json(), test)
        assert problem is None, (comment, problem)
        self.tests.append(test)

    def to_json(self) -> dict[str, object]:
        return {"type": "WireMessageTest", "name": self.name, "description": self.description,
                "maxFrameLength": str(self.max_frame_length),
                "checksumVerification": self.checksum_verification, "tests": self.tests}


def _payload(n: int, salt: str = "") -> bytes:
    """Deterministic, incompressible payload bytes."""
    return hashlib.shake_128(f"streamwire{salt}:{n}".encode()).digest(n)


def _data(seq: int, writer: int, reader: int, payload: bytes, checksum: int | None = None) -> DataMessage:
    return DataMessage(seq=seq, writer_id=writer, reader_id=reader,
                       checksum=payload_checksum(payload) if checksum is None else checksum, payload=payload)


def _frame(body: bytes, *, length: int | None = None, transport: int = ONE_WAY_MESSAGE,
           body_length: int | None = None) -> bytes:
    """A frame around ``body``; the keyword arguments falsify one header field."""
    real = codec.FRAME_HEADER_LENGTH + len(body)
    return struct.pack(">qbi", real if length is None else length, transport,
                       len(body) if body_length is None else body_length) + body


def _body_with(type_id: int, seq: int, *fields: tuple[str, int]) -> bytes:
    return struct.pack(">iq", type_id, seq) + b"".join(struct.pack(">" + f, v) for f, v in fields)


# Bytes from Spark 4.3.0's encoder (shuffle-facts.md section 1): the codec must reproduce them.
SPARK_REFERENCE: Final[dict[Message, str]] = {
    _data(5, 3, 7, bytes.fromhex("0102030405")):
        "0000000000000032090000002500000001000000000000000500000003000000070000000500000000"
        "53518fab0102030405",
    CreditMessage(writer_id=3, reader_id=7,
                  num_messages=1): "0000000000000025090000001800000002000000000000000000000003000000070000"
                            "0001",
    TerminationControlMessage(seq=6, writer_id=3,
                              reader_id=7): "00000000000000210900000014000000030000000000000006000000"
                                        "0300000007",
    TerminationAckMessage(seq=6, writer_id=3,
                          reader_id=7): "000000000000002109000000140000000400000000000000060000000300"
                                    "000007",
}


def _valid(group: Group, comment: str, message: Message, flags: Sequence[str], ref: str) -> None:
    group.add(comment, "valid", flags, ref, message=message, body=codec.encode_body(message),
              frame=codec.encode_frame(message))


def _valid_groups() -> list[Group]:
    data = Group("data_messages", "DATA_MESSAGE_UNSAFE_ROW (type 1) with real CRC32C checksums, verified.")
    ref = "message-data"
    for message in SPARK_REFERENCE:
        assert codec.encode_frame(message).hex() == SPARK_REFERENCE[message], message
    _valid(data, "Spark's reference DATA: writer 3, reader 7, seq 5, 5-byte payload",
           _data(5, 3, 7, bytes.fromhex("0102030405")), ["SparkReferenceBytes"], ref)
    _valid(data, "empty payload, everything 0", _data(0, 0, 0, b""), ["EmptyPayload", "EdgeInteger"], ref)
    _valid(data, "1-byte payload 00", _data(1, 0, 1, b"\x00"), [], ref)
    _valid(data, "1-byte payload whose CRC32C has bit 31 set (unsigned in the int64)",
           _data(2, 1, 0, b"\x01"), [], ref)
    _valid(data, "8 zero bytes", _data(3, 2, 2, bytes(8)), [], ref)
    _valid(data, "seq -1", _data(-1, 0, 0, b"\xab"), ["EdgeInteger"], ref)
    _valid(data, "seq int64 max", _data(I64_MAX, 1, 2, b"max"), ["EdgeInteger"], ref)
    _valid(data, "seq int64 min", _data(I64_MIN, 1, 2, b"min"), ["EdgeInteger"], ref)
    _valid(data, "writer int32 max, reader int32 min", _data(7, I32_MAX, I32_MIN, b"ids"), ["EdgeInteger"], ref)
    _valid(data, "writer int32 min, reader int32 max", _data(8, I32_MIN, I32_MAX, b"ids"), ["EdgeInteger"], ref)
    _valid(data, "writer -1, reader -1", _data(9, -1, -1, b"neg"), ["EdgeInteger"], ref)
    _valid(data, "payload of 32768 bytes (one full default network buffer)",
           _data(10, 4, 5, _payload(32768)), ["LargePayload"], ref)
    _valid(data, "payload of 32769 bytes (above 32 KiB)", _data(11, 4, 5, _payload(32769)), ["LargePayload"], ref)

    unchecked = Group("data_messages_checksum_disabled",
                      "DATA with checksums disabled: the checksum field is carried, never verified.",
                      checksum_verification=False)
    _valid(unchecked, "checksum 0 as sent with checksums disabled", _data(0, 3, 7, b"hello", 0),
           ["ChecksumDisabled"], ref)
    _valid(unchecked, "checksum -1", _data(1, 3, 7, b"hello", -1), ["ChecksumDisabled", "EdgeInteger"], ref)
    _valid(unchecked, "checksum int64 max", _data(2, 3, 7, b"hello", I64_MAX), ["ChecksumDisabled", "EdgeInteger"], ref)
    _valid(unchecked, "checksum int64 min", _data(3, 3, 7, b"hello", I64_MIN), ["ChecksumDisabled", "EdgeInteger"], ref)

    credit = Group("credit_control_messages", "CREDIT_CONTROL_MESSAGE (type 2).")
    ref = "message-credit"
    _valid(credit, "Spark's reference CREDIT: writer 3, reader 7, 1 message, seq unset",
           CreditMessage(writer_id=3, reader_id=7, num_messages=1), ["SparkReferenceBytes"], ref)
    _valid(credit, "handshake credit for writer 0, reader 0", CreditMessage(writer_id=0, reader_id=0, num_messages=1),
           ["EdgeInteger"], ref)
    _valid(credit, "num_messages 0", CreditMessage(writer_id=1, reader_id=2, num_messages=0), ["EdgeInteger"], ref)
    _valid(credit, "num_messages -1", CreditMessage(writer_id=1, reader_id=2, num_messages=-1), ["EdgeInteger"], ref)
    _valid(credit, "num_messages int32 max", CreditMessage(writer_id=1, reader_id=2, num_messages=I32_MAX),
           ["EdgeInteger"], ref)
    _valid(credit, "num_messages int32 min", CreditMessage(writer_id=1, reader_id=2, num_messages=I32_MIN),
           ["EdgeInteger"], ref)
    _valid(credit, "writer int32 max, reader int32 min", CreditMessage(writer_id=I32_MAX, reader_id=I32_MIN,
                                                                       num_messages=1), ["EdgeInteger"], ref)
    _valid(credit, "seq -1", CreditMessage(writer_id=1, reader_id=2, num_messages=1, seq=-1), ["CreditSeq",
                                                                                               "EdgeInteger"], ref)
    _valid(credit, "seq int64 max", CreditMessage(writer_id=1, reader_id=2, num_messages=1, seq=I64_MAX),
           ["CreditSeq", "EdgeInteger"], ref)

    term = Group("termination_control_messages", "TERMINATION_CONTROL_MESSAGE (type 3).")
    ref = "message-termination-control"
    _valid(term, "Spark's reference TERMINATION_CONTROL: writer 3, reader 7, seq 6",
           TerminationControlMessage(seq=6, writer_id=3, reader_id=7), ["SparkReferenceBytes"], ref)
    _valid(term, "seq 0 (no DATA was sent)", TerminationControlMessage(seq=0, writer_id=0, reader_id=0),
           ["EdgeInteger"], ref)
    _valid(term, "seq -1", TerminationControlMessage(seq=-1, writer_id=1, reader_id=1), ["EdgeInteger"], ref)
    _valid(term, "seq int64 max", TerminationControlMessage(seq=I64_MAX, writer_id=1, reader_id=1), ["EdgeInteger"],
           ref)
    _valid(term, "seq int64 min", TerminationControlMessage(seq=I64_MIN, writer_id=1, reader_id=1), ["EdgeInteger"],
           ref)
    _valid(term, "writer int32 min, reader int32 max",
           TerminationControlMessage(seq=1, writer_id=I32_MIN, reader_id=I32_MAX), ["EdgeInteger"], ref)
    _valid(term, "writer -1, reader -1", TerminationControlMessage(seq=1, writer_id=-1, reader_id=-1),
           ["EdgeInteger"], ref)

    ack = Group("termination_ack_messages", "TERMINATION_ACK_MESSAGE (type 4).")
    ref = "message-termination-ack"
    _valid(ack, "Spark's reference TERMINATION_ACK: writer 3, reader 7, seq 6",
           TerminationAckMessage(seq=6, writer_id=3, reader_id=7), ["SparkReferenceBytes"], ref)
    _valid(ack, "seq 0, ids 0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), ["EdgeInteger"], ref)
    _valid(ack, "seq -1", TerminationAckMessage(seq=-1, writer_id=5, reader_id=6), ["EdgeInteger"], ref)
    _valid(ack, "seq int64 max", TerminationAckMessage(seq=I64_MAX, writer_id=5, reader_id=6), ["EdgeInteger"], ref)
    _valid(ack, "seq int64 min", TerminationAckMessage(seq=I64_MIN, writer_id=5, reader_id=6), ["EdgeInteger"], ref)
    _valid(ack, "writer int32 max, reader int32 min", TerminationAckMessage(seq=2, writer_id=I32_MAX,
                                                                            reader_id=I32_MIN), ["EdgeInteger"], ref)
    return [data, unchecked, credit, term, ack]


def _bad_body(group: Group, comment: str, body: bytes, error: str, flags: Sequence[str], ref: str,
              result: str = "invalid", message: Message | None = None) -> None:
    group.add(comment, result, flags, ref, message=message, body=body, frame=_frame(body), error=error)


def _invalid_body_groups() -> list[Group]:
    unknown = Group("unknown_message_types", "Body type ids other than 1..4.")
    cond, ref = "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE", "common-header"
    for type_id in (0, 5, -1, I32_MAX, I32_MIN):
        _bad_body(unknown, f"type id {type_id} with a termination-sized body",
                  _body_with(type_id, 0, ("i", 1), ("i", 2)), cond, ["UnknownMessageType"], ref)
    _bad_body(unknown, "type id 9 alone (4 bytes): rejected for the type before seq is read",
              struct.pack(">i", 9), cond, ["UnknownMessageType", "TypeBeforeSeq"], ref)

    truncated = Group("truncated_bodies", "Bodies that end inside their fixed fields.")
    cond = "TRUNCATED_INPUT"
    _bad_body(truncated, "empty body", b"", cond, ["TruncatedBody"], "common-header")
    _bad_body(truncated, "3 bytes of a type id", b"\x00\x00\x00", cond, ["TruncatedBody"], "common-header")
    _bad_body(truncated, "type id 1 alone (valid id, no seq)", struct.pack(">i", 1), cond,
              ["TruncatedBody", "TypeBeforeSeq"], "common-header")
    _bad_body(truncated, "11 of the 12 header bytes", _body_with(2, 0)[:11], cond, ["TruncatedBody"], "common-header")
    whole = {
        MessageType.DATA_MESSAGE_UNSAFE_ROW: (codec.encode_body(_data(0, 1, 2, b"")), "message-data"),
        MessageType.CREDIT_CONTROL_MESSAGE: (codec.encode_body(CreditMessage(writer_id=1, reader_id=2)),
                                             "message-credit"),
        MessageType.TERMINATION_CONTROL_MESSAGE: (codec.encode_body(TerminationControlMessage(seq=0, writer_id=1,
                                                                                              reader_id=2)),
                                                  "message-termination-control"),
        MessageType.TERMINATION_ACK_MESSAGE: (codec.encode_body(TerminationAckMessage(seq=0, writer_id=1, reader_id=2)),
                                              "message-termination-ack"),
    }
    for kind, (body, ref) in whole.items():
        _bad_body(truncated, f"{kind.name} one byte short of its {len(body)}-byte fixed part",
                  body[:-1], cond, ["TruncatedBody"], ref)
    _bad_body(truncated, "DATA header only (12 bytes)", whole[MessageType.DATA_MESSAGE_UNSAFE_ROW][0][:12],
              cond, ["TruncatedBody"], "message-data")

    sizes = Group("data_size_mismatch", "DATA whose data_size disagrees with the bytes present.")
    ref = "message-data"

    def data_body(data_size: int, payload: bytes) -> bytes:
        return _body_with(1, 0, ("i", 3), ("i", 7), ("i", data_size), ("q", payload_checksum(payload))) + payload

    _bad_body(sizes, "data_size -1, no payload", data_body(-1, b""), "NEGATIVE_DATA_SIZE", ["DataSizeMismatch"], ref)
    _bad_body(sizes, "data_size int32 min, 4 payload bytes", data_body(I32_MIN, b"abcd"), "NEGATIVE_DATA_SIZE",
              ["DataSizeMismatch", "EdgeInteger"], ref)
    _bad_body(sizes, "data_size 6 but 5 payload bytes (missing bytes)", data_body(6, b"12345"),
              "DATA_SIZE_MISMATCH", ["DataSizeMismatch"], ref)
    _bad_body(sizes, "data_size 4 but 5 payload bytes (trailing byte)", data_body(4, b"12345"),
              "DATA_SIZE_MISMATCH", ["DataSizeMismatch"], ref)
    _bad_body(sizes, "data_size 0 with 1 trailing byte", data_body(0, b"\x00"), "DATA_SIZE_MISMATCH",
              ["DataSizeMismatch"], ref)
    _bad_body(sizes, "data_size int32 max, no payload (nothing may be allocated)", data_body(I32_MAX, b""),
              "DATA_SIZE_MISMATCH", ["DataSizeMismatch", "EdgeInteger"], ref)

    checksums = Group("checksum_verification", "Well-formed DATA whose checksum is not the payload's CRC32C.")
    ref = "checksum"
    payload = b"records"
    crc = payload_checksum(payload)
    for comment, checksum in (("checksum off by one", crc ^ 1), ("checksum 0 while verification is on", 0),
                              ("real CRC32C with high 32 bits set", crc | (1 << 32))):
        corrupt = _data(4, 3, 7, payload, checksum)
        _bad_body(checksums, comment, codec.encode_body(corrupt), "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED",
                  ["ChecksumMismatch"], ref, message=corrupt)

    trailing = Group("fixed_body_trailing_bytes",
                     "Bytes after a fixed-size body: Spark ignores them, the reference rejects them.")
    cases: tuple[tuple[Message, bytes, str], ...] = (
        (CreditMessage(writer_id=3, reader_id=7, num_messages=1), b"\x00", "message-credit"),
        (TerminationControlMessage(seq=6, writer_id=3, reader_id=7), b"\x00\x00\x00\x01",
         "message-termination-control"),
        (TerminationAckMessage(seq=6, writer_id=3, reader_id=7), b"\xff", "message-termination-ack"),
    )
    for message, extra, ref in cases:
        _bad_body(trailing, f"{message.type.name} followed by {len(extra)} extra byte(s)",
                  codec.encode_body(message) + extra, "TRAILING_BYTES", ["SparkIgnoresTrailingBytes"], ref,
                  result="acceptable", message=message)
    return [unknown, truncated, sizes, checksums, trailing]


def _invalid_frame_groups() -> list[Group]:
    body = codec.encode_body(TerminationControlMessage(seq=6, writer_id=3, reader_id=7))
    lengths = Group("frame_length", "frame_length outside 13 .. 2^31+6 (Spark's own limit).")
    cond, ref = "FRAME_LENGTH_OUT_OF_RANGE", "frame"
    for length, why in ((0, "0"), (8, "8 (the length field alone)"), (9, "9 (Spark's frame layer accepts it)"),
                        (12, "12 (one byte short of a frame header)"), (-1, "-1"), (I64_MIN, "int64 min"),
                        (codec.SPARK_MAX_FRAME_LENGTH + 1, "2^31+7 (Spark: Too large frame)"),
                        (I64_MAX, "int64 max")):
        lengths.add(f"frame_length {why}", "invalid", ["FrameLength"], ref, frame=_frame(body, length=length),
                    error=cond)

    limit = Group("frame_length_configured_limit", "A decoder configured with maxFrameLength 64.",
                  max_frame_length=64)
    at_limit = _data(0, 3, 7, _payload(19, "limit"))
    _valid(limit, "a 64-byte frame is accepted at a 64-byte limit", at_limit, ["ConfiguredFrameLimit"], "frame")
    over = codec.encode_body(_data(1, 3, 7, _payload(20, "limit")))
    limit.add("a 65-byte frame is rejected from its header alone", "invalid", ["ConfiguredFrameLimit"], "frame",
              frame=_frame(over), error=cond)
    limit.add("a header announcing 2^31+6 bytes, no body: rejected before allocating", "invalid",
              ["ConfiguredFrameLimit"], "frame", frame=_frame(b"", length=codec.SPARK_MAX_FRAME_LENGTH), error=cond)

    transport = Group("transport_message_type", "Frames whose transport type byte is not OneWayMessage (9).")
    for type_byte, name in ((0, "ChunkFetchRequest"), (3, "RpcRequest"), (4, "RpcResponse"), (8, "StreamFailure"),
                            (10, "UploadStream"), (-1, "User"), (127, "unknown 127"), (-128, "unknown -128")):
        transport.add(f"transport type {type_byte} ({name}) around a valid body", "invalid", ["WrongTransportType"],
                      "frame", frame=_frame(body, transport=type_byte), error="UNSUPPORTED_TRANSPORT_MESSAGE_TYPE")

    bounds = Group("frame_boundaries", "Input that is not exactly one whole frame.")
    whole = _frame(body)
    for comment, frame, error, flag in (
        ("empty input", b"", "TRUNCATED_INPUT", "TruncatedFrame"),
        ("12 of the 13 frame header bytes", whole[:12], "TRUNCATED_INPUT", "TruncatedFrame"),
        ("frame header only, body missing", whole[:13], "TRUNCATED_INPUT", "TruncatedFrame"),
        ("one byte short of frame_length", whole[:-1], "TRUNCATED_INPUT", "TruncatedFrame"),
        ("one byte after the frame", whole + b"\x00", "TRAILING_BYTES", "FrameTrailingBytes"),
        ("two whole frames", whole + whole, "TRAILING_BYTES", "FrameTrailingBytes"),
    ):
        bounds.add(comment, "invalid", [flag], "frame", frame=frame, error=error)

    lenient = Group("frame_body_length_ignored", "body_length disagrees with frame_length; both decoders ignore it.")
    message = TerminationControlMessage(seq=6, writer_id=3, reader_id=7)
    for declared in (0, -1, I32_MAX):
        lenient.add(f"body_length {declared} instead of {len(body)}", "acceptable", ["BodyLengthIgnored"], "frame",
                    message=message, frame=_frame(body, body_length=declared))
    return [lengths, limit, transport, bounds, lenient]


def generate() -> dict[str, object]:
    """The whole vector file as a JSON-ready object, with tcIds assigned in order."""
    groups = _valid_groups() + _invalid_body_groups() + _invalid_frame_groups()
    tc_id = 0
    used: set[str] = set()
    for group in groups:
        for test in group.tests:
            tc_id += 1
            test["tcId"] = tc_id
            used.update(test["flags"])  # type: ignore[arg-type]
    assert used == set(NOTES), f"flags without a note or notes without a flag: {used ^ set(NOTES)}"
    return {
        "algorithm": "StreamingShuffleWire",
        "schema": SCHEMA_NAME,
        "sparkVersion": "4.3.0",
        "generatorVersion": GENERATOR_VERSION,
        "numberOfTests": tc_id,
        "header": HEADER,
        "notes": {flag: {"bugType": bug, "description": text} for flag, (bug, text) in NOTES.items()},
        "testGroups": [group.to_json() for group in groups],
    }


def render() -> str:
    """The file's exact text: 2-space JSON, one trailing newline."""
    return vectorgen.render(generate())


def main(argv: Sequence[str] | None = None) -> int:
    return vectorgen.write_or_check("conformance.shuffle.vectorgen", __doc__, WIRE_FILE, render, argv)


if __name__ == "__main__":
    sys.exit(main())
