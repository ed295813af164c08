"""``SyncClient``: sends one origin's transactions, retries when told to, replays after a restart.

The client keeps every transaction that is not yet durable.  It probes whenever it
(re)connects; a response with ``first=true``, or with a memory number below the last
one it was told (``first`` reaches only one of a server's origins), means the server
restarted and lost what it held in memory, so the client drops what the server reports
durable and sends the rest again, in order, before continuing.  ``accepted=false`` and
connection failures are retried with capped exponential backoff until a deadline.
A put resent after a connection failure whose transaction the server already reports
in memory (the answer was lost, not the put) is not sent again: the server would
refuse a non-increasing sequence number that is not yet durable.

A restart that no request observes as a failure and that is first reported by a
data put (rather than the probe) leaves that put ahead of the replay; the client
still replays, but exactness then relies on full-value changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.flight as flight

from spec.sync.messages import ColumnDescriptor, SyncCommand, SyncResponse, decode_response
from spec.sync.responses import shows_restart
from reference.sync.auth import ClientSecurity


class SyncUnavailable(Exception):
    """The server did not accept a put before the client's deadline."""

    condition = "SYNC_UNAVAILABLE"


@dataclass(frozen=True)
class SyncPut:
    """One put of a transaction: a batch of changes for the table at ``path``."""

    path: str
    batch: pa.Table
    descriptors: tuple[ColumnDescriptor, ...]


@dataclass(frozen=True)
class _Tx:
    sequence: int
    puts: tuple[SyncPut, ...]


class _Restarted(Exception):
    """Internal: the server answered with first=true after this client had talked to it."""

    def __init__(self, durable: int | None) -> None:
        super().__init__(durable)
        self.durable = durable


_RETRYABLE = (flight.FlightUnavailableError, flight.FlightTimedOutError, flight.FlightCancelledError, OSError)


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
    ) -> None:
        self._resolve = location if callable(location) else (lambda: location)
        self.origin = origin
        self.deadline_s = deadline_s
        self.call_timeout_s = call_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self.security = security
        self._lock = threading.RLock()
        self._client: flight.FlightClient | None = None
        self._pending: list[_Tx] = []
        self.memory: int | None = None
        self.durable: int | None = None
        self.restarts_seen = 0
        self.replayed_transactions = 0

    # -- public -----------------------------------------------------------
    def probe(self) -> SyncResponse:
        """Ask for the current numbers (a put with no rows and no sequence)."""
        with self._lock:
            try:
                return self._call_with_retry(None, None)
            except _Restarted as restart:
                self.restarts_seen += 1
                self._trim(restart.durable)
                return self._deliver(-1)

    def send_transaction(self, sequence: int, puts: Sequence[SyncPut]) -> SyncResponse:
        """Send one transaction; only its last put carries ``sequence``."""
        if not puts:
            raise ValueError("a transaction needs at least one put")
        with self._lock:
            if self._pending and sequence <= self._pending[-1].sequence:
                raise ValueError(f"sequence {sequence} does not follow {self._pending[-1].sequence}")
            previous = self._pending[-1].sequence if self._pending else -1
            self._pending.append(_Tx(sequence, tuple(puts)))
            return self._deliver(previous)

    @property
    def pending_transactions(self) -> int:
        """Transactions sent but not yet reported durable."""
        return len(self._pending)

    def close(self) -> None:
        """Drop the connection."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- delivery -----------------------------------------------------------
    def _deliver(self, after: int) -> SyncResponse:
        """Send every pending transaction with a sequence above ``after``, in order.

        Responses trim the pending list as transactions become durable, so the next
        transaction is found by sequence, never by position.
        """
        sent = after
        response: SyncResponse | None = None
        while True:
            try:
                if self._client is None:
                    response = self._call_with_retry(None, None)  # learn the server's numbers first
                while (tx := next((t for t in self._pending if t.sequence > sent), None)) is not None:
                    if self.memory is not None and tx.sequence <= self.memory:
                        # The server holds it already (sent by us, or by an earlier run of this origin).
                        sent = tx.sequence
                        continue
                    for i, put in enumerate(tx.puts):
                        last = i == len(tx.puts) - 1
                        response = self._call_with_retry(put, tx.sequence if last else None)
                    sent = tx.sequence
                if response is None:
                    response = self._call_with_retry(None, None)
                return response
            except _Restarted as restart:
                self.restarts_seen += 1
                self._trim(restart.durable)
                self.replayed_transactions += len(self._pending)
                sent = -1

    def _trim(self, durable: int | None) -> None:
        if durable is not None:
            self._pending = [tx for tx in self._pending if tx.sequence > durable]

    def _call_with_retry(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        deadline = time.monotonic() + self.deadline_s
        backoff = self.backoff_initial_s
        attempted = False
        while True:
            try:
                fresh = self._client is None
                if fresh:
                    probe = self._connect()
                    if attempted and sequence is not None and (probe.memory_sequence_number or -1) >= sequence:
                        return probe
                attempted = True
                response = self._call(put, sequence)
                if not fresh and shows_restart(response, self.memory):
                    self._observe(response)
                    raise _Restarted(response.durable_sequence_number)
                if response.accepted:
                    self._observe(response)
                    return response
            except _RETRYABLE:
                self.close()
            except flight.FlightInternalError as exc:
                if "Connection" not in str(exc) and "connect" not in str(exc):
                    raise
                self.close()
            if time.monotonic() + backoff > deadline:
                raise SyncUnavailable(f"sync server did not accept a put within {self.deadline_s}s")
            self._sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max_s)

    def _connect(self) -> SyncResponse:
        """Open a connection and probe it, so a restart is seen before any data is sent."""
        self._client = self.security.connect(self._resolve())
        response = self._call(None, None)
        restarted = shows_restart(response, self.memory)
        self._observe(response)
        if restarted and self._pending:
            raise _Restarted(response.durable_sequence_number)
        return response

    def _observe(self, response: SyncResponse) -> None:
        if response.accepted:
            self.memory, self.durable = response.memory_sequence_number, response.durable_sequence_number
            self._trim(self.durable)

    def _call(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        assert self._client is not None
        cmd = SyncCommand(
            path=put.path if put else "",
            origin=self.origin,
            column_descriptors=put.descriptors if put else (),
            sequence_number=sequence,
        )
        descriptor = flight.FlightDescriptor.for_command(cmd.to_descriptor_cmd())
        schema = put.batch.schema if put else pa.schema([])
        options = flight.FlightCallOptions(timeout=self.call_timeout_s, headers=self.security.call_headers())
        writer, reader = self._client.do_put(descriptor, schema, options=options)
        try:
            if put is not None and put.batch.num_rows:
                writer.write_table(put.batch)
            writer.done_writing()
            buf = reader.read()
        finally:
            writer.close()
        if buf is None:
            raise flight.FlightInternalError("server sent no PutResult")
        return decode_response(buf.to_pybytes())
