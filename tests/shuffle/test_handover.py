"""The writer's hand-over: bounded, taken whole, and it wakes a sleeping owner only."""

from __future__ import annotations

import threading

from reference.shuffle.handover import Handover

HANG_GUARD_S = 10.0


def handover(limit: int = 10) -> tuple[Handover, list[str], threading.Event]:
    wakes: list[str] = []
    cancel = threading.Event()
    return Handover(limit, lambda: wakes.append("wake"), cancel), wakes, cancel


def test_the_owner_takes_everything_waiting_in_order_then_the_end() -> None:
    h, _, _ = handover()
    assert h.put(0, b"a") and h.put(1, b"bc")
    assert h.take() == ([(0, b"a"), (1, b"bc")], False)
    h.end()
    assert h.take() == ([], True)


def test_a_put_wakes_the_owner_only_when_it_said_it_sleeps() -> None:
    h, wakes, _ = handover()
    h.put(0, b"a")
    assert wakes == [] and not h.sleep()  # records are waiting: take them instead of sleeping
    h.take()
    assert h.sleep()
    h.put(0, b"b")
    h.put(0, b"c")
    assert wakes == ["wake"]
    h.awake()
    h.take()
    h.put(0, b"d")
    assert wakes == ["wake"]


class LookedAt(threading.Event):
    """A cancellation flag that counts how often a waiting producer looked at it: each look is one more turn of
    its wait for room, so a test can wait for the producer to have run instead of waiting for time to pass."""

    def __init__(self) -> None:
        super().__init__()
        self._looks = 0
        self._looked = threading.Condition()

    def is_set(self) -> bool:
        with self._looked:
            self._looks += 1
            self._looked.notify_all()
        return super().is_set()

    def looks_after(self, more: int) -> bool:
        """Wait until the flag was looked at ``more`` times more than now; False past the hang guard."""
        with self._looked:
            target = self._looks + more
            return self._looked.wait_for(lambda: self._looks >= target, HANG_GUARD_S)


def test_a_full_hand_over_holds_the_producer_until_the_owner_is_done_with_what_it_took() -> None:
    cancel = LookedAt()
    h = Handover(4, lambda: None, cancel)
    h.put(0, b"1234")  # at the limit: the next put waits
    done = threading.Event()
    producer = threading.Thread(target=lambda: h.put(0, b"5") and done.set(), daemon=True)
    producer.start()
    assert cancel.looks_after(2) and not done.is_set()  # it went round its wait for room and still waits
    assert h.take() == ([(0, b"1234")], False)
    # The owner's round (sealing, sending) runs without the producer wanting the GIL: having looked again after
    # the take, the producer found no room (released, it would have looked once more and returned).
    assert cancel.looks_after(2) and not done.is_set()
    h.make_room()
    producer.join(HANG_GUARD_S)
    assert done.is_set() and h.take() == ([(0, b"5")], False)


def test_cancellation_releases_a_waiting_producer_without_taking_its_record() -> None:
    h, _, cancel = handover(limit=1)
    h.put(0, b"x")
    result: list[bool] = []
    producer = threading.Thread(target=lambda: result.append(h.put(0, b"y")), daemon=True)
    producer.start()
    cancel.set()
    producer.join(HANG_GUARD_S)
    assert result == [False] and h.take() == ([(0, b"x")], False)


def test_the_end_of_the_input_wakes_the_owner_only_when_it_said_it_sleeps() -> None:
    h, wakes, _ = handover()
    assert h.sleep()
    h.end()
    assert wakes == ["wake"]  # else the owner sleeps a whole poll before it finishes
    h.awake()
    h2, wakes2, _ = handover()
    h2.end()
    assert wakes2 == [] and not h2.sleep()  # ended: finish instead of sleeping
