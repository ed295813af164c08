"""Who runs a single-owner writer's machine: its owner, or its standby while the owner waits on its input.

The owner (the caller of ``WriterTask.run``) iterates the input and drives the machine, the reactor and
every connection itself, so no second thread takes the GIL from it per record or per batch. It lets go of
the machine only for the input's ``next()``, where it may block for as long as a streaming source waits
for data; the standby thread then stands in (the flush timer, the sockets: credits, acks, readers
binding, writes the kernel could not take at once) until the owner is back. One lock is the machine:
whoever holds it drives it. The owner takes it back without a system call unless the standby holds it,
and then wakes the standby's poll and waits for it to step out, so a record is never kept waiting for a
whole poll. The standby sleeps while the owner takes no input (a blocked machine, the end of the
input: the owner serves those itself) and is woken when it takes input again.
"""

from __future__ import annotations

import threading
from typing import Callable


class Ownership:
    """The machine of one writer task, held by its owner or, while the owner is inside ``next()``, its standby."""

    def __init__(self, wake: Callable[[], None]) -> None:
        """``wake`` interrupts the poll a standing-in standby waits in. The caller starts as the owner."""
        self._wake = wake
        self._machine = threading.Lock()
        self._machine.acquire()
        self._watch = threading.Condition(threading.Lock())
        self._taking = False
        self._parked = False
        self.wanted_back = False
        """(standby) The owner is back from ``next()``: step out at once."""

    # -- the owner --------------------------------------------------------------------------------

    def let_go(self) -> None:
        """(owner) About to call the input's ``next()``: the standby may stand in meanwhile."""
        self._machine.release()

    def take_back(self) -> None:
        """(owner) Back from ``next()``: hold the machine again, waking a standby that stands in."""
        if self._machine.acquire(False):
            return
        self.wanted_back = True
        self._wake()
        self._machine.acquire()
        self.wanted_back = False

    def taking_input(self) -> None:
        """(owner) It takes input again: the standby watches (woken if it was asleep)."""
        with self._watch:
            self._taking = True
            if self._parked:
                self._watch.notify()

    def not_taking_input(self) -> None:
        """(owner) It takes no input for now (the machine holds a record, or the input ended)."""
        self._taking = False

    @property
    def taking(self) -> bool:
        return self._taking

    # -- the standby ------------------------------------------------------------------------------

    def watch(self, timeout: float, stop: threading.Event) -> None:
        """(standby) Wait ``timeout`` while the owner takes input, else until it does again or ``stop`` is
        set (then :meth:`wake_watch`)."""
        with self._watch:
            if self._taking:
                self._watch.wait(timeout)
                return
            self._parked = True
            while not self._taking and not stop.is_set():
                self._watch.wait()
            self._parked = False

    def wake_watch(self) -> None:
        """Wake a waiting standby (the task is ending)."""
        with self._watch:
            self._watch.notify()

    def stand_in(self) -> bool:
        """(standby) Hold the machine if the owner is inside ``next()``; True when it does."""
        return self._machine.acquire(False)

    def step_out(self) -> None:
        """(standby) Give the machine back (the owner may be waiting for it)."""
        self._machine.release()
