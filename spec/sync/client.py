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

One request's tries are a machine of their own (``RequestTries``): after a reconnection it reads
the new connection's probe first, so a restart is replayed before any data is sent, and a put
whose answer was lost (the probe shows the server holds its transaction) is not sent again; it
says after each answer or failure what the client does next (``Then``), how long it waits, and
when it warns of an outage.  The client's transport (``reference.sync.client``) only connects,
calls, maps a failed call to its ``Fault`` and sleeps on its clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from spec.clock import after, elapsed
from spec.sync.errors import (InterleavedTransaction, PutSlotsBusy, ServerDraining, ServerRestarted,
                              TransactionDiscarded, condition_in)
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
    life: int | None = None
    """The server life the last response named (the server-life extension): every put names it, so a
    restarted server refuses the put rather than record it unseen."""

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
        restarted = check_restart and shows_restart(response, self.memory, self.life)
        heard_before, self.heard = self.heard, True
        if response.server_life is not None:
            self.life = response.server_life
        if response.accepted:
            self.memory, self.durable = response.memory_sequence_number, response.durable_sequence_number
            self.pending = [(s, t) for s, t in self.pending if self.holding(s) is not Holding.DURABLE]
        if restarted:
            if heard_before:
                self.restarts_seen += 1
            return Reading.RESTARTED
        return Reading.ACCEPTED if response.accepted else Reading.RETRY

    def replay(self) -> int:
        """A restart was read: every pending transaction goes again, from the first; the number to
        send after (``next_to_send``): -1, none."""
        self.replayed_transactions += len(self.pending)
        return -1

    def next_to_send(self, after: int) -> tuple[int, T] | None:
        """The first pending transaction above ``after`` that the server does not hold."""
        return next(((s, t) for s, t in self.pending if s > after and self.holding(s) is Holding.NOTHING), None)


class Then(enum.Enum):
    """What the client does next with one request."""

    SEND = "send"
    """Send the request (again) on the connection."""
    ANSWERED = "answered"
    """The request was accepted: its response is the answer."""
    ANSWER_LOST = "answer lost"
    """The put arrived but its answer was lost with the connection: the new connection's probe is
    the answer, and the put is not sent again (the server would refuse its number as not increasing)."""
    REPLAY = "replay"
    """The server lost this origin's pending transactions (a restart, a discarded transaction): send
    them again, from the first."""
    RETRY = "retry"
    """Not now (busy, unreachable, timed out): wait ``RequestTries.wait`` then try again."""
    RECONNECT = "reconnect"
    """The server is not the one this client last heard from (it refused the put, unrecorded): drop the
    connection and try again after the backoff; the new connection's probe shows the restart."""
    FAIL = "fail"
    """The server refused the request itself: the caller sees the refusal."""


class Fault(enum.Enum):
    """How a call failed, as the client's transport saw it."""

    UNREACHABLE = "unreachable"
    """No answer: the connection was refused or lost (gRPC ``UNAVAILABLE``)."""
    TIMED_OUT = "timed out"
    """The call's deadline, or one of the server's, passed (``DEADLINE_EXCEEDED``)."""
    CANCELLED = "cancelled"
    REFUSED = "refused"
    """Any other status: the server's answer, whose text may carry a condition (``condition_in``)."""


BUSY_CONDITIONS = frozenset({PutSlotsBusy.condition, InterleavedTransaction.condition, ServerDraining.condition})
"""Refusals that say "not now": the same request succeeds once the server (or another origin) is done."""


def after_failure(fault: Fault, text: str) -> Then:
    """What to do after a call failed with ``fault`` and the status text ``text``: RETRY, REPLAY (the
    server discarded this origin's open transaction), RECONNECT (the server restarted since the client
    last heard from it) or FAIL (sending it again would be refused again)."""
    if fault is not Fault.REFUSED:
        return Then.RETRY
    condition = condition_in(text)
    if condition == TransactionDiscarded.condition:
        return Then.REPLAY
    if condition == ServerRestarted.condition:
        return Then.RECONNECT
    return Then.RETRY if condition in BUSY_CONDITIONS else Then.FAIL


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
        return min(step * (0.5 + 0.5 * jitter), elapsed(now, self.deadline))


BUSY_ANSWER = "the server answered accepted=false (busy: its write lock was held)"

AFTER_READING = {Reading.ACCEPTED: Then.ANSWERED, Reading.RETRY: Then.RETRY, Reading.RESTARTED: Then.REPLAY}
"""What a response read means for the request it answers."""


@dataclass
class RequestTries(Generic[T]):
    """One request of ``machine``'s origin tried until it is answered or the client's deadline passes.

    ``sequence`` is the number the request closes (None: a probe, or a put that closes nothing).
    """

    machine: SyncClientMachine[T]
    sequence: int | None
    started: float
    backoff: Backoff
    attempted: bool = False
    """Whether the request was sent at least once (so a lost answer may have been the server's)."""
    warned: int = 0
    last_failure: str = ""

    @classmethod
    def start(cls, machine: SyncClientMachine[T], sequence: int | None, now: float, *, initial_s: float,
              max_s: float, deadline_s: float) -> RequestTries[T]:
        return cls(machine, sequence, now, Backoff(initial_s, max_s, after(now, deadline_s)))

    def connected(self, probe: SyncResponse) -> Then:
        """A new connection answered its probe: replay if the server lost pending transactions, the
        probe is the answer if the put arrived before (its answer was lost), else send."""
        if self.machine.read(probe) is Reading.RESTARTED and self.machine.pending:
            return Then.REPLAY
        if self.attempted and self.sequence is not None and self.machine.holding(self.sequence) is not Holding.NOTHING:
            return Then.ANSWER_LOST
        return Then.SEND

    def sending(self) -> None:
        """The request goes out: from now on its answer may be lost after the server received it."""
        self.attempted = True

    def answered(self, response: SyncResponse, *, fresh: bool) -> Then:
        """The request's response (``fresh``: on a connection whose probe was just read, which showed any restart)."""
        then = AFTER_READING[self.machine.read(response, check_restart=not fresh)]
        if then is Then.RETRY:
            self.last_failure = BUSY_ANSWER
        return then

    def failed(self, fault: Fault, text: str) -> Then:
        """A call failed with ``fault`` and the status text ``text`` (one line)."""
        then = after_failure(fault, text)
        if then in (Then.RETRY, Then.RECONNECT):
            self.last_failure = text
        return then

    def warning_due(self, now: float) -> bool:
        """Whether to warn now that the server has not answered for a while (once per ``OUTAGE_WARNING_EVERY_S``)."""
        if not outage_warning_due(elapsed(self.started, now), self.warned):
            return False
        self.warned += 1
        return True

    def wait(self, now: float, jitter: float) -> float | None:
        """Seconds to wait before the next try (``jitter`` uniform in [0, 1)); None: the deadline passed, give up."""
        return self.backoff.wait(now, jitter)


def keeps_connection(fault: Fault) -> bool:
    """Whether the connection is kept after a call failed with ``fault``: a refusal (busy or not)
    leaves it as it is; any other failure may have broken it."""
    return fault is Fault.REFUSED


class DurableWait(enum.Enum):
    """Where a wait for a transaction to become durable stands after a probe."""

    DONE = "done"
    POLL = "poll"
    TIMED_OUT = "timed out"


def durable_wait(holding: Holding, now: float, deadline: float) -> DurableWait:
    """After a probe at ``now``: done once the server holds the transaction durable, else poll
    again until ``deadline``, then give up."""
    if holding is Holding.DURABLE:
        return DurableWait.DONE
    return DurableWait.TIMED_OUT if now > deadline else DurableWait.POLL
