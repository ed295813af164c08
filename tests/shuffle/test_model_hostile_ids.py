"""The machines against their tables for what a confused or hostile peer sends at each point of an
exchange: messages naming other ids, acks and credits on a connection not bound to their reader, a
repeated ack, data after the terminator. The table is the oracle: a listed pair ends in the state it
names (or fails with the error it names), an unlisted one fails with its rejection error. The network
model's peers are honest, so these pairs are exercised here (they count in the coverage summary)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import CreditMessage, DataMessage, Message, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.records import encode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Failed, Step, UsageError
from spec.shuffle.transitions import (
    READER_TABLE,
    WRITER_TABLE,
    Moved,
    ReaderChannelEvent,
    ReaderChannelState,
    Table,
    WriterChannelEvent,
    WriterChannelState,
)
from spec.shuffle.writer import WriterMachine

SETTINGS = ShuffleSettings(network_buffer_size=64, writer_max_memory=1, reader_max_memory=10_000)


def writer_in(state: WriterChannelState) -> WriterMachine:
    """A writer of two readers whose channel to reader 0 is in ``state`` (reader 1 keeps it running)."""
    w = WriterMachine(1, 0, 2, SETTINGS, 0.0)
    if state is not WriterChannelState.AWAITING_CREDIT:
        w.received("c0", CreditMessage(writer_id=0, reader_id=0), 0.0)
        w.received("c1", CreditMessage(writer_id=0, reader_id=1), 0.0)
    if state in (WriterChannelState.TERMINATING, WriterChannelState.TERMINATED):
        w.finish(0.0)
    if state is WriterChannelState.TERMINATED:
        w.received("c0", TerminationAckMessage(seq=0, writer_id=0, reader_id=0), 0.0)
    if state is WriterChannelState.LEFT:
        w.reader_left(0, 0.0)
    assert w.channels[0].state is state and not w.done
    return w


def reader_in(state: ReaderChannelState) -> ReaderMachine:
    """A reader of two writers whose channel to writer 0 is in ``state`` (writer 1 keeps it running); an
    OPEN channel has had a DATA, which named its partition id 0."""
    r = ReaderMachine(1, 0, [0, 1], SETTINGS, 0.0)
    r.connected(0, 0.0)
    r.connected(1, 0.0)
    if state is ReaderChannelState.OPEN:
        r.received(0, data(0), 0.0)
    if state in (ReaderChannelState.TERMINATED, ReaderChannelState.ACKED):
        r.received(0, TerminationControlMessage(seq=0, writer_id=0, reader_id=0), 0.0)
    if state is ReaderChannelState.ACKED:
        r.send_completed(0, 0, 0.0)
    assert r.channels[0].state is state and not r.done
    return r


def check(table: Table[Any, Any], state: Any, event: Any, run: Callable[[], Step], after: Callable[[], Any]) -> None:
    """``run`` feeds the input classified as ``event``; its outcome must be the table's."""
    outcome = table.apply(state, event)
    if not isinstance(outcome, Moved) and issubclass(outcome.error, UsageError):
        with pytest.raises(UsageError):
            run()
        return
    failures = [type(e.error) for e in run().events if isinstance(e, Failed)]
    if isinstance(outcome, Moved) and outcome.error is None:
        assert failures == [] and after() is outcome.target
    else:
        assert failures == [outcome.error] and after() is type(state).FAILED


def data(seq: int, writer_id: int = 0, reader_id: int = 0) -> DataMessage:
    payload = encode_records([b"x"])
    return DataMessage(seq=seq, writer_id=writer_id, reader_id=reader_id, checksum=payload_checksum(payload),
                       payload=payload)


WRITER_INPUTS: dict[str, Callable[[WriterMachine], tuple[Any, Message]]] = {
    "credit naming another writer": lambda w: (w.channels[0].conn or "new", CreditMessage(writer_id=7, reader_id=0)),
    "ack naming another writer": lambda w: (
        w.channels[0].conn or "new", TerminationAckMessage(seq=w.channels[0].last_seq, writer_id=7, reader_id=0)),
    "credit on reader 0's connection naming reader 1": lambda w: ("c0", CreditMessage(writer_id=0, reader_id=1)),
    "credit on an intruder's connection": lambda w: ("intruder", CreditMessage(writer_id=0, reader_id=0)),
    "matching ack on an intruder's connection": lambda w: (
        "intruder", TerminationAckMessage(seq=w.channels[0].last_seq, writer_id=0, reader_id=0)),
    "matching ack, again": lambda w: (
        w.channels[0].conn or "new", TerminationAckMessage(seq=w.channels[0].last_seq, writer_id=0, reader_id=0)),
    "ack of another seq": lambda w: (
        w.channels[0].conn or "new", TerminationAckMessage(seq=w.channels[0].last_seq + 5, writer_id=0, reader_id=0)),
    "another credit": lambda w: (w.channels[0].conn or "new", CreditMessage(writer_id=0, reader_id=0)),
    "data sent to the writer": lambda w: (w.channels[0].conn or "new", data(0)),
}


def writer_event(w: WriterMachine, conn: Any, message: Message) -> WriterChannelEvent:
    """How the writer must classify ``message`` on ``conn`` for its channel to reader 0."""
    bound = w.channels[0].conn is not None
    if isinstance(message, DataMessage):
        return WriterChannelEvent.UNEXPECTED
    if message.writer_id != 0 or (bound and conn == "c0" and message.reader_id != 0):
        return WriterChannelEvent.MISMATCHED_IDS
    if bound and conn != "c0":
        return WriterChannelEvent.FOREIGN_CONNECTION
    if isinstance(message, TerminationAckMessage):
        return WriterChannelEvent.ACK if message.seq == w.channels[0].last_seq else WriterChannelEvent.ACK_WRONG_SEQ
    return WriterChannelEvent.CREDIT


WRITER_CASES = [(state, name)
                for state in WriterChannelState if state is not WriterChannelState.FAILED for name in WRITER_INPUTS
                if not (state in (WriterChannelState.AWAITING_CREDIT, WriterChannelState.LEFT)
                        and "reader 0's connection" in name)]
"""Every live state with every input (reader 0 has no connection of its own before its bind or after it left)."""


@pytest.mark.parametrize("state, name", WRITER_CASES, ids=[f"{s.value}-{n}" for s, n in WRITER_CASES])
def test_the_writer_honours_its_table(table_coverage: None, state: WriterChannelState, name: str) -> None:
    w = writer_in(state)
    conn, message = WRITER_INPUTS[name](w)
    event = writer_event(w, conn, message)
    check(WRITER_TABLE, state, event, lambda: w.received(conn, message, 0.0), lambda: w.channels[0].state)


READER_INPUTS: dict[str, tuple[ReaderChannelEvent, Callable[[ReaderMachine], Message]]] = {
    "data naming another reader": (ReaderChannelEvent.MISMATCHED_IDS,
                                   lambda r: data(r.channels[0].last_seq + 1, reader_id=4)),
    "terminator naming another writer": (ReaderChannelEvent.MISMATCHED_IDS, lambda r: TerminationControlMessage(
        seq=r.channels[0].last_seq + 1, writer_id=1, reader_id=0)),
    "data with the next seq": (ReaderChannelEvent.DATA, lambda r: data(r.channels[0].last_seq + 1)),
    "terminator with the next seq": (ReaderChannelEvent.TERMINATION, lambda r: TerminationControlMessage(
        seq=r.channels[0].last_seq + 1, writer_id=0, reader_id=0)),
    "data with a seq ahead": (ReaderChannelEvent.WRONG_SEQ, lambda r: data(r.channels[0].last_seq + 5)),
    "credit sent to the reader": (ReaderChannelEvent.UNEXPECTED, lambda r: CreditMessage(
        writer_id=0, reader_id=0, seq=r.channels[0].last_seq + 1)),
}


@pytest.mark.parametrize("state", [ReaderChannelState.OPEN, ReaderChannelState.TERMINATED, ReaderChannelState.ACKED],
                         ids=lambda s: s.value)
@pytest.mark.parametrize("name", list(READER_INPUTS))
def test_the_reader_honours_its_table(table_coverage: None, state: ReaderChannelState, name: str) -> None:
    r = reader_in(state)
    event, build = READER_INPUTS[name]
    message = build(r)
    check(READER_TABLE, state, event, lambda: r.received(0, message, 0.0), lambda: r.channels[0].state)
