"""The writer machine's rules, one behaviour per test (the traces cover the wire exchanges)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from spec.shuffle import errors
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.records import decode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Completed, Failed, ProducerBlocked, ProducerUnblocked, UsageError
from spec.shuffle.transitions import WriterChannelState, WriterState
from spec.shuffle.writer import WriterMachine, flush_threshold, permit_capacity

SMALL = ShuffleSettings(network_buffer_size=16, network_buffer_max_wait_time_ms=50, writer_max_memory=1,
                        writer_connection_timeout_ms=1000)


def bound_writer(readers: int = 1, settings: ShuffleSettings = SMALL, flush_when_idle: bool = True) -> WriterMachine:
    w = WriterMachine(3, 0, readers, settings, 0.0, flush_when_idle=flush_when_idle)
    for r in range(readers):
        w.received(f"c{r}", CreditMessage(writer_id=0, reader_id=r, num_messages=1), 0.0)
    return w


def test_permit_capacity_is_sparks_formula() -> None:
    default = ShuffleSettings()
    assert permit_capacity(default, 1) == 32 * 1024 * 1024 - (32 * 1024 + 512)
    assert permit_capacity(default, 1000) == 1000 * 32768 * 2  # the lower bound wins for many readers
    with pytest.raises(ValueError, match="memory budget"):
        permit_capacity(ShuffleSettings(network_buffer_size=2**30), 2)


@given(st.integers(1, 10**6))
def test_flush_threshold_is_ninety_percent_rounded_down(size: int) -> None:
    threshold = flush_threshold(ShuffleSettings(network_buffer_size=size))
    assert threshold == size * 9 // 10 and threshold * 10 <= size * 9


def test_sequence_numbers_start_at_zero_per_reader_and_terminator_takes_the_next() -> None:
    w = bound_writer(readers=2)
    seqs: dict[int, list[int]] = {0: [], 1: []}
    for i in range(3):
        for r in (0, 1):
            for send in w.write(r, bytes(12), float(i)).sends:
                seqs[r].append(send.message.seq)
                w.send_completed(r, send.message.seq, float(i))
    for send in w.finish(5.0).sends:
        assert isinstance(send.message, (DataMessage, TerminationControlMessage))
        seqs[send.peer].append(send.message.seq)
    assert seqs == {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]}


def test_records_are_framed_whole_and_many_share_one_data() -> None:
    w = bound_writer(settings=ShuffleSettings(network_buffer_size=64, writer_max_memory=1))
    records = [b"a", b"", b"bcd", b"e" * 10]
    for rec in records:
        assert not w.write(0, rec, 0.0).sends
    (send, _) = w.finish(0.0).sends
    assert isinstance(send.message, DataMessage) and decode_records(send.message.payload) == tuple(records)


def test_an_oversized_record_is_sent_whole_and_takes_one_buffer_of_permits() -> None:
    w = bound_writer()
    (send,) = w.write(0, bytes(100), 0.0).sends
    assert isinstance(send.message, DataMessage) and send.message.data_size == 104
    assert w.permits_available == w.permit_capacity - 16


def test_blocked_producer_holds_one_record_and_resumes_in_order() -> None:
    w = bound_writer()
    first = w.write(0, bytes(12), 0.0).sends[0].message
    w.write(0, bytes(12), 0.0)
    step = w.write(0, b"held", 0.0)
    assert step.events == (ProducerBlocked(),) and w.blocked and w.permits_available == 0
    with pytest.raises(UsageError):
        w.write(0, b"more", 0.0)
    step = w.send_completed(0, first.seq, 0.0)
    assert step.events == (ProducerUnblocked(),) and not w.blocked
    (data, _) = w.finish(0.0).sends
    assert isinstance(data.message, DataMessage) and decode_records(data.message.payload) == (b"held",)


def test_deadline_is_the_periodic_flush_while_a_buffer_is_open() -> None:
    w = bound_writer()
    assert w.write(0, b"x", 0.01).deadline == pytest.approx(0.05)
    assert w.tick(0.049).sends == ()
    step = w.tick(0.05)
    assert len(step.sends) == 1 and step.deadline is None


def test_every_timer_fires_at_its_whole_millisecond_however_floats_add_up() -> None:
    """0.1 + 0.05 is 0.15000000000000002 and 0.12 - 0.07 is 0.04999999999999999 in floats: a timer a whole number
    of milliseconds away must still fire at the instant a millisecond clock reads (issue 43)."""
    settings = ShuffleSettings(network_buffer_size=1 << 20, network_buffer_max_wait_time_ms=50)
    w = bound_writer(settings=settings)
    for opened, period in ((0.0, 0.05), (0.06, 0.1), (0.11, 0.15)):
        w.write(0, b"x", opened)
        assert w.tick(period - 0.001).sends == () and len(w.tick(period).sends) == 1
    aged = bound_writer(settings=settings)
    aged.write(0, b"x", 0.07)
    assert aged.write(0, b"x", 0.119).sends == () and len(aged.write(0, b"x", 0.12).sends) == 1
    acked = WriterMachine(3, 0, 1, SMALL, 0.0, ack_timeout_ms=400)
    acked.received("c0", CreditMessage(writer_id=0, reader_id=0, num_messages=1), 0.0)
    acked.finish(0.2)
    assert acked.tick(0.599).events == () and acked.tick(0.6).events


def test_connection_timeout_names_the_first_unbound_reader() -> None:
    w = WriterMachine(3, 5, 3, SMALL, 10.0)
    w.received("c", CreditMessage(writer_id=5, reader_id=0, num_messages=1), 10.0)
    assert w.tick(10.999).events == ()
    (failed,) = w.tick(11.0).events
    assert isinstance(failed, Failed) and isinstance(failed.error, errors.WriterConnectionTimeout)
    assert failed.error.parameters == dict(shuffleId=3, writerId=5, timeoutMs=1000, readerId=1)


def test_waiting_forever_for_readers_has_no_deadline() -> None:
    w = WriterMachine(0, 0, 1, ShuffleSettings(writer_connection_timeout_ms=-1), 0.0)
    assert w.tick(10**9).events == () and w.tick(10**9).deadline is None


def test_acks_are_checked_before_they_count_and_duplicates_ignored() -> None:
    w = bound_writer(readers=2)
    w.finish(0.0)
    assert w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0).events == ()
    assert w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0).events == ()
    (failed,) = w.received("c1", TerminationAckMessage(seq=7, writer_id=0, reader_id=1), 0.0).events
    assert isinstance(failed, Failed) and failed.error.parameters["expSeqNum"] == 0
    assert w.error is failed.error and w.done


def test_input_after_failure_is_ignored() -> None:
    w = bound_writer()
    w.received("c0", DataMessage(seq=0, writer_id=0, reader_id=0, checksum=0, payload=b""), 0.0)
    assert w.done and w.write(0, b"x", 0.0).sends == () and w.tick(99.0).events == ()


@given(st.lists(st.tuples(st.integers(0, 1), st.binary(max_size=20)), max_size=30))
def test_a_batch_sends_what_the_same_writes_one_by_one_send(records: list[tuple[int, bytes]]) -> None:
    settings = ShuffleSettings(network_buffer_size=32, writer_max_memory=10**6)
    one_by_one, batched = bound_writer(2, settings), bound_writer(2, settings)
    sends = [send for reader_id, record in records for send in one_by_one.write(reader_id, record, 0.0).sends]
    step, taken = batched.write_batch(records, 0.0)
    assert taken == len(records) and step.sends == tuple(sends)
    assert [s.message for s in batched.finish(0.0).sends] == [s.message for s in one_by_one.finish(0.0).sends]


def test_a_batch_stops_after_the_record_that_blocks_the_producer() -> None:
    w = bound_writer()
    step, taken = w.write_batch([(0, bytes(12)), (0, bytes(12)), (0, b"held"), (0, b"later")], 0.0)
    assert taken == 3 and w.blocked and step.events == (ProducerBlocked(),) and len(step.sends) == 2
    with pytest.raises(UsageError):
        w.write_batch([(0, b"later")], 0.0)
    assert w.send_completed(0, 0, 0.0).events == (ProducerUnblocked(),)
    (data,) = w.write_batch([(0, b"later")], 0.0).step.sends
    assert isinstance(data.message, DataMessage) and decode_records(data.message.payload) == (b"held", b"later")


def test_completions_in_bulk_return_the_permits_one_by_one_would() -> None:
    w = bound_writer()
    w.write_batch([(0, bytes(12)), (0, bytes(12)), (0, b"held")], 0.0)
    assert w.blocked
    step = w.sends_completed([(0, 0), (0, 1)], 0.0)
    assert step.events == (ProducerUnblocked(),) and not w.blocked and w.in_flight == 0
    with pytest.raises(UsageError):
        w.sends_completed([(0, 1)], 0.0)


def test_the_credits_of_one_read_are_one_input() -> None:
    w = WriterMachine(3, 0, 2, SMALL, 0.0)
    step = w.received_all("c0", [CreditMessage(writer_id=0, reader_id=0), CreditMessage(writer_id=0, reader_id=0)], 0.0)
    assert w.channels[0].bound and step.sends == ()
    step = w.received_all("c1", [CreditMessage(writer_id=0, reader_id=1), CreditMessage(writer_id=0, reader_id=0),
                                 CreditMessage(writer_id=0, reader_id=1)], 0.0)
    (failed,) = step.events[1:]
    assert isinstance(failed, Failed) and isinstance(failed.error, errors.MismatchedChannelIds) and w.done


def test_the_idle_flush_sends_open_buffers_when_the_producer_is_idle_and_sparks_flush_the_default_does_not() -> None:
    settings = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=50, writer_max_memory=1)
    spark_like = WriterMachine(3, 0, 2, settings, 0.0)
    spark_like.received("c0", CreditMessage(writer_id=0, reader_id=0), 0.0)
    spark_like.write_batch([(0, b"a"), (1, b"b")], 0.0)
    assert spark_like.producer_idle(0.0).sends == ()
    eager = WriterMachine(3, 0, 2, settings, 0.0, flush_when_idle=True)
    eager.received("c0", CreditMessage(writer_id=0, reader_id=0), 0.0)
    eager.write_batch([(0, b"a"), (1, b"b"), (0, b"c")], 0.0)
    (data,) = eager.producer_idle(0.0).sends
    assert isinstance(data.message, DataMessage) and decode_records(data.message.payload) == (b"a", b"c")
    assert eager.channels[1].queued and eager.producer_idle(0.0).sends == ()


def test_a_record_that_only_grows_a_buffer_returns_the_shared_quiet_step() -> None:
    w = bound_writer(settings=ShuffleSettings(network_buffer_size=64, writer_max_memory=1))
    first = w.write(0, b"a", 0.0)
    assert w.write(0, b"b", 0.0) is w.write(0, b"c", 0.0) == first


# -- readers that leave (partial runs: an extension, docs/shuffle-runtime.md) --------------------

def test_a_reader_the_run_does_not_serve_gets_nothing_and_is_not_awaited(table_coverage: None) -> None:
    w = WriterMachine(3, 0, 2, SMALL, 0.0)
    assert w.reader_left(1, 0.0).events == ()
    w.received("c0", CreditMessage(writer_id=0, reader_id=0, num_messages=1), 0.0)
    for i in range(50):  # far beyond the permits: the left reader's records take none
        step = w.write(i % 2, bytes(12), 0.0)
        assert not any(isinstance(e, ProducerBlocked) for e in step.events)
        for send in step.sends:
            assert send.peer == 0
            w.send_completed(0, send.message.seq, 0.0)
    (terminator,) = w.finish(0.0).sends
    assert terminator.peer == 0 and w.channels[1].state is WriterChannelState.LEFT
    step = w.received("c0", TerminationAckMessage(seq=terminator.message.seq, writer_id=0, reader_id=0), 0.0)
    assert w.state is WriterState.COMPLETED and step.events == (Completed(),)


@pytest.mark.parametrize("when", ["open", "terminating"])
def test_a_reader_closing_before_its_ack_leaves_when_readers_may_leave(table_coverage: None, when: str) -> None:
    """Its unwritten DATA's permits return, the other reader is still served, the writer completes."""
    w = WriterMachine(3, 0, 2, SMALL, 0.0, readers_may_leave=True)
    for r in (0, 1):
        w.received(f"c{r}", CreditMessage(writer_id=0, reader_id=r, num_messages=1), 0.0)
    (unwritten,) = w.write(0, bytes(15), 0.0).sends  # a DATA to reader 0 whose write never completes
    if when == "terminating":
        w.finish(0.0)
    step = w.connection_closed("c0", 0.0)
    assert step.events == () and w.channels[0].state is WriterChannelState.LEFT
    assert w.permits_available == w.permit_capacity
    assert w.send_failed(0, unwritten.message.seq, "reset", 0.0).events == ()  # its write's late report
    if when == "open":
        assert w.write(0, bytes(15), 0.0).sends == ()  # dropped
        assert [send.peer for send in w.finish(0.0).sends] == [1]
    step = w.received("c1", TerminationAckMessage(seq=0, writer_id=0, reader_id=1), 0.0)
    assert w.state is WriterState.COMPLETED and step.events == (Completed(),)


def test_a_reader_leaving_with_an_open_buffer_gives_back_its_permits(table_coverage: None) -> None:
    """The open buffer is dropped and its networkBufferSize permits return: the writer's memory is all free again,
    and the other reader can use all of it."""
    w = bound_writer(readers=2)
    assert w.write(0, b"x", 0.0).sends == ()  # a record shorter than the flush threshold: the buffer stays open
    assert w.channels[0].buffer is not None
    assert w.permits_available == w.permit_capacity - SMALL.network_buffer_size
    w.reader_left(0, 0.0)
    assert w.channels[0].state is WriterChannelState.LEFT and w.permits_available == w.permit_capacity
    opened = 0
    while not w.blocked:  # every buffer reader 1 opens takes networkBufferSize permits until its write completes
        opened += len(w.write(1, bytes(15), 0.0).sends)
    assert opened == w.permit_capacity // SMALL.network_buffer_size


def test_without_readers_may_leave_an_early_close_still_fails_the_writer() -> None:
    w = bound_writer(readers=2)
    step = w.connection_closed("c0", 0.0)
    assert [type(e.error) for e in step.events if isinstance(e, Failed)] == [errors.ConnectionClosedBeforeTermination]


def test_leaving_frees_a_producer_blocked_on_the_readers_permits(table_coverage: None) -> None:
    """Reader 0 holds every permit in unwritten DATA and the held record: when it leaves, the record
    is dropped and the producer resumes; the last reader leaving completes a finished writer."""
    w = WriterMachine(3, 0, 2, SMALL, 0.0, readers_may_leave=True)
    for r in (0, 1):
        w.received(f"c{r}", CreditMessage(writer_id=0, reader_id=r, num_messages=1), 0.0)
    while not w.blocked:
        w.write(0, bytes(15), 0.0)
    step = w.connection_closed("c0", 0.0)
    assert ProducerUnblocked() in step.events and not w.blocked
    while not w.blocked:
        w.write(1, bytes(15), 0.0)
    step = w.send_failed(1, 0, "reset", 0.0)  # a failed write is a leave too
    assert ProducerUnblocked() in step.events and w.channels[1].state is WriterChannelState.LEFT
    assert w.reader_left(1, 0.0).events == ()  # LEFT/LEAVE: nothing more
    assert w.finish(0.0).events == (Completed(),)  # nobody is left to wait for
