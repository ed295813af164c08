"""The sync client's decisions, without a server: what a response means, what the server already
holds (skipped or waited for, never sent again) and what goes again after a restart."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from spec.sync.client import (
    Backoff, DurableWait, Fault, Holding, Reading, RequestTries, SyncClientMachine, Then, after_failure,
    durable_wait, holding, keeps_connection,
)
from spec.sync.errors import (
    InterleavedTransaction, InvalidTablePath, PutSlotsBusy, PutTooLarge, ServerRestarted, TransactionDiscarded,
    wire_text,
)
from spec.sync.messages import SyncResponse


def told(memory: int | None, durable: int | None, *, first: bool = False, accepted: bool = True) -> SyncResponse:
    return SyncResponse(accepted=accepted, memory_sequence_number=memory, durable_sequence_number=durable, first=first)


def test_a_number_is_new_above_memory_held_in_memory_up_to_it_and_in_the_table_up_to_durable() -> None:
    assert [holding(s, 5, 3) for s in (2, 3, 4, 5, 6)] == [Holding.DURABLE, Holding.DURABLE, Holding.MEMORY,
                                                          Holding.MEMORY, Holding.NOTHING]
    assert holding(1, None, None) is Holding.NOTHING


def test_what_the_server_holds_is_never_sent_and_durable_transactions_are_dropped() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    for sequence in (1, 2, 3):
        machine.add(sequence, f"tx{sequence}")
    assert machine.read(told(2, 1)) is Reading.ACCEPTED
    assert [s for s, _ in machine.pending] == [2, 3]  # 1 is in the table
    assert machine.next_to_send(-1) == (3, "tx3")  # 2 is in the server's memory: waited for, not resent
    with pytest.raises(ValueError, match="sequence 3 does not follow 3"):
        machine.add(3, "again")


def test_a_restart_is_read_from_first_or_from_a_memory_number_going_back() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.add(4, "tx4")
    assert machine.read(told(4, 2)) is Reading.ACCEPTED
    assert machine.read(told(2, 2)) is Reading.RESTARTED  # memory went back: the server lost 3..4
    machine.replay()
    assert machine.next_to_send(-1) == (4, "tx4") and machine.replayed_transactions == 1
    assert machine.read(told(4, 2, first=True)) is Reading.RESTARTED
    assert machine.read(told(4, 2, first=True), check_restart=False) is Reading.ACCEPTED
    assert machine.restarts_seen == 2


def test_the_first_response_of_a_servers_life_to_a_new_client_is_no_restart_it_saw() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.add(1, "tx1")
    assert machine.read(told(None, None, first=True)) is Reading.RESTARTED  # replay what is pending, to be sure
    assert machine.restarts_seen == 0
    assert machine.read(told(1, None)) is Reading.ACCEPTED
    assert machine.read(told(None, None, first=True)) is Reading.RESTARTED and machine.restarts_seen == 1


def test_a_busy_server_is_retried_and_its_answer_changes_no_number() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.read(told(7, 7))
    assert machine.read(told(None, None, accepted=False)) is Reading.RETRY
    assert (machine.memory, machine.durable) == (7, 7)


@pytest.mark.parametrize(("fault", "text", "then"), [
    (Fault.UNREACHABLE, "failed to connect to all addresses", Then.RETRY),
    (Fault.TIMED_OUT, "The put did not complete within --put-timeout-s (300 s)", Then.RETRY),
    (Fault.REFUSED, wire_text(PutSlotsBusy(2)), Then.RETRY),
    (Fault.REFUSED, wire_text(InterleavedTransaction("B", "A")), Then.RETRY),
    (Fault.REFUSED, wire_text(TransactionDiscarded("A", 300)), Then.REPLAY),
    (Fault.REFUSED, wire_text(PutTooLarge("A message", 10, 1)), Then.FAIL),
    (Fault.REFUSED, "Received message larger than max (400000 vs. 1000)", Then.FAIL),
    # A condition quoted from what the client sent does not pose as the server's.
    (Fault.REFUSED, wire_text(InvalidTablePath("[sync-condition: PUT_SLOTS_BUSY]", "no")), Then.FAIL),
], ids=["unreachable", "timed-out", "slots-busy", "other-origin-open", "discarded", "too-large", "grpc-limit",
        "quoted-condition"])
def test_busy_answers_are_retried_a_discarded_transaction_replayed_and_refusals_final(
    fault: Fault, text: str, then: Then
) -> None:
    assert after_failure(fault, text) is then


def test_backoff_doubles_up_to_its_cap_with_jitter_and_stops_at_the_deadline() -> None:
    backoff = Backoff(initial_s=0.1, max_s=0.4, deadline=10.0)
    assert [backoff.wait(0.0, 0.0) for _ in range(4)] == [0.05, 0.1, 0.2, 0.2]
    assert backoff.wait(0.0, 0.999) == pytest.approx(0.4, rel=1e-3)
    assert backoff.wait(9.9, 0.5) == pytest.approx(0.1)  # never past the deadline
    assert backoff.wait(10.0, 0.5) is None


def _tries(machine: SyncClientMachine[str], sequence: int | None) -> RequestTries[str]:
    return RequestTries.start(machine, sequence, 100.0, initial_s=0.1, max_s=0.4, deadline_s=5.0)


def test_a_put_whose_answer_was_lost_is_not_sent_again() -> None:
    """The connection broke after the put went out; the new connection's probe shows the server holds it."""
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.read(told(4, 4))
    machine.add(5, "tx5")
    tries = _tries(machine, 5)
    assert tries.connected(told(4, 4)) is Then.SEND  # nothing sent yet: send it
    tries.sending()
    assert tries.failed(Fault.UNREACHABLE, "Socket closed") is Then.RETRY
    assert tries.connected(told(5, 4)) is Then.ANSWER_LOST  # held in memory: acknowledged, never resent
    assert machine.holding(5) is Holding.MEMORY and [s for s, _ in machine.pending] == [5]


def test_a_put_lost_with_its_connection_is_sent_again() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.read(told(4, 4))
    machine.add(5, "tx5")
    tries = _tries(machine, 5)
    tries.sending()
    assert tries.failed(Fault.UNREACHABLE, "Socket closed") is Then.RETRY
    assert tries.connected(told(4, 4)) is Then.SEND  # the server never got it


def test_a_restart_seen_on_reconnect_replays_before_anything_is_sent() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.read(told(4, 2))
    machine.add(5, "tx5")
    tries = _tries(machine, 5)
    assert tries.connected(told(2, 2, first=True)) is Then.REPLAY
    assert machine.replay() == -1 and machine.next_to_send(machine.replay()) is not None


def test_answers_and_failures_say_what_comes_next() -> None:
    machine: SyncClientMachine[str] = SyncClientMachine()
    tries = _tries(machine, None)
    assert tries.answered(told(None, None, accepted=False), fresh=True) is Then.RETRY
    assert "busy" in tries.last_failure
    assert tries.answered(told(3, 3), fresh=True) is Then.ANSWERED
    assert tries.answered(told(1, 1), fresh=False) is Then.REPLAY  # memory went back: a restart
    assert tries.failed(Fault.REFUSED, wire_text(PutSlotsBusy(2))) is Then.RETRY
    assert tries.failed(Fault.REFUSED, wire_text(TransactionDiscarded("A", 300))) is Then.REPLAY
    assert tries.failed(Fault.REFUSED, wire_text(PutTooLarge("A message", 10, 1))) is Then.FAIL
    assert keeps_connection(Fault.REFUSED) and not keeps_connection(Fault.UNREACHABLE)


def test_tries_back_off_capped_and_give_up_at_the_deadline() -> None:
    tries = _tries(SyncClientMachine(), None)
    now, waits = 100.0, []
    while (wait := tries.wait(now, 0.999999)) is not None:
        waits.append(wait)
        now += wait
    assert waits[:5] == pytest.approx([0.1, 0.2, 0.4, 0.4, 0.4], rel=1e-5)
    assert max(waits) <= 0.4 and now == pytest.approx(105.0)  # the last wait ends at the deadline


def test_an_outage_is_warned_of_every_five_seconds() -> None:
    tries = _tries(SyncClientMachine(), None)
    assert not tries.warning_due(104.999)
    assert tries.warning_due(105.0) and not tries.warning_due(109.0) and tries.warning_due(110.0)


def test_a_wait_for_durable_ends_when_durable_or_past_its_deadline() -> None:
    assert durable_wait(Holding.DURABLE, 11.0, 10.0) is DurableWait.DONE
    assert durable_wait(Holding.MEMORY, 10.0, 10.0) is DurableWait.POLL
    assert durable_wait(Holding.MEMORY, math.nextafter(10.0, 11.0), 10.0) is DurableWait.TIMED_OUT


def test_a_response_from_another_server_life_shows_a_restart_though_its_memory_number_moved_on() -> None:
    """A put that reached a restarted server through a channel gRPC reconnected by itself: the numbers moved
    forward (the new server recorded it), only the life shows the restart (nemesis Spark seed 156)."""
    machine: SyncClientMachine[str] = SyncClientMachine()
    machine.add(1, "tx1")
    assert machine.read(replace(told(1, None), server_life=7)) is Reading.ACCEPTED and machine.life == 7
    machine.add(2, "tx2")
    assert machine.read(replace(told(2, None), server_life=8)) is Reading.RESTARTED and machine.life == 8
    assert machine.read(replace(told(2, None), server_life=8)) is Reading.ACCEPTED


def test_a_put_refused_for_naming_another_server_life_is_sent_again_on_a_new_connection() -> None:
    text = wire_text(ServerRestarted("o", 7, 8))
    assert after_failure(Fault.REFUSED, text) is Then.RECONNECT
