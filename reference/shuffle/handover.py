"""Records on their way from a writer task's producer to the thread that owns its machine.

The producer (the caller of ``WriterTask.run``) puts records as its input yields them (one lock,
no system call while the owner is busy); the owning thread takes everything waiting in one call and gives it to the machine as one batch, so the two
threads meet once per batch, not once per record or message. At most ``limit`` bytes wait or are
being carried out by the owner's round that took them (the record that crosses it is still taken;
the owner makes room once its round is done, so a waiting producer does not contend for the GIL
inside it): while the machine has no permits the owner takes nothing,
the hand-over fills and the producer waits, so what the producer can make the task hold is the
machine's permits plus ``limit``. The owner sleeps in its reactor's poll only after telling the
hand-over (:meth:`Handover.sleep`), and only then does a producer's put wake it: a busy owner
costs the producer no system call.
"""

from __future__ import annotations

import threading
from typing import Callable, Final

from spec.shuffle.messages import Payload

Record = tuple[int, Payload]

WAIT_S: Final = 0.05
"""How often a producer waiting for room looks at its task's cancellation."""


class Handover:
    """A bounded batch of ``(reader_id, record)`` pairs between one producer and one owner."""

    def __init__(self, limit: int, wake: Callable[[], None], cancel: threading.Event) -> None:
        """``wake`` interrupts the owner's poll; ``cancel`` (the task's) releases a waiting producer."""
        self._limit = limit
        self._wake = wake
        self._cancel = cancel
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._records: list[Record] = []
        self._bytes = 0
        """Bytes waiting or taken and not yet made room for."""
        self._taken = 0
        """Of those, the bytes taken."""
        self._ended = False
        self._owner_asleep = False
        self._producer_waiting = False

    def put(self, reader_id: int, record: Payload) -> bool:
        """Give one record; False if the task was cancelled (the record is not taken)."""
        with self._lock:
            if not self._wait_for_room():
                return False
            self._records.append((reader_id, record))
            self._bytes += len(record)
            wake = self._owner_asleep
            self._owner_asleep = False
        if wake:
            self._wake()
        return True

    def _wait_for_room(self) -> bool:
        if self._bytes < self._limit:
            return not self._cancel.is_set()
        while self._bytes >= self._limit and not self._cancel.is_set():
            self._producer_waiting = True
            self._room.wait(WAIT_S)
        self._producer_waiting = False
        return not self._cancel.is_set()

    def end(self) -> None:
        """The producer's input ended."""
        with self._lock:
            self._ended = True
            wake, self._owner_asleep = self._owner_asleep, False
        if wake:
            self._wake()

    def take(self) -> tuple[list[Record], bool]:
        """(owner) Every record waiting, and whether the input ended after them; their bytes count against the
        limit until :meth:`make_room`."""
        with self._lock:
            records, self._records = self._records, []
            self._taken = self._bytes
            return records, self._ended

    def make_room(self) -> None:
        """(owner) Done with what it took (given to the machine, sent): those bytes stop counting against the
        limit and a producer waiting for room goes on. Not at the take: woken there, the producer would want the
        GIL at every call of the owner's round that lets it go (each cipher call, each send), and the owner would
        wait for it back after each (issue 41: most of the GCM sealing's samples)."""
        with self._lock:
            self._bytes -= self._taken
            self._taken = 0
            if self._producer_waiting:
                self._room.notify()

    def sleep(self) -> bool:
        """(owner) About to wait in the poll for records: False when some are already waiting (take
        them instead); otherwise the next put wakes the owner."""
        with self._lock:
            if self._records or self._ended:
                return False
            self._owner_asleep = True
            return True

    def awake(self) -> None:
        """(owner) Back from the poll: puts need not wake it."""
        self._owner_asleep = False
