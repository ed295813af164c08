"""The sync runtime's one source of time: what it reads ``now`` from, and how it sleeps until a deadline.

The endpoints (``spec.sync.server``, ``spec.sync.client``, ``spec.sync.admission``) decide every deadline; a
driver only asks its clock for ``now``, hands it to them, and sleeps until the deadline they return (or until it
is woken: an ``Alarm`` rung by another thread; a ``LoopAlarm`` for a task of an asyncio loop, woken by what else
it waits for).  Injecting the clock is what lets a harness run a server on a clock that moves only when told
(``conformance.sync.clock.ManualClock``): its flusher and its streams' deadlines alike.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Protocol


class Alarm(Protocol):
    """One sleeping thread's wake-up: at a deadline, or once rung by another thread."""

    def sleep_until(self, deadline: float) -> None:
        """Return at ``deadline`` (by the clock's time) or once rung since the last return."""

    def ring(self) -> None:
        """Wake the sleeper now (or at once at its next sleep)."""

    def close(self) -> None:
        """The sleeping thread is done with this alarm."""


class LoopAlarm(Protocol):
    """One asyncio task's wake-up: at a deadline, or once something else it waits for is done."""

    async def sleep_until(self, deadline: float, *wakes: asyncio.Future[Any]) -> None:
        """Return at ``deadline`` (by the clock's time) or once one of ``wakes`` is done (left running, not cancelled)."""

    def close(self) -> None:
        """The task is done with this alarm."""


class Clock(Protocol):
    """Time as a driver reads it, and how it waits."""

    def now(self) -> float:
        """Seconds on a clock that never goes back."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""

    def alarm(self) -> Alarm:
        """An alarm for one thread that sleeps until deadlines."""

    def loop_alarm(self) -> LoopAlarm:
        """An alarm for one task of the running asyncio loop that sleeps until deadlines."""


class _EventAlarm:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._event = threading.Event()

    def sleep_until(self, deadline: float) -> None:
        self._event.wait(max(0.0, deadline - self._clock.now()))
        self._event.clear()

    def ring(self) -> None:
        self._event.set()

    def close(self) -> None:
        pass


class _LoopTimer:
    """The running loop's own timer: no thread, no polling, woken at the deadline as ``asyncio.wait`` is."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    async def sleep_until(self, deadline: float, *wakes: asyncio.Future[Any]) -> None:
        delay = max(0.0, deadline - self._clock.now())
        if wakes:
            await asyncio.wait(wakes, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(delay)

    def close(self) -> None:
        pass


class MonotonicClock:
    """The process's monotonic clock."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def alarm(self) -> Alarm:
        return _EventAlarm(self)

    def loop_alarm(self) -> LoopAlarm:
        return _LoopTimer(self)
