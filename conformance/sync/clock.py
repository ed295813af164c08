"""A clock that stands still until it is advanced, for harnesses and tests driving a sync server's time.

``advance`` moves the time, wakes every sleeping alarm (each thread looks at the new time, as at a
periodic tick; or, with ``wakes_at_deadlines``, a sleeper whose deadline is not reached goes back to sleep
without returning, as a real alarm does), and returns
only once each is asleep again: what the server does by then is done when ``advance`` returns,
with no wait on the wall clock and no race.  (``reference.sync.clock.Clock``.)
"""

from __future__ import annotations

import threading

SETTLE_S = 30.0
"""How long ``advance`` waits, in real seconds, for woken threads to sleep again before it gives up."""


class _ManualAlarm:
    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self.asleep = False
        self.rung = False
        self.closed = False

    def sleep_until(self, deadline: float) -> None:
        clock = self._clock
        with clock.changed:
            while True:
                if self.rung or clock.time >= deadline:
                    self.rung = False
                    return
                self.asleep = True
                clock.running -= 1
                clock.changed.notify_all()
                while self.asleep:
                    clock.changed.wait()
                if not clock.wakes_at_deadlines:
                    self.rung = False
                    return

    def ring(self) -> None:
        with self._clock.changed:
            self.rung = True
            if self.asleep:
                self._clock.wake(self)

    def close(self) -> None:
        with self._clock.changed:
            if not self.closed and not self.asleep:
                self._clock.running -= 1
            self.closed = True
            self._clock.alarms.remove(self)
            self._clock.changed.notify_all()


class ManualClock:
    """Time that moves only by ``advance`` (or ``sleep``, which advances it)."""

    def __init__(self, start: float = 0.0, wakes_at_deadlines: bool = False) -> None:
        """``wakes_at_deadlines``: a sleeper woken by ``advance`` before its deadline goes back to sleep without
        returning (as a real alarm: only its deadline or a ring ends its sleep), so a deadline computed late shows;
        otherwise every ``advance`` ends every sleep, as a periodic tick would."""
        self.wakes_at_deadlines = wakes_at_deadlines
        self.time = start
        self.changed = threading.Condition()
        self.alarms: list[_ManualAlarm] = []
        self.running = 0
        """Threads owning an alarm that are not asleep in it."""

    def now(self) -> float:
        with self.changed:
            return self.time

    def __call__(self) -> float:
        return self.now()

    def alarm(self) -> _ManualAlarm:
        with self.changed:
            alarm = _ManualAlarm(self)
            self.alarms.append(alarm)
            self.running += 1
            return alarm

    def wake(self, alarm: _ManualAlarm) -> None:
        """(Lock held.) Wake a sleeping alarm: its thread counts as running until it sleeps again."""
        alarm.asleep = False
        self.running += 1
        self.changed.notify_all()

    def settle(self) -> None:
        """Wait until every thread owning an alarm is asleep in it (RuntimeError after ``SETTLE_S``)."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.running == 0, timeout=SETTLE_S):
                raise RuntimeError(f"{self.running} thread(s) did not go back to sleep within {SETTLE_S:g} s")

    def advance(self, seconds: float) -> None:
        """Move the time by ``seconds`` (>= 0), wake every sleeping alarm, and return once their threads sleep again."""
        if seconds < 0:
            raise ValueError("the clock does not go back")
        with self.changed:
            self.time += seconds
            for alarm in self.alarms:
                if alarm.asleep:
                    self.wake(alarm)
        self.settle()

    def ring_all(self) -> None:
        """Ring every alarm (what a settings change does: each thread looks again), and return once they sleep again."""
        for alarm in list(self.alarms):
            alarm.ring()
        self.settle()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
