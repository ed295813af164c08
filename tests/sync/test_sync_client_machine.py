"""The sync client's decisions, without a server: what a response means, what the server already
holds (skipped or waited for, never sent again) and what goes again after a restart."""

from __future__ import annotations

import pytest

from spec.sync.client import Holding, Reading, SyncClientMachine, holding
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
