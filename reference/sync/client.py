"""``SyncClient``: sends one origin's transactions, retries when told to, replays after a restart.

The decisions are the sans-IO machine's (spec/sync/client.py): what a response means, what the
server already holds (skipped, or waited for), what goes again after a restart, which failures
are retried, how long to wait between tries and when to give up (``RequestTries``), and that a
put whose answer was lost is not sent again. This module does the I/O: it connects and probes
whenever it (re)connects, calls, maps a failed call to its ``Fault``, does what the machine says
next and sleeps on its injected clock (``reference.sync.clock``).

A restart that no request observes as a failure and that is first reported by a
data put (rather than the probe) leaves that put ahead of the replay; the client
still replays, but exactness then relies on full-value changes.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.flight as flight

from spec.clock import after
from spec.errors import RuntimeFailure
from spec.sync.client import (
    OUTAGE_WARNING_EVERY_S, DurableWait, Fault, Holding, RequestTries, SyncClientMachine, Then, durable_wait,
    keeps_connection,
)
from spec.sync.flight import MESSAGE_BYTES, message_batches
from spec.sync.messages import ColumnDescriptor, SyncCommand, SyncResponse, decode_response
from reference.sync.credentials import ClientSecurity
from reference.sync.clock import Clock, MonotonicClock
from streamwire.cli import one_line


log = logging.getLogger(__name__)


class SyncUnavailable(RuntimeFailure):
    """The server did not accept a put before the client's deadline."""

    condition = "SYNC_UNAVAILABLE"


class PutRows(Protocol):
    """A put's rows read a piece at a time (a part held on disk: reference/cdc/spill.py), sent as the put's
    messages in order."""

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def num_rows(self) -> int: ...

    def tables(self) -> Iterator[pa.Table]:
        """The rows in order, one piece at a time (each of ``schema``)."""
        ...


@dataclass(frozen=True)
class SyncPut:
    """One put of a transaction: a batch of changes for the table at ``path``."""

    path: str
    batch: pa.Table | PutRows
    descriptors: tuple[ColumnDescriptor, ...]
    truncate: bool = False
    """Empty the table before this put's rows (the truncate extension: only to a server that has it)."""


class _Restarted(Exception):
    """Internal: a response showed that the server lost its memory since the last one."""


_JITTER = random.Random()


def _fault(error: BaseException) -> Fault:
    """The status class pyarrow raised, as the client machine reads it (a refused or lost connection is
    ``UNAVAILABLE`` in gRPC, so pyarrow raises FlightUnavailableError for it)."""
    if isinstance(error, (flight.FlightUnavailableError, OSError)):
        return Fault.UNREACHABLE
    if isinstance(error, flight.FlightTimedOutError):
        return Fault.TIMED_OUT
    if isinstance(error, flight.FlightCancelledError):
        return Fault.CANCELLED
    return Fault.REFUSED


class SyncClient:
    """Delivers transactions of ``origin`` to a sync server at ``location`` (or a resolver of it).

    ``security`` carries the bearer token and the CA file of a server that requires them.
    """

    def __init__(
        self,
        location: str | Callable[[], str],
        origin: str,
        *,
        deadline_s: float = 60.0,
        call_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.02,
        backoff_max_s: float = 1.0,
        clock: Clock = MonotonicClock(),
        security: ClientSecurity = ClientSecurity(),
        message_bytes: int = MESSAGE_BYTES,
    ) -> None:
        self._resolve = location if callable(location) else (lambda: location)
        self.origin = origin
        self.deadline_s = deadline_s
        self.call_timeout_s = call_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._clock = clock
        self.security = security
        self.message_bytes = message_bytes
        """How large each record batch message of a put is made (keep it under the server's message limit)."""
        self._lock = threading.RLock()
        self._client: flight.FlightClient | None = None
        self._machine: SyncClientMachine[Sequence[SyncPut]] = SyncClientMachine()
        self._location = ""

    # -- public -----------------------------------------------------------
    @property
    def memory(self) -> int | None:
        """The origin's memory number, as the server last reported it."""
        return self._machine.memory

    @property
    def durable(self) -> int | None:
        """The origin's durable number, as the server last reported it."""
        return self._machine.durable

    @property
    def restarts_seen(self) -> int:
        """Server restarts this client has seen."""
        return self._machine.restarts_seen

    @property
    def replayed_transactions(self) -> int:
        """Transactions sent again after a restart."""
        return self._machine.replayed_transactions

    @property
    def location(self) -> str:
        """Where the server was last looked for."""
        return self._location or "(not resolved)"

    def holding(self, sequence: int) -> Holding:
        """What the server holds of transaction ``sequence``, by the numbers it last reported."""
        return self._machine.holding(sequence)

    def probe(self) -> SyncResponse:
        """Ask for the current numbers (a put with no rows and no sequence)."""
        with self._lock:
            try:
                return self._call_with_retry(None, None)
            except _Restarted:
                return self._deliver(-1)

    def send_transaction(self, sequence: int, puts: Sequence[SyncPut]) -> SyncResponse:
        """Send one transaction (unless the server holds it already); only its last put carries ``sequence``.
        ``puts`` is kept as it is until durable: a sequence that reads each put when indexed (a spilled
        transaction, reference/cdc/spill.py) holds one put at a time; the caller must not change it."""
        if not puts:
            raise ValueError("a transaction needs at least one put")
        with self._lock:
            return self._deliver(self._machine.add(sequence, puts))

    def resume(self) -> SyncResponse:
        """After a :class:`SyncUnavailable`: deliver every pending transaction the server does not hold, in order
        (a probe when none is pending)."""
        with self._lock:
            return self._deliver(-1)

    def wait_durable(self, sequence: int, deadline_s: float | None = None, poll_s: float = 0.05) -> None:
        """Probe until the server reports ``sequence`` durable (a restart meanwhile resends what it lost).

        Raises TimeoutError naming what waited: the server holding the transaction in memory
        without flushing it, or not holding it at all."""
        deadline = after(self._clock.now(), self.deadline_s if deadline_s is None else deadline_s)
        while True:
            self.probe()
            wait = durable_wait(self.holding(sequence), self._clock.now(), deadline)
            if wait is DurableWait.DONE:
                return
            if wait is DurableWait.TIMED_OUT:
                raise TimeoutError(self._not_durable(sequence, deadline_s or self.deadline_s))
            self._clock.sleep(poll_s)

    def _not_durable(self, sequence: int, waited_s: float) -> str:
        where = (f"the server holds it in memory (memory {self.memory}, durable {self.durable}) and did not flush "
                 "it to the table: a table is flushed once its oldest change is --max-replication-lag-s old"
                 if self.holding(sequence) is Holding.MEMORY else
                 f"the server does not hold it (memory {self.memory}, durable {self.durable})")
        return f"transaction {sequence} of origin {self.origin} not durable after {waited_s:g} s: {where}"

    def close(self) -> None:
        """Drop the connection."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- delivery -----------------------------------------------------------
    def _deliver(self, after: int) -> SyncResponse:
        """Send every pending transaction above ``after`` that the server does not hold, in order."""
        sent = after
        response: SyncResponse | None = None
        while True:
            try:
                if self._client is None:
                    response = self._call_with_retry(None, None)  # learn the server's numbers first
                while (tx := self._machine.next_to_send(sent)) is not None:
                    sequence, puts = tx
                    for i in range(len(puts)):
                        last = i == len(puts) - 1
                        response = self._call_with_retry(puts[i], sequence if last else None)
                    sent = sequence
                if response is None:
                    response = self._call_with_retry(None, None)
                return response
            except _Restarted:
                sent = self._machine.replay()

    def _call_with_retry(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        """Carry out one request's tries (``RequestTries``): connect and probe when not connected, call,
        and do what the machine says after each answer or failure."""
        tries = RequestTries.start(self._machine, sequence, self._clock.now(), initial_s=self.backoff_initial_s,
                                   max_s=self.backoff_max_s, deadline_s=self.deadline_s)
        while True:
            try:
                fresh = self._client is None
                if fresh:
                    probe = self._connect()
                    then = tries.connected(probe)
                    if then is Then.ANSWER_LOST:
                        self._answers_again(tries)
                        return probe
                    if then is Then.REPLAY:
                        raise _Restarted()
                tries.sending()
                response = self._call(put, sequence)
                then = tries.answered(response, fresh=fresh)
                if then is Then.REPLAY:
                    self._answers_again(tries)
                    raise _Restarted()
                if then is Then.ANSWERED:
                    self._answers_again(tries)
                    return response
            except (flight.FlightError, pa.ArrowException, OSError) as error:
                fault = _fault(error)
                then = tries.failed(fault, one_line(error))
                if then is Then.REPLAY:
                    raise _Restarted() from None
                if then is Then.FAIL:
                    raise
                if then is Then.RECONNECT or not keeps_connection(fault):
                    self.close()
            if tries.warning_due(self._clock.now()):
                log.warning("sync server %s has not accepted a put of origin %s for over %g s (retrying for up "
                            "to %g s): %s", self.location, self.origin, tries.warned * OUTAGE_WARNING_EVERY_S,
                            self.deadline_s, tries.last_failure)
            wait = tries.wait(self._clock.now(), _JITTER.random())
            if wait is None:
                raise SyncUnavailable(f"sync server {self._location or '(not resolved)'} did not accept a put of origin {self.origin} "
                                      f"within {self.deadline_s:g} s; last: {tries.last_failure}")
            self._clock.sleep(wait)

    def _answers_again(self, tries: RequestTries[Sequence[SyncPut]]) -> None:
        if tries.warned:
            log.warning("sync server %s answers origin %s again after %.0f s", self.location, self.origin,
                        self._clock.now() - tries.started)

    def _connect(self) -> SyncResponse:
        """Open a connection and probe it, so a restart is seen before any data is sent."""
        self._location = self._resolve()
        self._client = self.security.connect(self._location)
        return self._call(None, None)

    def _call(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        assert self._client is not None
        cmd = SyncCommand(
            path=put.path if put else "",
            origin=self.origin,
            column_descriptors=put.descriptors if put else (),
            sequence_number=sequence,
            truncate=put.truncate if put else False,
            server_life=self._machine.life,
        )
        descriptor = flight.FlightDescriptor.for_command(cmd.to_descriptor_cmd())
        schema = put.batch.schema if put else pa.schema([])
        options = flight.FlightCallOptions(timeout=self.call_timeout_s, headers=self.security.call_headers())
        writer, reader = self._client.do_put(descriptor, schema, options=options)
        try:
            if put is not None and put.batch.num_rows:
                rows = put.batch
                for table in [rows] if isinstance(rows, pa.Table) else rows.tables():
                    for batch in message_batches(table, self.message_bytes):
                        writer.write_batch(batch)
            writer.done_writing()
            buf = reader.read()
        finally:
            writer.close()
        if buf is None:
            raise flight.FlightInternalError("server sent no PutResult")
        return decode_response(buf.to_pybytes())


