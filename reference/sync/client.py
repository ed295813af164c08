"""``SyncClient``: sends one origin's transactions, retries when told to, replays after a restart.

The decisions are the sans-IO machine's (spec/sync/client.py): what a response means, what the
server already holds (skipped, or waited for), what goes again after a restart. This module does
the I/O: it probes whenever it (re)connects, so a restart is seen before any data is sent, and
retries ``accepted=false``, connection failures and busy refusals (the machine's ``after_failure``)
with capped exponential backoff and jitter until a deadline. A put resent after a connection
failure whose transaction the server already reports in memory (the answer was lost, not the
put) is not sent again: the server would refuse a non-increasing sequence number that is not
yet durable.

A restart that no request observes as a failure and that is first reported by a
data put (rather than the probe) leaves that put ahead of the replay; the client
still replays, but exactness then relies on full-value changes.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.flight as flight

from spec.errors import RuntimeFailure
from spec.sync.client import (
    OUTAGE_WARNING_EVERY_S, AfterFailure, Backoff, Fault, Holding, Reading, SyncClientMachine, after_failure,
    outage_warning_due,
)
from spec.sync.flight import MESSAGE_BYTES, message_batches
from spec.sync.messages import ColumnDescriptor, SyncCommand, SyncResponse, decode_response
from reference.sync.auth import ClientSecurity
from streamwire.cli import one_line


log = logging.getLogger(__name__)


class SyncUnavailable(RuntimeFailure):
    """The server did not accept a put before the client's deadline."""

    condition = "SYNC_UNAVAILABLE"


@dataclass(frozen=True)
class SyncPut:
    """One put of a transaction: a batch of changes for the table at ``path``."""

    path: str
    batch: pa.Table
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
        sleep: Callable[[float], None] = time.sleep,
        security: ClientSecurity = ClientSecurity(),
        message_bytes: int = MESSAGE_BYTES,
    ) -> None:
        self._resolve = location if callable(location) else (lambda: location)
        self.origin = origin
        self.deadline_s = deadline_s
        self.call_timeout_s = call_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self.security = security
        self.message_bytes = message_bytes
        """How large each record batch message of a put is made (keep it under the server's message limit)."""
        self._lock = threading.RLock()
        self._client: flight.FlightClient | None = None
        self._machine: SyncClientMachine[Sequence[SyncPut]] = SyncClientMachine()
        self._location = ""
        self._last_failure = ""

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
        deadline = time.monotonic() + (self.deadline_s if deadline_s is None else deadline_s)
        while True:
            self.probe()
            if self.holding(sequence) is Holding.DURABLE:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(self._not_durable(sequence, deadline_s or self.deadline_s))
            self._sleep(poll_s)

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
                self._machine.replay()
                sent = -1

    def _call_with_retry(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        started = time.monotonic()
        backoff = Backoff(self.backoff_initial_s, self.backoff_max_s, started + self.deadline_s)
        attempted = False
        warned = 0
        while True:
            try:
                fresh = self._client is None
                if fresh:
                    probe = self._connect()
                    if attempted and sequence is not None and self.holding(sequence) is not Holding.NOTHING:
                        self._answers_again(started, warned)
                        return probe  # the put arrived, its answer was lost
                attempted = True
                response = self._call(put, sequence)
                reading = self._machine.read(response, check_restart=not fresh)
                if reading is Reading.RESTARTED:
                    self._answers_again(started, warned)
                    raise _Restarted()
                if reading is Reading.ACCEPTED:
                    self._answers_again(started, warned)
                    return response
                self._last_failure = "the server answered accepted=false (busy: its write lock was held)"
            except (flight.FlightError, pa.ArrowException, OSError) as error:
                fault = _fault(error)
                then = after_failure(fault, str(error))
                if then is AfterFailure.REPLAY:
                    raise _Restarted() from None
                if then is AfterFailure.FAIL:
                    raise
                self._last_failure = one_line(error)
                if fault is not Fault.REFUSED:  # the connection may be gone; a busy answer leaves it as it is
                    self.close()
            if outage_warning_due(time.monotonic() - started, warned):
                warned += 1
                log.warning("sync server %s has not accepted a put of origin %s for over %g s (retrying for up "
                            "to %g s): %s", self.location, self.origin, warned * OUTAGE_WARNING_EVERY_S,
                            self.deadline_s, self._last_failure)
            wait = backoff.wait(time.monotonic(), _JITTER.random())
            if wait is None:
                raise SyncUnavailable(f"sync server {self._location or '(not resolved)'} did not accept a put of origin {self.origin} "
                                      f"within {self.deadline_s:g} s; last: {self._last_failure}")
            self._sleep(wait)

    def _answers_again(self, started: float, warned: int) -> None:
        if warned:
            log.warning("sync server %s answers origin %s again after %.0f s", self.location, self.origin,
                        time.monotonic() - started)

    def _connect(self) -> SyncResponse:
        """Open a connection and probe it, so a restart is seen before any data is sent."""
        self._location = self._resolve()
        self._client = self.security.connect(self._location)
        response = self._call(None, None)
        if self._machine.read(response) is Reading.RESTARTED and self._machine.pending:
            raise _Restarted()
        return response

    def _call(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        assert self._client is not None
        cmd = SyncCommand(
            path=put.path if put else "",
            origin=self.origin,
            column_descriptors=put.descriptors if put else (),
            sequence_number=sequence,
            truncate=put.truncate if put else False,
        )
        descriptor = flight.FlightDescriptor.for_command(cmd.to_descriptor_cmd())
        schema = put.batch.schema if put else pa.schema([])
        options = flight.FlightCallOptions(timeout=self.call_timeout_s, headers=self.security.call_headers())
        writer, reader = self._client.do_put(descriptor, schema, options=options)
        try:
            if put is not None and put.batch.num_rows:
                for batch in message_batches(put.batch, self.message_bytes):
                    writer.write_batch(batch)
            writer.done_writing()
            buf = reader.read()
        finally:
            writer.close()
        if buf is None:
            raise flight.FlightInternalError("server sent no PutResult")
        return decode_response(buf.to_pybytes())


