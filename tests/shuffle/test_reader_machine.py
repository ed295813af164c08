"""The reader machine's rules, one behaviour per test (the traces cover the wire exchanges)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from spec.shuffle import errors
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import DataMessage, TerminationControlMessage
from spec.shuffle.reader import ReaderMachine, per_writer_quota
from spec.shuffle.records import encode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Completed, Deliver, Failed, PauseReading, ResumeReading, UsageError

SETTINGS = ShuffleSettings(reader_max_memory=1000)


def data(seq: int, *records: bytes, writer: int = 0) -> DataMessage:
    payload = encode_records(records)
    return DataMessage(seq=seq, writer_id=writer, reader_id=0, checksum=payload_checksum(payload), payload=payload)


def connected(writers: int = 1, settings: ShuffleSettings = SETTINGS) -> ReaderMachine:
    r = ReaderMachine(0, 0, list(range(writers)), settings, 0.0)
    for w in range(writers):
        r.connected(w, 0.0)
    return r


@given(st.lists(st.lists(st.binary(max_size=8), max_size=4), max_size=6))
def test_records_are_surfaced_in_order_with_one_credit_per_data(batches: list[list[bytes]]) -> None:
    r = connected()
    seen: list[bytes] = []
    for seq, batch in enumerate(batches):
        step = r.received(0, data(seq, *batch), 0.0)
        assert [s.message.type.name for s in step.sends] == ["CREDIT_CONTROL_MESSAGE"]
        (deliver,) = [e for e in step.events if isinstance(e, Deliver)]
        seen += deliver.records
    assert seen == [rec for batch in batches for rec in batch]


@given(st.lists(st.lists(st.binary(max_size=8), max_size=4), max_size=6), st.integers(0, 6))
def test_the_frames_of_one_read_are_one_input_with_what_one_by_one_would_give(
        batches: list[list[bytes]], bad_at: int) -> None:
    messages = [data(seq, *batch) for seq, batch in enumerate(batches)]
    if bad_at < len(messages):  # a wrong seq fails the machine there: what follows is ignored
        messages.insert(bad_at, data(99, b"x"))
    one_by_one, batched = connected(), connected()
    sends, events = [], []
    for message in messages:
        step = one_by_one.received(0, message, 0.0)
        sends += step.sends
        events += step.events
    step = batched.received_all(0, messages, 0.0)
    assert step.sends == tuple(sends) and list(map(repr, step.events)) == list(map(repr, events))
    assert batched.quota(0) == one_by_one.quota(0) and batched.done == one_by_one.done


def test_quota_is_split_per_writer_and_charges_whole_bodies() -> None:
    assert per_writer_quota(ShuffleSettings(reader_max_memory=100), 3) == 33
    r = connected(writers=2, settings=ShuffleSettings(reader_max_memory=100))
    step = r.received(0, data(0, b"abc"), 0.0)
    assert r.quota(0) == 50 - 39 and r.quota(1) == 50 and PauseReading(writer_id=0) not in step.events
    step = r.received(0, data(1, b"abc"), 0.0)
    assert PauseReading(writer_id=0) in step.events and r.quota(0) == 50 - 78
    assert r.release(0, 0, 0.0).events == (ResumeReading(writer_id=0),) and r.quota(0) == 11
    assert r.release(0, 1, 0.0).events == () and r.quota(0) == 50


def test_stream_ends_only_when_every_writer_terminated_and_every_ack_was_written() -> None:
    r = connected(writers=2)
    (ack,) = r.received(0, TerminationControlMessage(seq=0, writer_id=0, reader_id=0), 0.0).sends
    assert ack.notify and ack.message.seq == 0
    assert r.send_completed(0, 0, 0.0).events == ()
    r.received(1, data(0, b"x", writer=1), 0.0)
    r.received(1, TerminationControlMessage(seq=1, writer_id=1, reader_id=0), 0.0)
    assert r.send_completed(1, 1, 0.0).events == (Completed(),) and r.done


def test_a_failed_checksum_surfaces_nothing_and_sends_no_credit() -> None:
    r = connected()
    bad = data(0, b"abc")
    step = r.received(0, DataMessage(seq=0, writer_id=0, reader_id=0, checksum=bad.checksum ^ 1, payload=bad.payload),
                      0.0)
    assert step.sends == () and [type(e) for e in step.events] == [Failed]


def test_checksums_disabled_accepts_any_checksum() -> None:
    r = connected(settings=ShuffleSettings(checksum_enabled=False))
    step = r.received(0, DataMessage(seq=0, writer_id=0, reader_id=0, checksum=0, payload=encode_records([b"abc"])),
                      0.0)
    assert [e for e in step.events if isinstance(e, Deliver)][0].records == (b"abc",)


def test_a_malformed_record_run_fails_with_a_codec_error() -> None:
    r = connected()
    payload = b"\x00\x00\x00\x09abc"
    (failed,) = r.received(0, DataMessage(seq=0, writer_id=0, reader_id=0, checksum=payload_checksum(payload),
                                          payload=payload), 0.0).events
    assert isinstance(failed, Failed) and failed.error.condition == "TRUNCATED_INPUT"


def test_failed_connects_fail_the_reader_once_they_span_the_connect_timeout_and_the_deadline_says_when() -> None:
    r = ReaderMachine(4, 0, [0, 1], SETTINGS, 0.0, connect_timeout=5.0)
    assert r.connect_failed(1, "refused", 10.0).deadline == 15.0
    assert r.connect_failed(1, "timed out", 14.0).events == ()  # the first failure starts the clock
    assert r.tick(14.9).events == ()
    (failed,) = r.tick(15.0).events
    assert isinstance(failed, Failed) and isinstance(failed.error, errors.WriterUnreachable)
    assert failed.error.condition == "STREAMING_SHUFFLE_WRITER_UNREACHABLE"
    assert failed.error.parameters == dict(shuffleId=4, writerId=1, readerId=0, timeoutMs=5000, cause="timed out")


def test_a_connection_that_comes_up_clears_its_failed_attempts() -> None:
    r = ReaderMachine(0, 0, [0], SETTINGS, 0.0, connect_timeout=5.0)
    r.connect_failed(0, "refused", 0.0)
    assert r.connected(0, 4.0).deadline is None
    assert r.tick(100.0).events == ()


def test_without_a_connect_timeout_the_reader_keeps_no_timer_as_in_spark() -> None:
    r = ReaderMachine(0, 0, [0], SETTINGS, 0.0)
    step = r.connect_failed(0, "refused", 0.0)
    assert step.deadline is None and r.tick(1e9).events == ()


def test_a_failed_connect_on_a_connected_channel_is_a_caller_bug() -> None:
    r = connected()
    with pytest.raises(UsageError):
        r.connect_failed(0, "refused", 0.0)
