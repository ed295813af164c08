"""Streaming-shuffle frames for the wire log: header, message fields and the checksum verdict."""

from __future__ import annotations

import zlib
from typing import Final

from conformance.report.wirelog import Decoded, Undecodable
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.codec import DEFAULT_MAX_FRAME_LENGTH, FRAME_HEADER_LENGTH, check_frame_header, decode_body_at
from spec.shuffle.errors import CodecError
from spec.shuffle.messages import CreditMessage, DataMessage, Message


def checksum_verdict(message: DataMessage) -> tuple[str, str]:
    """(verdict, problem): whether a DATA's checksum is its payload's CRC32C, and if not, what it is."""
    want = payload_checksum(message.payload)
    if message.checksum == want:
        return "CRC32C ok", ""
    if message.checksum == 0:
        return "checksum 0 (checksums off)", ""
    if message.checksum == zlib.crc32(bytes(message.payload)):
        return "CRC32, not CRC32C", f"checksum {message.checksum} is the payload's CRC32; its CRC32C is {want}"
    return "CRC32C mismatch", f"checksum {message.checksum}; the payload's CRC32C is {want}"


def summarize(message: Message, frame_length: int) -> Decoded:
    kind = message.type.name.removesuffix("_UNSAFE_ROW").removesuffix("_MESSAGE")
    fields: dict[str, object] = {"type": kind, "seq": message.seq, "writer": message.writer_id,
                                 "reader": message.reader_id, "frame_bytes": frame_length}
    summary = f"{kind} seq={message.seq} w={message.writer_id} r={message.reader_id}"
    problem = ""
    if isinstance(message, DataMessage):
        verdict, problem = checksum_verdict(message)
        fields |= {"data_size": message.data_size, "checksum": message.checksum, "checksum_verdict": verdict}
        summary += f" size={message.data_size} checksum={message.checksum} ({verdict})"
    elif isinstance(message, CreditMessage):
        fields["num_messages"] = message.num_messages
        summary += f" num={message.num_messages}"
    return Decoded(frame_length, summary, fields, problem)


class ShuffleFrames:
    """OneWayMessage frames of Spark's transport, as :mod:`spec.shuffle.codec` reads them."""

    def next_frame(self, buffer: bytes, direction: str) -> Decoded | None:
        if len(buffer) < FRAME_HEADER_LENGTH:
            return None
        try:
            body_length = check_frame_header(buffer, DEFAULT_MAX_FRAME_LENGTH)
        except CodecError as exc:
            raise Undecodable(str(exc)) from exc
        end = FRAME_HEADER_LENGTH + body_length
        if len(buffer) < end:
            return None
        try:
            message = decode_body_at(buffer, FRAME_HEADER_LENGTH, end)
        except CodecError as exc:
            return Decoded(end, f"frame whose body does not decode ({exc.condition})", {"frame_bytes": end}, str(exc))
        return summarize(message, end)


CODEC: Final = ShuffleFrames()
