"""One slot into one sync server: Postgres transactions coalesced into sync transactions.

The origin is the slot's name; a sync transaction's sequence number is the commit LSN of the last
Postgres transaction it holds (spec/pgoutput/coalesce.py); it travels as one put per table it
touched, the last put carrying the number, answered on a thread of its own while the stream is read
(one at a time, so in commit order). After each answer, and
whenever the stream is idle, the durable number the server reports for the origin is confirmed
to the slot (and nothing more), so a crash of this process or of the sync server replays from
the slot and the server skips what its tables hold. Transactions without rows for a published
table (only a logical decoding message, say) are not sent: the sync server refuses empty ones.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reference.cdc.pgwire import PgConnectionError, PgServerError
from reference.cdc.source import SlotSource
from reference.cdc.spill import TransactionSpill
from reference.sync.client import SyncClient, SyncPut, SyncUnavailable
from streamwire.cli import one_line
from spec.errors import RuntimeFailure
from spec.pgoutput.changes import TablePut
from spec.pgoutput.coalesce import Batch, Coalesced
from spec.pgoutput.messages import format_lsn
from spec.pgoutput.outage import Away, OutagePolicy, postgres_transient
from spec.pgoutput.transactions import SourceTransaction
from spec.sync.client import Holding

IDLE_S = 0.2
"""How long the stream may be quiet before the source asks the sync server for its numbers again."""
POLL_S = 0.002
"""How long the source waits for a put's answer before it looks at the stream again (nothing ready to read)."""


class TransactionRefused(RuntimeFailure):
    """The sync server refused a transaction (a put it cannot apply, such as a column its table lacks)."""

    condition = "CDC_TRANSACTION_REFUSED"


class WalRetentionExceeded(RuntimeFailure):
    """The slot retains more WAL than ``--max-retained-wal`` allows while the source waits."""

    condition = "CDC_WAL_RETENTION"


@dataclass
class ReplicationCounts:
    """What one run moved: transactions and rows sent, and the last durable commit LSN."""

    transactions: int = 0
    """Source transactions with rows."""
    sync_transactions: int = 0
    """What they travelled as (coalesced)."""
    rows: int = 0
    durable: int | None = None


def _warn(line: str) -> None:
    print(f"cdc: {line}", file=sys.stderr, flush=True)


def sync_put(put: TablePut) -> SyncPut:
    """One table's put of a transaction; after a TRUNCATE it empties the table first (the sync truncate
    extension, which this project's sync server has)."""
    assert put.image is not None
    return SyncPut(put.image.path, put.batch(), put.image.descriptors(), truncate=put.truncate)


def puts_of(tx: SourceTransaction | Coalesced) -> list[SyncPut]:
    """One put per table the transaction touched."""
    return [sync_put(TablePut.of(changes)) for changes in tx.changes.values() if changes]


def settled_durable(client: SyncClient) -> int | None:
    """The origin's durable number once what the server holds only in memory is durable too (where a
    snapshot resumes: a chunk it holds in memory is neither lost nor to be numbered again)."""
    client.probe()
    if client.memory is not None and client.holding(client.memory) is Holding.MEMORY:
        client.wait_durable(client.memory)
    return client.durable


def replicate(source: SlotSource, client: SyncClient, *, stop: Callable[[], bool] = lambda: False,
              on_transaction: Callable[[SourceTransaction], None] | None = None,
              on_durable: Callable[[int | None], None] | None = None,
              policy: OutagePolicy | None = None, warn: Callable[[str], None] | None = None,
              clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
              batch: Batch | None = None) -> ReplicationCounts:
    """Stream ``source`` into ``client`` until the source's ``until`` is durable or ``stop()`` says so;
    ``on_transaction`` sees each transaction once sent, ``on_durable`` each durable number confirmed.

    An outage of the sync server or of Postgres is waited out as ``policy`` says (its warnings go to
    ``warn``): the sync client keeps what it was handed until durable, and the source reconnects to
    the slot, which resends from the confirmed position.

    Before the first read the origin's durable number is learnt (what the server holds only in memory
    waited for until durable) and taken as confirmed: a source that replaced one killed before it
    confirmed is sent transactions the server holds, which are then skipped (``already_sent``) rather
    than coalesced with new ones into a sync transaction numbered above durable, where a replayed insert
    and a later delete of its row would squash to nothing and leave the stored row (found by the nemesis,
    benchmarks/nemesis.py)."""
    policy = policy or OutagePolicy(source.spec.slot)
    warn = warn or _warn
    counts = ReplicationCounts()
    batch = batch or Batch()
    putter = _Putter(client)
    away: Away | None = None
    settled = False
    while not source.feedback.done and not stop():
        try:
            if away is Away.POSTGRES:
                source.reconnect()
            elif away is Away.SYNC_SERVER:
                client.resume()
            if not settled:  # before anything is read: see the docstring
                source.confirm(settled_durable(client))
                settled = True
            _step(source, client, counts, batch, putter, clock, stop, on_transaction, on_durable)
            if (back := policy.recovered(clock())) is not None:
                warn(back)
            away = None
        except SyncUnavailable as exc:
            away, where, reason = Away.SYNC_SERVER, client.location, one_line(exc, typed=False)
        except (PgConnectionError, PgServerError) as exc:
            if not postgres_transient(exc.sqlstate if isinstance(exc, PgServerError) else None):
                raise
            away, where, reason = Away.POSTGRES, source.address.url(), one_line(exc, typed=False, whole=True)
            batch.drop()  # not sent: Postgres sends it again from the confirmed position
        if away is None:
            continue
        step = policy.failed(clock(), away, where, reason, source.retained_wal())
        if step.stop is not None:
            raise WalRetentionExceeded(step.stop)
        if step.warning is not None:
            warn(step.warning)
        if away is Away.SYNC_SERVER:
            _keep_alive(source)
        sleep(step.retry_in_s)
    try:
        putter.answered(None)
        while not batch.empty:  # what was read is handed over (a snapshot's progress record says so already)
            _send(source, putter, counts, batch.take(), on_transaction)
            putter.answered(None)
    except SyncUnavailable:
        pass  # the client keeps it until durable, as after any outage
    counts.durable = client.durable
    return counts


def _step(source: SlotSource, client: SyncClient, counts: ReplicationCounts, batch: Batch, putter: _Putter,
          clock: Callable[[], float], stop: Callable[[], bool],
          on_transaction: Callable[[SourceTransaction], None] | None,
          on_durable: Callable[[int | None], None] | None) -> None:
    """Read what Postgres has sent into the batch and hand it to the sync server when the batch is due, one
    put answered at a time while the stream is read (spec/pgoutput/coalesce.py), until a put is answered,
    nothing is left or ``stop()`` (or, the stream idle, ask for the numbers); then confirm what is durable."""
    if batch.empty and not putter.busy:
        tx = source.read(IDLE_S)
        if tx is None:
            client.probe()
            source.ask_position()
        else:
            batch.offer(tx, clock())
    drained = False
    while not batch.empty or putter.busy:
        if batch.due(clock(), drained=drained, putting=putter.busy):
            _send(source, putter, counts, batch.take(), on_transaction)
            drained = False
            continue
        if batch.held(putting=putter.busy) or stop():
            putter.answered(None)
            break
        tx = source.read(0.0)
        if tx is not None:
            batch.offer(tx, clock())
            drained = False
            continue
        drained = True
        if putter.busy and putter.answered(POLL_S):
            break
    source.confirm(client.durable)
    if on_durable is not None:
        on_durable(client.durable)


class _Putter:
    """The sync transaction being built and answered, on a thread of its own while the stream is read (Arrow's
    conversions and the server's answer overlap the reading); its failure is raised by :meth:`answered`."""

    def __init__(self, client: SyncClient) -> None:
        self._client = client
        self._thread: threading.Thread | None = None
        self._failure: Exception | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def start(self, coalesced: Coalesced, spill: TransactionSpill | None) -> None:
        assert self._thread is None, "one put at a time"
        self._thread = threading.Thread(target=self._put, args=(coalesced, spill), name="cdc-put", daemon=True)
        self._thread.start()

    def _put(self, coalesced: Coalesced, spill: TransactionSpill | None) -> None:
        try:
            puts: Sequence[SyncPut] = puts_of(coalesced)  # a value that does not read stops here, in its own words
            if spill is not None:
                puts = spill.puts(then=puts)
        except Exception as exc:
            self._failure = exc
            return
        try:
            self._client.send_transaction(coalesced.number, puts)
        except SyncUnavailable as exc:  # the client keeps it: resume() delivers it
            self._failure = exc
        except Exception as exc:  # the transport's own error class: INVALID_ARGUMENT and the like
            self._failure = TransactionRefused(f"the sync server refused the transaction at {format_lsn(coalesced.number)} "
                                               f"({', '.join(coalesced.changes)}): {one_line(exc, typed=False)}")
            self._failure.__cause__ = exc

    def answered(self, timeout_s: float | None) -> bool:
        """Whether the put was answered within ``timeout_s`` (None: wait for it); its failure raises here."""
        if self._thread is None:
            return False
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return False
        self._thread, failure, self._failure = None, self._failure, None
        if failure is not None:
            raise failure
        return True


def _send(source: SlotSource, putter: _Putter, counts: ReplicationCounts, coalesced: Coalesced | None,
          on_transaction: Callable[[SourceTransaction], None] | None) -> None:
    if coalesced is None:
        return
    putter.start(coalesced, source.take_spill(coalesced.number))  # a spilled transaction travels alone (Batch.fits)
    _sent(source, counts, coalesced, on_transaction)  # handed over: the client keeps it until durable


def _sent(source: SlotSource, counts: ReplicationCounts, coalesced: Coalesced,
          on_transaction: Callable[[SourceTransaction], None] | None) -> None:
    source.feedback.on_sent(coalesced.number)
    counts.sync_transactions += 1
    counts.transactions += len(coalesced.transactions)
    counts.rows += coalesced.row_count
    if on_transaction is not None:
        for tx in coalesced.transactions:
            on_transaction(tx)


def _keep_alive(source: SlotSource) -> None:
    """A status update while the sync server is away, so that Postgres keeps the stream (if it is lost
    anyway, the next read finds out and the source reconnects)."""
    try:
        source.keep_alive()
    except PgConnectionError:
        pass
