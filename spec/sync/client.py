"""The sync client of one origin, sans-IO: what a response means, what the server already holds,
and what to send (again). Every client (a Spark sink, the pipeline's sinks) decides through it.

A client keeps every transaction until the server reports it durable. Where a transaction's
number stands against the origin's numbers the server last reported says what the server holds
(``Holding``): above the memory number, nothing (send it); at or below the durable number, the
table holds it (skip it: a replay is acknowledged and never applied); in between, the server's
memory holds it (never send it again, the server would refuse the number: wait until durable).
A response that shows a restart (``shows_restart``: the server lost its memory) trims what it
reports durable; the client then sends the rest again, in order, from the first.

A call that fails is read too (``after_failure``): a lost connection, a timeout or a busy server
(every put slot taken, another origin's transaction open, a server draining) is tried again after
a capped exponential backoff with jitter (``Backoff``) until the client's deadline; a discarded
transaction is replayed; any other refusal is the caller's to see.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from spec.sync.errors import InterleavedTransaction, PutSlotsBusy, ServerDraining, TransactionDiscarded, condition_in
from spec.sync.messages import SyncResponse
from spec.sync.responses import shows_restart

T = TypeVar("T")

OUTAGE_WARNING_EVERY_S: Final = 5.0
"""How often a client that keeps failing to reach its server says so: an outage the client rides
out (retrying until its deadline) must not look like a slow batch."""


def outage_warning_due(failing_for_s: float, warned: int) -> bool:
    """Whether a client failing for ``failing_for_s`` seconds, that warned ``warned`` times, warns now."""
    return failing_for_s >= (warned + 1) * OUTAGE_WARNING_EVERY_S


class Holding(enum.Enum):
    """What the server holds of one transaction, by the numbers it last reported."""

    NOTHING = "nothing"
    """Above the memory number: the server has not received it; send it."""
    MEMORY = "memory"
    """At or below memory, above durable: received, not yet in the table; wait, never resend."""
    DURABLE = "durable"
    """At or below durable: the table holds it; a replay is skipped."""


def holding(sequence: int, memory: int | None, durable: int | None) -> Holding:
    """Where ``sequence`` stands against an origin's ``memory`` and ``durable`` numbers."""
    if durable is not None and sequence <= durable:
        return Holding.DURABLE
    if memory is not None and sequence <= memory:
        return Holding.MEMORY
    return Holding.NOTHING


class Reading(enum.Enum):
    """What one response means to the client that received it."""

    ACCEPTED = "accepted"
    RETRY = "retry"
    """``accepted=false``: the server was busy; send the same request again later."""
    RESTARTED = "restarted"
    """The server lost its memory since the client's last response: replay from the first pending."""


@dataclass
class SyncClientMachine(Generic[T]):
    """One origin's numbers as last reported, and its transactions not yet durable (``T``: their puts)."""

    memory: int | None = None
    durable: int | None = None
    pending: list[tuple[int, T]] = field(default_factory=list)
    restarts_seen: int = 0
    """Restarts of the server this client lived through: responses showing that the server lost
    what it held since an earlier response to this client. A ``first`` answering the client's
    first request is read as RESTARTED (replay whatever is pending) but is no restart it saw: the
    server's first response of its life went to a client that had never heard from it."""
    replayed_transactions: int = 0
    heard: bool = False
    """Whether any response reached this client yet."""

    def holding(self, sequence: int) -> Holding:
        """What the server holds of transaction ``sequence``, by the numbers it last reported."""
        return holding(sequence, self.memory, self.durable)

    def add(self, sequence: int, transaction: T) -> int:
        """Keep a new transaction until durable; returns the number it follows (-1: none pending).
        Raises ValueError when ``sequence`` does not follow the last pending one."""
        previous = self.pending[-1][0] if self.pending else -1
        if self.pending and sequence <= previous:
            raise ValueError(f"sequence {sequence} does not follow {previous}")
        self.pending.append((sequence, transaction))
        return previous

    def read(self, response: SyncResponse, *, check_restart: bool = True) -> Reading:
        """Take in a response. ``check_restart`` False: it answers a request sent right after this
        connection's probe was read, which already showed any restart."""
        restarted = check_restart and shows_restart(response, self.memory)
        heard_before, self.heard = self.heard, True
        if response.accepted:
            self.memory, self.durable = response.memory_sequence_number, response.durable_sequence_number
            self.pending = [(s, t) for s, t in self.pending if self.holding(s) is not Holding.DURABLE]
        if restarted:
            if heard_before:
                self.restarts_seen += 1
            return Reading.RESTARTED
        return Reading.ACCEPTED if response.accepted else Reading.RETRY

    def replay(self) -> None:
        """A restart was read: every pending transaction goes again, from the first."""
        self.replayed_transactions += len(self.pending)

    def next_to_send(self, after: int) -> tuple[int, T] | None:
        """The first pending transaction above ``after`` that the server does not hold."""
        return next(((s, t) for s, t in self.pending if s > after and self.holding(s) is Holding.NOTHING), None)


class Fault(enum.Enum):
    """How a call failed, as the client's transport saw it."""

    UNREACHABLE = "unreachable"
    """No answer: the connection was refused or lost (gRPC ``UNAVAILABLE``)."""
    TIMED_OUT = "timed out"
    """The call's deadline, or one of the server's, passed (``DEADLINE_EXCEEDED``)."""
    CANCELLED = "cancelled"
    REFUSED = "refused"
    """Any other status: the server's answer, whose text may carry a condition (``condition_in``)."""


class AfterFailure(enum.Enum):
    """What a client does after a failed call."""

    RETRY = "retry"
    """Send the same request again after a backoff, until the deadline."""
    REPLAY = "replay"
    """The server discarded this origin's open transaction: send the pending ones again from the first."""
    FAIL = "fail"
    """The server refused the request itself: sending it again would be refused again."""


BUSY_CONDITIONS = frozenset({PutSlotsBusy.condition, InterleavedTransaction.condition, ServerDraining.condition})
"""Refusals that say "not now": the same request succeeds once the server (or another origin) is done."""


def after_failure(fault: Fault, text: str) -> AfterFailure:
    """What to do after a call failed with ``fault`` and the status text ``text``."""
    if fault is not Fault.REFUSED:
        return AfterFailure.RETRY
    condition = condition_in(text)
    if condition == TransactionDiscarded.condition:
        return AfterFailure.REPLAY
    return AfterFailure.RETRY if condition in BUSY_CONDITIONS else AfterFailure.FAIL


@dataclass
class Backoff:
    """Waits between tries of one request: doubling from ``initial_s`` up to ``max_s``, each drawn from
    the upper half of its step (so clients refused together do not come back together), never past
    the deadline."""

    initial_s: float
    max_s: float
    deadline: float
    tries: int = 0

    def wait(self, now: float, jitter: float) -> float | None:
        """Seconds to wait before the next try (``jitter`` uniform in [0, 1)); None: the deadline passed."""
        if now >= self.deadline:
            return None
        step: float = min(self.max_s, self.initial_s * 2.0 ** min(self.tries, 64))
        self.tries += 1
        return min(step * (0.5 + 0.5 * jitter), self.deadline - now)
