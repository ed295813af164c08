"""Table totality: every (state, event) pair of both channel tables is either a listed transition or
has its defined error, and the machines honour both."""

from __future__ import annotations

from typing import Any

import pytest

from spec.shuffle import errors
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Failed, UsageError
from spec.shuffle.transitions import (
    READER_TABLE,
    WRITER_TABLE,
    ReaderChannelEvent,
    ReaderChannelState,
    Moved,
    Rejected,
    Table,
    WriterChannelEvent,
    WriterChannelState,
)
from spec.shuffle.writer import WriterMachine
from tests.shuffle.table_lookups import observed

TABLES = [(WRITER_TABLE, WriterChannelState, WriterChannelEvent), (READER_TABLE, ReaderChannelState, ReaderChannelEvent)]


@pytest.mark.parametrize("table,states,events", TABLES, ids=["writer", "reader"])
def test_every_pair_is_listed_or_rejected_with_a_defined_error(table: Table[Any, Any], states: Any, events: Any) -> None:
    pairs = {(s, e) for s in states for e in events}
    listed, rejected = set(table.transitions), set(table.rejections)
    assert listed | rejected == pairs and not listed & rejected
    for pair, error in table.rejections.items():
        assert error is UsageError or issubclass(error, errors.ShuffleError), pair
    into_failed = {p for p, target in table.transitions.items() if target is states.FAILED}
    assert set(table.failures) == into_failed, "every listed failure names its error"
    assert not any(s is states.FAILED for s, _ in table.transitions), "FAILED is terminal"
    for state, event in pairs:
        outcome = table.apply(state, event)
        if (state, event) in listed:
            assert outcome == Moved(table.transitions[(state, event)], table.failures.get((state, event)))
        else:
            assert outcome == Rejected(table.rejections[(state, event)])


def test_observers_see_every_lookup_while_they_are_registered() -> None:
    seen: list[tuple[str, Any, Any]] = []
    with observed(WRITER_TABLE, lambda table, state, event: seen.append((table.name, state, event))):
        WriterMachine(0, 0, 1, SETTINGS, 0.0).received("c", _credit(), 0.0)
    WriterMachine(0, 0, 1, SETTINGS, 0.0).received("c", _credit(), 0.0)
    assert seen == [("writer channel", WriterChannelState.AWAITING_CREDIT, WriterChannelEvent.CREDIT)]


def test_every_state_is_reachable_from_the_initial_one() -> None:
    for table, states, _ in TABLES:
        reached, frontier = {table.initial}, [table.initial]
        while frontier:
            state = frontier.pop()
            for (source, _), target in table.transitions.items():
                if source is state and target not in reached:
                    reached.add(target)
                    frontier.append(target)
        assert reached == set(states)


SETTINGS = ShuffleSettings(network_buffer_size=16, writer_max_memory=1)


def test_a_writer_rejects_an_ack_before_termination_as_the_table_says() -> None:
    assert WRITER_TABLE.rejections[(WriterChannelState.OPEN, WriterChannelEvent.ACK)] is errors.UnexpectedMessage
    w = WriterMachine(0, 0, 1, SETTINGS, 0.0)
    w.received("c", _credit(), 0.0)
    step = w.received("c", _ack(-1), 0.0)
    assert isinstance(step.events[-1], Failed) and type(step.events[-1].error) is errors.UnexpectedMessage
    assert w.channels[0].state is WriterChannelState.FAILED


def test_a_reader_rejects_data_after_termination_as_the_table_says() -> None:
    assert READER_TABLE.rejections[(ReaderChannelState.TERMINATED, ReaderChannelEvent.DATA)] is errors.UnexpectedMessage
    r = ReaderMachine(0, 0, [0], SETTINGS, 0.0)
    r.connected(0, 0.0)
    r.received(0, TerminationControlMessage(seq=0, writer_id=0, reader_id=0), 0.0)
    step = r.received(0, DataMessage(seq=1, writer_id=0, reader_id=0, checksum=0, payload=b""), 0.0)
    assert [type(e) for e in step.events] == [Failed] and not step.sends


def test_caller_bugs_raise_usage_errors() -> None:
    w = WriterMachine(0, 0, 1, SETTINGS, 0.0)
    w.finish(0.0)
    with pytest.raises(UsageError):
        w.write(0, b"late", 0.0)
    with pytest.raises(UsageError):
        w.finish(0.0)
    r = ReaderMachine(0, 0, [0], SETTINGS, 0.0)
    with pytest.raises(UsageError):
        r.received(0, _ack(0), 0.0)  # before connected()
    r.connected(0, 0.0)
    with pytest.raises(UsageError):
        r.connected(0, 0.0)


def _credit() -> CreditMessage:
    return CreditMessage(writer_id=0, reader_id=0, num_messages=1)


def _ack(seq: int) -> TerminationAckMessage:
    return TerminationAckMessage(seq=seq, writer_id=0, reader_id=0)
