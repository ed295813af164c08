"""The sync runtime's one source of time: what it reads ``now`` from, and how it sleeps until a deadline.

The endpoints (``spec.sync.server``, ``spec.sync.client``) decide every deadline; a driver only asks
its clock for ``now``, hands it to them, and sleeps until the deadline they return (or until it is
woken: an ``Alarm`` rung by another thread).  Injecting the clock is what lets a harness run a
server on a clock that moves only when told (``conformance.sync.clock.ManualClock``).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Alarm(Protocol):
    """One sleeping thread's wake-up: at a deadline, or once rung by another thread."""

    def sleep_until(self, deadline: float) -> None:
        """Return at ``deadline`` (by the clock's time) or once rung since the last return."""

    def ring(self) -> None:
        """Wake the sleeper now (or at once at its next sleep)."""

    def close(self) -> None:
        """The sleeping thread is done with this alarm."""


class Clock(Protocol):
    """Time as a driver reads it, and how it waits."""

    def now(self) -> float:
        """Seconds on a clock that never goes back."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""

    def alarm(self) -> Alarm:
        """An alarm for one thread that sleeps until deadlines."""


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


class MonotonicClock:
    """The process's monotonic clock."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def alarm(self) -> Alarm:
        return _EventAlarm(self)
