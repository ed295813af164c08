"""Shuffle codec rates against a hand-written ``struct`` baseline and raw CRC32C speed.

For each message type: frames encoded and decoded per second by the codec (derived from the
construct layouts, bounds-checked) next to a baseline that packs/unpacks one hard-coded
``struct`` format and builds the same message object with no checks. For 32 KiB DATA: MB/s of
encode + CRC32C and decode + CRC32C verification, and of the incremental frame decoder, as a
fraction of raw CRC32C speed. Ratios > 1 mean slower than the baseline. Goal: codec within 2x
of the baseline; DATA handling close to CRC32C speed.
"""

from __future__ import annotations

import argparse
import struct
import time
from typing import Callable, Final

import crc32c

from spec.shuffle import codec
from spec.shuffle.checksum import payload_checksum, verify_payload
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Gathered,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)

PAYLOAD_SIZE: Final = 32 * 1024
_SMALL_DATA: Final = DataMessage(seq=5, writer_id=3, reader_id=7, checksum=payload_checksum(b"0123456789" * 10),
                                 payload=b"0123456789" * 10)
_BIG_PAYLOAD: Final = bytes(range(256)) * (PAYLOAD_SIZE // 256)
_BIG_DATA: Final = DataMessage(seq=6, writer_id=3, reader_id=7, checksum=payload_checksum(_BIG_PAYLOAD),
                               payload=_BIG_PAYLOAD)

# The baseline: formats written by hand (frame header + fixed body part in one format).
_B_DATA = struct.Struct(">qbiiqiiiq")
_B_CREDIT = struct.Struct(">qbiiqiii")
_B_TERM = struct.Struct(">qbiiqii")


def _baseline_encode(message: Message) -> bytes:
    if isinstance(message, DataMessage):
        payload = message.payload
        assert not isinstance(payload, Gathered)  # the baseline knows contiguous payloads only
        n = len(payload)
        return _B_DATA.pack(45 + n, 9, 32 + n, 1, message.seq, message.writer_id, message.reader_id, n,
                            message.checksum) + payload
    if isinstance(message, CreditMessage):
        return _B_CREDIT.pack(37, 9, 24, 2, message.seq, message.writer_id, message.reader_id, message.num_messages)
    return _B_TERM.pack(33, 9, 20, message.type, message.seq, message.writer_id, message.reader_id)


def _baseline_decode(frame: bytes) -> Message:
    type_id = frame[16]
    if type_id == 1:
        _, _, _, _, seq, w, r, _, checksum = _B_DATA.unpack_from(frame)
        return DataMessage(seq=seq, writer_id=w, reader_id=r, checksum=checksum, payload=frame[45:])
    if type_id == 2:
        _, _, _, _, seq, w, r, n = _B_CREDIT.unpack_from(frame)
        return CreditMessage(writer_id=w, reader_id=r, num_messages=n, seq=seq)
    _, _, _, _, seq, w, r = _B_TERM.unpack_from(frame)
    return TerminationControlMessage(seq=seq, writer_id=w,
                                     reader_id=r) if type_id == 3 else TerminationAckMessage(seq=seq, writer_id=w,
                                                                                             reader_id=r)


def rate(fn: Callable[[], object], seconds: float, rounds: int = 5) -> float:
    """Calls per second of ``fn``: the best of ``rounds`` rounds (the least disturbed by other load)."""
    best = 0.0
    for _ in range(rounds):
        batch, calls, start = 16, 0, time.perf_counter()
        while True:
            for _ in range(batch):
                fn()
            calls += batch
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / rounds:
                break
            batch *= 2
        best = max(best, calls / elapsed)
    return best


def _stream_decode(stream: bytes, count: int) -> Callable[[], object]:
    def run() -> None:
        decoder = FrameDecoder()
        got = 0
        for start in range(0, len(stream), 65536):
            got += len(decoder.feed(stream[start:start + 65536]))
        assert got == count
    return run


def _stream_verify(stream: bytes, count: int) -> Callable[[], object]:
    def run() -> None:
        decoder = FrameDecoder()
        for start in range(0, len(stream), 65536):
            for message in decoder.feed(stream[start:start + 65536]):
                assert isinstance(message, DataMessage)
                verify_payload(message)
        assert decoder.at_boundary()
    return run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=0.4, help="time per measurement (default 0.4)")


def main(args: argparse.Namespace) -> int:
    seconds = args.seconds
    messages: list[tuple[str, Message]] = [
        ("DATA 100 B", _SMALL_DATA), ("CREDIT", CreditMessage(writer_id=3, reader_id=7, num_messages=1)),
        ("TERMINATION_CONTROL", TerminationControlMessage(seq=6, writer_id=3, reader_id=7)),
        ("TERMINATION_ACK", TerminationAckMessage(seq=6, writer_id=3, reader_id=7)),
    ]
    print(f"{'message':<22}{'encode/s':>12}{'baseline/s':>12}{'ratio':>7}{'decode/s':>12}{'baseline/s':>12}{'ratio':>7}")
    for name, message in messages:
        frame = codec.encode_frame(message)
        assert _baseline_encode(message) == frame and _baseline_decode(frame) == message
        enc, enc_b = rate(lambda: codec.encode_frame(message), seconds), rate(lambda: _baseline_encode(message), seconds)
        dec, dec_b = rate(lambda: codec.decode_frame(frame), seconds), rate(lambda: _baseline_decode(frame), seconds)
        print(f"{name:<22}{enc:>12,.0f}{enc_b:>12,.0f}{enc_b / enc:>7.2f}{dec:>12,.0f}{dec_b:>12,.0f}{dec_b / dec:>7.2f}")

    count = 256
    small_stream = b"".join(codec.encode_frame(CreditMessage(writer_id=3, reader_id=7,
                                                             num_messages=1)) for _ in range(count))
    stream_rate = rate(_stream_decode(small_stream, count), seconds) * count
    print(f"\nframe decoder, CREDIT frames in 64 KiB chunks: {stream_rate:,.0f} messages/s")

    mb = PAYLOAD_SIZE / 1e6
    big_frame = codec.encode_frame(_BIG_DATA)
    crc = rate(lambda: crc32c.crc32c(_BIG_PAYLOAD), seconds) * mb
    copy = rate(lambda: bytes(bytearray(_BIG_PAYLOAD)), seconds) * mb

    def fresh(checksum: Callable[[bytes], int]) -> DataMessage:
        return DataMessage(seq=6, writer_id=3, reader_id=7, checksum=checksum(_BIG_PAYLOAD), payload=_BIG_PAYLOAD)

    def decode_verify() -> None:
        message = codec.decode_frame(big_frame)
        assert isinstance(message, DataMessage)
        verify_payload(message)

    def baseline_decode_verify() -> None:
        message = _baseline_decode(big_frame)
        assert isinstance(message, DataMessage) and not isinstance(message.payload, Gathered)
        assert crc32c.crc32c(message.payload) == message.checksum

    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("encode frame + CRC32C", lambda: codec.encode_frame(fresh(payload_checksum)),
         lambda: _baseline_encode(fresh(crc32c.crc32c))),
        ("encode frame parts + CRC32C (no copy)", lambda: codec.encode_frame_parts(fresh(payload_checksum)),
         lambda: _baseline_encode(fresh(crc32c.crc32c))),
        ("decode frame + verify CRC32C", decode_verify, baseline_decode_verify),
        ("frame decoder, 64 KiB chunks, + verify", _stream_verify(big_frame * 16, 16),
         baseline_decode_verify),
    ]
    print(f"\n32 KiB DATA: raw CRC32C {crc:,.0f} MB/s, a payload copy {copy:,.0f} MB/s")
    print(f"{'operation':<40}{'MB/s':>9}{'baseline':>10}{'ratio':>7}{'of CRC':>8}")
    for name, fn, base in rows:
        scale = 16 if name.startswith("frame decoder") else 1
        value = rate(fn, seconds) * mb * scale
        baseline = rate(base, seconds) * mb
        print(f"{name:<40}{value:>9,.0f}{baseline:>10,.0f}{baseline / value:>7.2f}{value / crc:>8.2f}")
    return 0
