"""Boundary rules of the writer and reader machines that the traces and model checks do not pin down:
the exact flush, permit, timeout and quota boundaries, and which acks and ids a peer may send."""

from __future__ import annotations

import pytest

from spec.shuffle import errors
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.reader import DATA_HEADER_LENGTH, ReaderMachine, per_writer_quota
from spec.shuffle.records import decode_records, encode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Completed, Deliver, Failed, PauseReading, ProducerBlocked, ResumeReading, UsageError
from spec.shuffle.writer import WriterMachine, flush_threshold

SMALL = ShuffleSettings(network_buffer_size=20, network_buffer_max_wait_time_ms=50, writer_max_memory=1)
"""Flush threshold 18 bytes; permits for two buffers of 20 bytes per reader."""


def bound_writer(readers: int = 1, settings: ShuffleSettings = SMALL, ack_timeout_ms: int = -1) -> WriterMachine:
    w = WriterMachine(3, 0, readers, settings, 0.0, ack_timeout_ms=ack_timeout_ms)
    for r in range(readers):
        w.received(f"c{r}", CreditMessage(writer_id=0, reader_id=r), 0.0)
    return w


def failure(step_events: tuple[object, ...]) -> errors.ShuffleError:
    (failed,) = step_events
    assert isinstance(failed, Failed)
    return failed.error


# -- writer ---------------------------------------------------------------------------------------

def test_a_buffer_of_exactly_the_flush_threshold_is_sent_and_one_byte_less_waits() -> None:
    assert flush_threshold(SMALL) == 18
    w = bound_writer()
    assert w.write(0, bytes(13), 0.0).sends == (), "4 + 13 = 17 bytes stay buffered"
    w = bound_writer()
    (send,) = w.write(0, bytes(14), 0.0).sends
    assert isinstance(send.message, DataMessage) and send.message.data_size == 18


def test_a_buffer_exactly_max_wait_old_is_flushed_by_the_next_write() -> None:
    w = bound_writer()
    assert w.write(0, b"a", 0.0).sends == ()
    (send,) = w.write(0, b"b", 0.05).sends
    assert isinstance(send.message, DataMessage) and decode_records(send.message.payload) == (b"a", b"b")


def test_a_blocking_write_first_hands_every_open_buffer_to_the_socket() -> None:
    """Otherwise the permits of buffers that stay open never return and the producer waits forever."""
    w = bound_writer(readers=2)  # permits for 4 buffers
    for _ in range(2):
        (full,) = w.write(0, bytes(14), 0.0).sends  # two buffers in flight
    assert w.write(0, b"y", 0.0).sends == ()  # a third one open, not full
    assert w.write(1, b"x", 0.0).sends == ()  # the fourth
    (full,) = w.write(1, bytes(14), 0.0).sends  # reader 1's buffer is full and in flight
    step = w.write(1, b"z", 0.0)  # no buffer and no permits: blocks
    assert step.events == (ProducerBlocked(),)
    flushed = [(s.peer, decode_records(s.message.payload)) for s in step.sends if isinstance(s.message, DataMessage)]
    assert flushed == [(0, (b"y",))]


def test_the_last_buffer_that_exactly_fits_the_permits_is_granted() -> None:
    w = bound_writer()
    assert w.permit_capacity == 40
    (first,) = w.write(0, bytes(14), 0.0).sends
    assert w.write(0, b"x", 0.0).events == () and w.permits_available == 0


def test_a_completed_write_returns_all_its_permits() -> None:
    w = bound_writer()
    (send,) = w.write(0, bytes(14), 0.0).sends
    assert w.permits_available == w.permit_capacity - 20
    w.send_completed(0, send.message.seq, 0.0)
    assert w.permits_available == w.permit_capacity


def test_the_termination_ack_timeout_fires_at_its_deadline() -> None:
    w = bound_writer(ack_timeout_ms=1000)
    w.finish(2.0)
    assert w.tick(2.999).events == ()
    assert isinstance(failure(w.tick(3.0).events), errors.TerminationAckTimeout)


@pytest.mark.parametrize("seq", [-1, 1, 5])
def test_an_ack_of_any_other_seq_than_the_terminators_fails_the_writer(seq: int) -> None:
    w = bound_writer()
    w.finish(0.0)  # the terminator is seq 0
    assert isinstance(failure(w.received("c0", TerminationAckMessage(seq=seq, writer_id=0, reader_id=0), 0.0).events),
                      errors.IncorrectSequenceNumber)


def test_an_ack_on_a_connection_not_bound_to_its_reader_fails_the_writer() -> None:
    w = bound_writer()
    w.finish(0.0)
    assert isinstance(failure(w.received("other", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0).events),
                      errors.ReaderAlreadyBound)


def test_the_writer_completes_only_once_every_reader_acked() -> None:
    w = bound_writer(readers=2)
    w.finish(0.0)
    assert w.received("c1", TerminationAckMessage(seq=0, writer_id=0, reader_id=1), 0.0).events == ()
    assert w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0).events == (Completed(),)


def test_data_produced_before_the_bind_is_sent_at_the_bind_in_order() -> None:
    w = WriterMachine(3, 0, 1, SMALL, 0.0)
    w.write(0, bytes(14), 0.0)
    w.finish(0.0)
    step = w.received("c0", CreditMessage(writer_id=0, reader_id=0), 0.0)
    assert [type(s.message) for s in step.sends] == [DataMessage, TerminationControlMessage]
    assert [s.message.seq for s in step.sends] == [0, 1]


# -- reader ---------------------------------------------------------------------------------------

def data(seq: int, *records: bytes, reader: int = 0) -> DataMessage:
    payload = encode_records(records)
    return DataMessage(seq=seq, writer_id=0, reader_id=reader, checksum=payload_checksum(payload), payload=payload)


def reader_with_quota(quota: int) -> ReaderMachine:
    r = ReaderMachine(0, 0, [0], ShuffleSettings(reader_max_memory=quota), 0.0)
    r.connected(0, 0.0)
    return r


BODY = DATA_HEADER_LENGTH + 4 + 3
"""The quota charge of a DATA holding one 3-byte record: the whole body."""


def test_reading_pauses_when_the_quota_is_exactly_used_up() -> None:
    step = reader_with_quota(BODY).received(0, data(0, b"abc"), 0.0)
    assert PauseReading(writer_id=0) in step.events
    step = reader_with_quota(BODY + 1).received(0, data(0, b"abc"), 0.0)
    assert PauseReading(writer_id=0) not in step.events


def test_reading_resumes_only_once_some_quota_is_free() -> None:
    r = reader_with_quota(2 * BODY)
    r.received(0, data(0, b"abc"), 0.0)
    r.received(0, data(1, b"abc"), 0.0)
    r.received(0, data(2, b"abc"), 0.0)  # -BODY left
    assert r.release(0, 0, 0.0).events == () and r.quota(0) == 0, "nothing free yet"
    assert r.release(0, 1, 0.0).events == (ResumeReading(writer_id=0),) and r.quota(0) == BODY


def test_the_per_writer_quota_rounds_down() -> None:
    assert per_writer_quota(ShuffleSettings(reader_max_memory=101), 2) == 50


@pytest.mark.parametrize("reader_max_memory", [1, 0, -7])
def test_the_per_writer_quota_is_at_least_one_byte(reader_max_memory: int) -> None:
    """As Spark's ``max(MAX_MEMORY / numWriters, 1)``: a paused reader can always resume once all is released."""
    assert per_writer_quota(ShuffleSettings(reader_max_memory=reader_max_memory), 2) == 1


def test_releasing_a_data_twice_is_a_caller_bug() -> None:
    r = reader_with_quota(1000)
    r.received(0, data(0, b"abc"), 0.0)
    r.release(0, 0, 0.0)
    with pytest.raises(UsageError):
        r.release(0, 0, 0.0)
    assert r.quota(0) == 1000


def test_a_zero_checksum_is_verified_like_any_other() -> None:
    good = data(0, b"abc")
    assert good.checksum != 0
    r = reader_with_quota(1000)
    step = r.received(0, DataMessage(seq=0, writer_id=0, reader_id=0, checksum=0, payload=good.payload), 0.0)
    assert isinstance(failure(step.events), errors.ChecksumVerificationFailed)


def test_data_naming_another_reader_fails_the_reader() -> None:
    r = reader_with_quota(1000)
    assert isinstance(failure(r.received(0, data(0, b"abc", reader=7), 0.0).events), errors.MismatchedChannelIds)


def test_the_termination_ack_echoes_the_terminators_seq_after_data() -> None:
    r = reader_with_quota(1000)
    step = r.received(0, data(0, b"abc"), 0.0)
    assert [type(e) for e in step.events] == [Deliver]
    (ack,) = r.received(0, TerminationControlMessage(seq=1, writer_id=0, reader_id=0), 0.0).sends
    assert isinstance(ack.message, TerminationAckMessage) and ack.message.seq == 1


# -- what the tables promise, stated without them ----------------------------------------------

def test_a_reader_closing_after_its_ack_does_not_fail_the_writer() -> None:
    w = bound_writer(readers=2)
    w.finish(0.0)
    w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0)
    assert w.connection_closed("c0", 0.0).events == () and not w.done


def test_a_repeated_ack_and_a_late_credit_are_ignored() -> None:
    w = bound_writer(readers=2)
    w.finish(0.0)
    assert w.received("c0", CreditMessage(writer_id=0, reader_id=0), 0.0).events == ()
    w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0)
    assert w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0).events == ()
    assert w.received("c1", TerminationAckMessage(seq=0, writer_id=0, reader_id=1), 0.0).events == (Completed(),)


def test_an_ack_before_the_terminator_is_the_peers_fault() -> None:
    w = bound_writer()
    step = w.received("c0", TerminationAckMessage(seq=-1, writer_id=0, reader_id=0), 0.0)
    assert isinstance(failure(step.events), errors.UnexpectedMessage)


def test_finishing_before_a_reader_bound_still_waits_for_its_ack() -> None:
    w = WriterMachine(3, 0, 1, SMALL, 0.0)
    w.finish(0.0)
    assert not w.done
    w.received("c0", CreditMessage(writer_id=0, reader_id=0), 0.0)
    assert w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0).events == (Completed(),)


def ack_written_to_writer_0() -> ReaderMachine:
    """A reader of writers 0 and 1 whose TERMINATION_ACK to writer 0 is already written."""
    r = ReaderMachine(0, 0, [0, 1], ShuffleSettings(), 0.0)
    r.connected(0, 0.0)
    r.connected(1, 0.0)
    r.received(0, TerminationControlMessage(seq=0, writer_id=0, reader_id=0), 0.0)
    r.send_completed(0, 0, 0.0)
    return r


def test_a_writer_closing_after_the_ack_was_written_is_a_clean_end() -> None:
    r = ack_written_to_writer_0()
    assert r.connection_closed(0, 0.0).events == () and not r.done


def test_data_after_the_ack_was_written_is_the_peers_fault() -> None:
    r = ack_written_to_writer_0()
    assert isinstance(failure(r.received(0, data(1), 0.0).events), errors.UnexpectedMessage)


def test_a_bad_checksum_is_reported_as_such() -> None:
    good = data(0, b"abc")
    r = reader_with_quota(1000)
    bad = DataMessage(seq=0, writer_id=0, reader_id=0, checksum=good.checksum ^ 1, payload=good.payload)
    assert isinstance(failure(r.received(0, bad, 0.0).events), errors.ChecksumVerificationFailed)


def test_time_settings_beyond_a_long_clamp_as_sparks_timestringas_does() -> None:
    settings = ShuffleSettings.from_dict({"spark.shuffle.streaming.writerConnectionTimeout": "9223372036854775807d"})
    assert settings.writer_connection_timeout_ms == 2**63 - 1


def test_int_max_is_a_valid_int_setting() -> None:
    settings = ShuffleSettings.from_dict({"spark.shuffle.streaming.networkBufferSize": "2147483647"})
    assert settings.network_buffer_size == 2**31 - 1


@pytest.mark.parametrize("raw", ["TRUE", "True", " true "])
def test_booleans_are_read_as_scala_reads_them(raw: str) -> None:
    assert ShuffleSettings.from_dict({"spark.shuffle.streaming.checksum.enabled": raw}).checksum_enabled is True
