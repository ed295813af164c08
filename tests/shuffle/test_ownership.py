"""A single-owner writer's machine: held by its owner, by the standby only while the owner is inside ``next()``."""

from __future__ import annotations

import threading

from reference.shuffle.ownership import Ownership

HANG_GUARD_S = 10.0


def ownership() -> tuple[Ownership, list[str]]:
    wakes: list[str] = []
    return Ownership(lambda: wakes.append("wake")), wakes


def test_the_standby_holds_the_machine_only_while_the_owner_let_it_go() -> None:
    own, wakes = ownership()
    assert not own.stand_in()  # the owner holds it from the start
    own.let_go()
    assert own.stand_in()
    own.step_out()
    assert own.stand_in()  # given back: it may stand in again while the owner is still away
    own.step_out()
    own.take_back()
    assert wakes == [] and not own.wanted_back  # nobody stood in: no wake-up, no system call
    assert not own.stand_in()


def test_the_owner_back_from_its_input_wakes_the_standby_and_waits_for_it_to_step_out() -> None:
    own, wakes = ownership()
    own.let_go()
    assert own.stand_in()
    back = threading.Event()

    def owner() -> None:
        own.take_back()
        back.set()

    thread = threading.Thread(target=owner, daemon=True)
    thread.start()
    while not own.wanted_back:  # the owner asked for its machine back...
        assert thread.is_alive()
    assert wakes == ["wake"]  # ...and interrupted the standby's poll
    assert not back.wait(0.05)  # it waits while the standby still holds the machine
    own.step_out()
    thread.join(HANG_GUARD_S)
    assert back.is_set() and not own.wanted_back
    assert not own.stand_in()


def test_a_parked_standby_is_woken_when_the_owner_takes_input_again() -> None:
    own, _ = ownership()
    stop = threading.Event()
    woke = threading.Event()

    def standby() -> None:
        own.watch(HANG_GUARD_S, stop)  # the owner takes no input: parked until it does
        woke.set()

    thread = threading.Thread(target=standby, daemon=True)
    thread.start()
    assert not woke.wait(0.05)
    own.taking_input()
    thread.join(HANG_GUARD_S)
    assert woke.is_set() and own.taking
    own.not_taking_input()
    assert not own.taking


def test_a_parked_standby_is_released_by_the_end_of_the_task() -> None:
    own, _ = ownership()
    stop = threading.Event()
    thread = threading.Thread(target=own.watch, args=(HANG_GUARD_S, stop), daemon=True)
    thread.start()
    stop.set()
    own.wake_watch()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive()
