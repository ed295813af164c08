"""A clock that stands still until it is advanced, for harnesses and tests driving a sync server's time.

``advance`` moves the time, wakes every sleeping alarm (each thread looks at the new time, as at a
periodic tick; or, with ``wakes_at_deadlines``, a sleeper whose deadline is not reached goes back to sleep
without returning, as a real alarm does), and returns
only once each is asleep again: what the server does by then is done when ``advance`` returns,
with no wait on the wall clock and no race.  An alarm is a thread's (``alarm``: the flusher) or an asyncio
task's (``loop_alarm``: a put stream waiting for its next event or its deadline); a task counts as running
until it sleeps in its alarm again or closes it.  (``reference.sync.clock.Clock``.)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from spec.clock import after

SPIN_LIMIT = 1000
"""Sleeps a thread may ask at one time that are over at once (a deadline already reached, each time something fell
due) before it is held asleep until the time moves: a thread doing what fell due asks a few, one whose deadline is
computed at or before the time it is asked at (a deadline one tick late, one computed backwards) asks without end."""
SETTLE_S = 30.0
"""How long ``advance`` waits, in real seconds, for woken threads to sleep again before it gives up."""


class _ManualAlarm:
    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self.asleep = False
        self.rung = False
        self.closed = False
        self.over_at: float | None = None
        self.over = 0
        """Sleeps asked at the time ``over_at`` that were over at once (their deadline already reached)."""

    def sleep_until(self, deadline: float) -> None:
        clock = self._clock
        with clock.changed:
            while True:
                past = clock.time >= deadline
                if self.rung or past:
                    self.rung = False
                    if not (past and self._spinning(clock.time)):
                        return
                self.asleep = True
                clock.running -= 1
                clock.changed.notify_all()
                while self.asleep:
                    clock.changed.wait()
                if not clock.wakes_at_deadlines:
                    self.rung = False
                    return

    def _spinning(self, now: float) -> bool:
        """(Lock held.) Whether this is past ``SPIN_LIMIT`` sleeps asked at ``now`` that were over at once: then the
        clock notes it (``spun``) and the sleeper sleeps until the time moves or a ring."""
        if now != self.over_at:
            self.over_at, self.over = now, 0
        self.over += 1
        if self.over <= SPIN_LIMIT:
            return False
        self._clock.spun = True
        return True

    def ring(self) -> None:
        with self._clock.changed:
            self.rung = True
            if self.asleep:
                self._clock.wake(self)

    def woken(self) -> None:
        """(Lock held.) The sleeping thread waits on the clock's condition: ``wake`` notified it."""

    def close(self) -> None:
        _close(self._clock, self)


def _close(clock: ManualClock, alarm: _ManualAlarm | _ManualLoopAlarm) -> None:
    with clock.changed:
        if not alarm.closed and not alarm.asleep:
            clock.running -= 1
        alarm.closed = True
        clock.alarms.remove(alarm)
        clock.changed.notify_all()


def _wake_up(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


class _ManualLoopAlarm:
    """A task's alarm: asleep while it awaits its deadline (or one of its ``wakes``), running otherwise."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self.asleep = False
        self.closed = False
        self._woken: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None

    async def sleep_until(self, deadline: float, *wakes: asyncio.Future[Any]) -> None:
        clock = self._clock
        loop = asyncio.get_running_loop()
        while True:
            with clock.changed:
                if clock.time >= deadline or any(w.done() for w in wakes):
                    return
                woken = loop.create_future()
                self._woken = (loop, woken)
                self.asleep = True
                clock.running -= 1
                clock.changed.notify_all()
            try:
                await asyncio.wait((woken, *wakes), return_when=asyncio.FIRST_COMPLETED)
            finally:
                with clock.changed:
                    if self.asleep:  # woken by one of ``wakes`` (or cancelled), not by the clock
                        self.asleep = False
                        clock.running += 1
                    self._woken = None
            if not woken.done() or not clock.wakes_at_deadlines:
                return

    def woken(self) -> None:
        """(Lock held.) ``wake`` marked the task running: resolve what it awaits, on its loop."""
        if self._woken is not None:
            loop, woken = self._woken
            loop.call_soon_threadsafe(_wake_up, woken)

    def close(self) -> None:
        _close(self._clock, self)


class ManualClock:
    """Time that moves only by ``advance`` (or ``sleep``, which advances it)."""

    def __init__(self, start: float = 0.0, wakes_at_deadlines: bool = False) -> None:
        """``wakes_at_deadlines``: a sleeper woken by ``advance`` before its deadline goes back to sleep without
        returning (as a real alarm: only its deadline or a ring ends its sleep), so a deadline computed late shows;
        otherwise every ``advance`` ends every sleep, as a periodic tick would."""
        self.wakes_at_deadlines = wakes_at_deadlines
        self.time = start
        self.changed = threading.Condition()
        self.alarms: list[_ManualAlarm | _ManualLoopAlarm] = []
        self.running = 0
        """Threads owning an alarm that are not asleep in it."""
        self.spun = False
        """A thread asked past ``SPIN_LIMIT`` sleeps at one time that were over at once (``take_spun`` clears it)."""

    def now(self) -> float:
        with self.changed:
            return self.time

    def __call__(self) -> float:
        return self.now()

    def alarm(self) -> _ManualAlarm:
        alarm = _ManualAlarm(self)
        self._own(alarm)
        return alarm

    def loop_alarm(self) -> _ManualLoopAlarm:
        """An alarm for a task of the running asyncio loop, running from now until it sleeps in it."""
        alarm = _ManualLoopAlarm(self)
        self._own(alarm)
        return alarm

    def _own(self, alarm: _ManualAlarm | _ManualLoopAlarm) -> None:
        """A new alarm, whose thread or task is running."""
        with self.changed:
            self.alarms.append(alarm)
            self.running += 1

    def wake(self, alarm: _ManualAlarm | _ManualLoopAlarm) -> None:
        """(Lock held.) Wake a sleeping alarm: its thread or task counts as running until it sleeps again."""
        alarm.asleep = False
        self.running += 1
        alarm.woken()
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
            self.time = after(self.time, seconds)
            for alarm in self.alarms:
                if alarm.asleep:
                    self.wake(alarm)
        self.settle()

    def take_spun(self) -> bool:
        """Whether a thread spun (asked to sleep until a time already reached, again and again) since last asked."""
        with self.changed:
            spun, self.spun = self.spun, False
            return spun

    def ring_all(self) -> None:
        """Ring every thread's alarm (what a settings change does: each thread looks again), and return once they
        sleep again."""
        for alarm in list(self.alarms):
            if isinstance(alarm, _ManualAlarm):
                alarm.ring()
        self.settle()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
