"""Every failure a machine reports for a channel is the error its table names for the pair.

Random input sequences (seeded, so the run is the same every time) drive a writer with two readers
and a reader with two writers; an observer on the table sees which pair each input looked up. The
test also requires that the walks reach every failing pair, so it cannot pass by reaching none.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest

from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.records import encode_record
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Failed, Step, UsageError
from spec.shuffle.transitions import (
    READER_TABLE,
    WRITER_TABLE,
    ReaderChannelEvent,
    ReaderChannelState,
    Table,
)
from spec.shuffle.writer import WriterMachine
from tests.shuffle.table_lookups import observed

SETTINGS = ShuffleSettings(network_buffer_size=64, writer_max_memory=1, writer_connection_timeout_ms=1000,
                           checksum_enabled=True)
WALKS, LENGTH = 2500, 18

UNREACHABLE_READER_PAIRS = {
    (ReaderChannelState.TERMINATED, ReaderChannelEvent.BAD_CHECKSUM),
    (ReaderChannelState.ACKED, ReaderChannelEvent.BAD_CHECKSUM),
}
"""The reader verifies a checksum only on an OPEN channel; after the terminator any DATA is UNEXPECTED-by-table."""


Input = Callable[[], Step]


def failing_pairs(table: Table[Any, Any]) -> set[tuple[Any, Any]]:
    return set(table.failures) | {pair for pair, error in table.rejections.items() if error is not UsageError}


Written = tuple[int, int]
"""(peer, seq) of a send whose completion the machine waits for."""


def writer_inputs(rng: random.Random, w: WriterMachine, now: float, written: Written | None) -> list[Input]:
    reader = rng.randrange(2)
    conn = f"c{reader}"
    seq = w.channels[reader].last_seq
    choices: list[Input] = [
        lambda: w.received(conn, CreditMessage(writer_id=0, reader_id=reader), now),
        lambda: w.write(reader, b"r" * rng.choice((1, 60)), now),
        lambda: w.finish(now),
        lambda: w.received(conn, TerminationAckMessage(seq=seq + rng.choice((0, 0, 1)), writer_id=0,
                                                       reader_id=reader), now),
        lambda: w.received(conn, DataMessage(seq=0, writer_id=0, reader_id=reader, checksum=0, payload=b""), now),
        lambda: w.connection_closed(conn, now),
        lambda: w.tick(now + rng.choice((0.0, 2.0))),
        lambda: w.received("intruder", CreditMessage(writer_id=0, reader_id=reader), now),
        lambda: w.received(conn, CreditMessage(writer_id=rng.choice((0, 5)), reader_id=1 - reader), now),
        lambda: w.reader_left(reader, now),
    ]
    if written is not None:
        choices.append(lambda: w.send_completed(*written, now))
        choices.append(lambda: w.send_failed(*written, "broken pipe", now))
    return choices


def reader_inputs(rng: random.Random, r: ReaderMachine, now: float, written: Written | None) -> list[Input]:
    writer = rng.randrange(2)
    seq = r.channels[writer].last_seq + rng.choice((1, 1, 1, 2))
    payload = encode_record(b"x")
    checksum = payload_checksum(payload) if rng.random() < 0.8 else 7
    choices: list[Input] = [
        lambda: r.connected(writer, now),
        lambda: r.received(writer, DataMessage(seq=seq, writer_id=writer, reader_id=0, checksum=checksum,
                                               payload=payload), now),
        lambda: r.received(writer, TerminationControlMessage(seq=seq, writer_id=writer, reader_id=0), now),
        lambda: r.received(writer, CreditMessage(writer_id=writer, reader_id=0, seq=seq), now),
        lambda: r.received(writer, DataMessage(seq=seq, writer_id=1 - writer, reader_id=0, checksum=checksum,
                                               payload=payload), now),
        lambda: r.received(writer, TerminationControlMessage(seq=seq, writer_id=writer, reader_id=2), now),
        lambda: r.connection_closed(writer, now),
    ]
    if r.channels[writer].state is ReaderChannelState.CONNECTING:  # (elsewhere they only dilute the walk)
        choices += [lambda: r.connect_failed(writer, "refused", now), lambda: r.tick(now)]
    if written is not None:
        choices.append(lambda: r.send_completed(*written, now))
        choices.append(lambda: r.send_failed(*written, "broken pipe", now))
    return choices


def walk(table: Table[Any, Any], seed: int, machine: Any, inputs: Any) -> set[tuple[Any, Any]]:
    """One random walk; returns the failing pairs it reached, each checked against the table."""
    rng = random.Random(seed)
    looked_up: list[tuple[Any, Any]] = []
    reached = set()
    pending: list[Written] = []
    with observed(table, lambda _, state, event: looked_up.append((state, event))):
        for i in range(LENGTH):
            looked_up.clear()
            written = pending.pop(rng.randrange(len(pending))) if pending else None
            try:
                step = rng.choice(inputs(rng, machine, float(i), written))()
            except UsageError:
                continue
            pending += [(s.peer, s.message.seq) for s in step.sends if s.notify]
            failures = [e.error for e in step.events if isinstance(e, Failed)]
            if failures:
                assert looked_up, f"seed {seed}: {failures[0]!r} without a table lookup"
                pair = looked_up[-1]
                expected = table.failures.get(pair) or table.rejections[pair]
                assert type(failures[0]) is expected, (seed, pair, failures[0])
                reached.add(pair)
                return reached
    return reached


def new_writer() -> WriterMachine:
    return WriterMachine(3, 0, 2, SETTINGS, 0.0, ack_timeout_ms=500)


def new_reader() -> ReaderMachine:
    return ReaderMachine(3, 0, [0, 1], SETTINGS, 0.0, connect_timeout=2.0)


ROLES: dict[str, tuple[Table[Any, Any], Callable[[], Any], Callable[..., list[Input]], set[tuple[Any, Any]]]] = {
    "writer": (WRITER_TABLE, new_writer, writer_inputs, set()),
    "reader": (READER_TABLE, new_reader, reader_inputs, UNREACHABLE_READER_PAIRS),
}


@pytest.mark.parametrize("role", list(ROLES))
def test_every_failure_is_the_tables_error_for_its_pair(role: str) -> None:
    table, new_machine, inputs, unreachable = ROLES[role]
    reached: set[tuple[Any, Any]] = set()
    for seed in range(WALKS):
        reached |= walk(table, seed, new_machine(), inputs)
    assert reached == failing_pairs(table) - unreachable
