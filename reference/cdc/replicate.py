"""One slot into one sync server: each Postgres transaction becomes one sync transaction.

The origin is the slot's name; a transaction's sequence number is its commit LSN; it travels as
one put per table it touched, the last put carrying the number. After each transaction, and
whenever the stream is idle, the durable number the server reports for the origin is confirmed
to the slot (and nothing more), so a crash of this process or of the sync server replays from
the slot and the server skips what its tables hold. Transactions without rows for a published
table (only a logical decoding message, say) are not sent: the sync server refuses empty ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reference.cdc.pgwire import first_line
from reference.cdc.source import SlotSource
from reference.sync.client import SyncClient, SyncPut, SyncUnavailable
from spec.errors import RuntimeFailure
from spec.pgoutput.messages import format_lsn
from spec.pgoutput.transactions import SourceTransaction

IDLE_S = 0.2
"""How long the stream may be quiet before the source asks the sync server for its numbers again."""


class TransactionRefused(RuntimeFailure):
    """The sync server refused a transaction (a put it cannot apply, such as a column its table lacks)."""

    condition = "CDC_TRANSACTION_REFUSED"


@dataclass
class ReplicationCounts:
    """What one run moved: transactions and rows sent, and the last durable commit LSN."""

    transactions: int = 0
    rows: int = 0
    durable: int | None = None


def puts_of(tx: SourceTransaction) -> list[SyncPut]:
    """One put per table the transaction touched."""
    return [SyncPut(path, tx.tables[path].batch(changes), tx.tables[path].descriptors())
            for path, changes in tx.changes.items() if changes]


def replicate(source: SlotSource, client: SyncClient, *, stop: Callable[[], bool] = lambda: False,
              on_transaction: Callable[[SourceTransaction], None] | None = None,
              on_durable: Callable[[int | None], None] | None = None) -> ReplicationCounts:
    """Stream ``source`` into ``client`` until the source's ``until`` is durable or ``stop()`` says so;
    ``on_transaction`` sees each transaction once sent, ``on_durable`` each durable number confirmed."""
    counts = ReplicationCounts()

    def confirm() -> None:
        source.confirm(client.durable)
        if on_durable is not None:
            on_durable(client.durable)

    while not source.feedback.done and not stop():
        tx = source.read(IDLE_S)
        if tx is None:
            client.probe()
            confirm()
            source.ask_position()
            continue
        if tx.row_count:
            try:
                client.send_transaction(tx.commit_lsn, puts_of(tx))
            except SyncUnavailable:
                raise
            except Exception as exc:  # the transport's own error class: INVALID_ARGUMENT and the like
                raise TransactionRefused(f"the sync server refused the transaction at {format_lsn(tx.commit_lsn)} "
                                         f"({', '.join(tx.changes)}): {first_line(exc)}") from exc
            source.feedback.on_sent(tx.commit_lsn)
            counts.transactions += 1
            counts.rows += tx.row_count
            if on_transaction is not None:
                on_transaction(tx)
        confirm()
    counts.durable = client.durable
    return counts
