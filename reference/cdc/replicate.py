"""One slot into one sync server: each Postgres transaction becomes one sync transaction.

The origin is the slot's name; a transaction's sequence number is its commit LSN; it travels as
one put per table it touched, the last put carrying the number. After each transaction, and
whenever the stream is idle, the durable number the server reports for the origin is confirmed
to the slot (and nothing more), so a crash of this process or of the sync server replays from
the slot and the server skips what its tables hold. Transactions without rows for a published
table (only a logical decoding message, say) are not sent: the sync server refuses empty ones.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reference.cdc.pgwire import PgConnectionError, PgServerError
from reference.cdc.source import SlotSource
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
    the slot, which resends from the confirmed position."""
    policy = policy or OutagePolicy(source.spec.slot)
    warn = warn or _warn
    counts = ReplicationCounts()
    batch = batch or Batch()
    away: Away | None = None
    while not source.feedback.done and not stop():
        try:
            if away is Away.POSTGRES:
                source.reconnect()
            elif away is Away.SYNC_SERVER:
                client.resume()
            _step(source, client, counts, batch, clock, on_transaction, on_durable)
            if (back := policy.recovered(clock())) is not None:
                warn(back)
            away = None
        except SyncUnavailable as exc:
            away, where, reason = Away.SYNC_SERVER, client.location, one_line(exc, typed=False)
        except (PgConnectionError, PgServerError) as exc:
            if not postgres_transient(exc.sqlstate if isinstance(exc, PgServerError) else None):
                raise
            away, where, reason = Away.POSTGRES, source.address.url(), one_line(exc, typed=False, whole=True)
            batch.take()  # not sent: Postgres sends it again from the confirmed position
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
    counts.durable = client.durable
    return counts


def _step(source: SlotSource, client: SyncClient, counts: ReplicationCounts, batch: Batch,
          clock: Callable[[], float], on_transaction: Callable[[SourceTransaction], None] | None,
          on_durable: Callable[[int | None], None] | None) -> None:
    """Read what Postgres has sent, coalesced into one sync transaction (spec/pgoutput/coalesce.py), and hand
    it to the sync server (or, the stream idle, ask for the numbers); then confirm what is durable."""
    if batch.empty:
        tx = source.read(IDLE_S)
        if tx is None:
            client.probe()
            source.ask_position()
        else:
            batch.add(tx, clock())
    while not batch.empty and not batch.full(clock()):
        tx = source.read(0.0)
        if tx is None:
            break
        if batch.fits(tx):
            batch.add(tx, clock())
            continue
        full = batch.take()
        batch.add(tx, clock())  # kept for the next step, whatever happens to the send
        _send(source, client, counts, full, on_transaction)
    if not batch.empty:
        _send(source, client, counts, batch.take(), on_transaction)
    source.confirm(client.durable)
    if on_durable is not None:
        on_durable(client.durable)


def _send(source: SlotSource, client: SyncClient, counts: ReplicationCounts, coalesced: Coalesced | None,
          on_transaction: Callable[[SourceTransaction], None] | None) -> None:
    if coalesced is None:
        return
    puts: Sequence[SyncPut] = puts_of(coalesced)  # a value that does not read stops here, not as a refusal
    spill = source.take_spill(coalesced.number)  # a spilled transaction travels alone (Batch.fits)
    if spill is not None:
        puts = spill.puts(then=puts)
    try:
        client.send_transaction(coalesced.number, puts)
    except SyncUnavailable:
        _sent(source, counts, coalesced, on_transaction)  # the client keeps it: resume() delivers it
        raise
    except Exception as exc:  # the transport's own error class: INVALID_ARGUMENT and the like
        raise TransactionRefused(f"the sync server refused the transaction at {format_lsn(coalesced.number)} "
                                 f"({', '.join(coalesced.changes)}): {one_line(exc, typed=False)}") from exc
    _sent(source, counts, coalesced, on_transaction)


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
