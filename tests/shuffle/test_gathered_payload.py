"""Scatter-gather DATA: a payload gathered from the records' own buffers spells the same bytes,
checksum and frame as the copied one, on every trace vector too (Spark's decoder: the runtime
writer's interop test gathers part of its records)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from conformance.shuffle import vector_traces
from spec.shuffle import codec, writer as writer_machine
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import CreditMessage, DataMessage, Gathered
from spec.shuffle.records import decode_records, encode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.writer import WriterMachine

SETTINGS = ShuffleSettings(network_buffer_size=64 * 1024, checksum_enabled=True)
LONG = st.builds(lambda head, size: head + bytes([head[0] if head else 7]) * size, st.binary(max_size=8),
                 st.integers(writer_machine.GATHER_MIN, 3 * writer_machine.GATHER_MIN))
RECORD = st.one_of(st.binary(max_size=40), LONG, st.builds(bytearray, LONG))
"""Short records (copied), long ``bytes`` (gathered) and long mutable ones (copied)."""


def data_of(records: list[bytes | bytearray]) -> list[DataMessage]:
    w = WriterMachine(0, 0, 1, SETTINGS, 0.0)
    w.received("c", CreditMessage(writer_id=0, reader_id=0), 0.0)
    sends = [s for r in records for s in w.write(0, r, 0.0).sends] + list(w.finish(0.0).sends)
    return [s.message for s in sends if isinstance(s.message, DataMessage)]


@given(st.lists(RECORD, max_size=30))
def test_a_gathered_payload_is_the_copied_payloads_bytes_checksum_and_frame(records: list[bytes | bytearray]) -> None:
    data = data_of(records)
    assert [r for m in data for r in decode_records(m.payload)] == [bytes(r) for r in records]
    for m in data:
        contiguous = bytes(m.payload)
        assert m.checksum == payload_checksum(contiguous)
        flat = DataMessage(seq=m.seq, writer_id=m.writer_id, reader_id=m.reader_id, checksum=m.checksum,
                           payload=contiguous)
        assert b"".join(codec.encode_frame_parts(m)) == codec.encode_frame(m) == codec.encode_frame(flat)
        assert codec.decode_frame(codec.encode_frame(m)) == flat == m


def test_long_bytes_records_are_sent_from_their_own_buffers_and_mutable_ones_are_copied() -> None:
    big, mutable = bytes(8000), bytearray(8000)
    (m,) = data_of([b"ab", big, mutable, b"c"])
    assert isinstance(m.payload, Gathered)
    assert any(part is big for part in m.payload.parts)
    assert not any(part is mutable for part in m.payload.parts)
    assert bytes(m.payload) == encode_records([b"ab", big, mutable, b"c"])


def test_every_trace_vector_passes_with_every_record_gathered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_machine, "GATHER_MIN", 0)
    failed = [r for r in vector_traces.check_trace_vectors("reference") if not r.passed]
    assert not failed, failed[:3]
