"""What a change source tells its replication slot, and when it has read everything it was asked to.

The rule that makes a crash anywhere safe: the slot is confirmed (``flushed_lsn`` of the standby
status update, which becomes the slot's ``confirmed_flush_lsn``) up to the durable number the sync
server reported for the slot's origin, never further and never backwards. A transaction is
numbered by its commit LSN, and Postgres resends every transaction whose commit LSN is at or
after the confirmed position, so after a restart the source replays from the last durable
transaction on (which the sync server acknowledges without applying it again) and loses nothing.

``until``: a source asked to stop at an LSN (the WAL insert position when it started:
``pg_current_wal_insert_lsn()``, not ``pg_current_wal_lsn()``, which is the write position and may
lag a committed transaction under ``synchronous_commit=off``) is done once
the server has sent it everything before that position (a keepalive's ``wal_end`` reached it;
keepalives are asked for with ``reply_requested`` whenever the stream is idle) and every
transaction it sent below that position is durable.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from spec.pgoutput.messages import PrimaryKeepalive, StandbyStatusUpdate, XLogData

XLOG_BLOCK_SIZE = 8192
LONG_PAGE_HEADER = 40
"""The largest WAL page header (``SizeOfXLogLongPHD``): no record ends inside one."""


def record_boundary(insert_lsn: int) -> int:
    """The end of the last record before ``insert_lsn``: ``pg_current_wal_insert_lsn()`` at a page start points past
    the page header, where no record ends, and a stream that read everything stops at the page start."""
    offset = insert_lsn % XLOG_BLOCK_SIZE
    return insert_lsn - offset if offset <= LONG_PAGE_HEADER else insert_lsn


@dataclass
class SlotFeedback:
    """The slot's positions as this client reports them (sans-IO: the caller sends what it returns)."""

    until: int | None = None
    received: int = 0
    """Everything before this LSN was sent to us (keepalive ``wal_end``, XLogData start)."""
    flushed: int = 0
    """What the slot is confirmed to: the sync server's durable number, never more."""
    not_durable: deque[int] = field(default_factory=deque)
    """Commit LSNs sent to the sync server and not yet reported durable, in order."""
    sent: int = 0
    """The last commit LSN handed to the sync server."""

    def on_message(self, message: XLogData | PrimaryKeepalive) -> bool:
        """Note a server message; True when it asks for a status update at once."""
        if isinstance(message, XLogData):
            self.received = max(self.received, message.wal_start)
            return False
        self.received = max(self.received, message.wal_end)
        return message.reply_requested

    def on_sent(self, commit_lsn: int) -> None:
        """A transaction was handed to the sync server under ``commit_lsn``."""
        self.not_durable.append(commit_lsn)
        self.sent = commit_lsn

    def already_sent(self, commit_lsn: int) -> bool:
        """A transaction Postgres resends after a reconnection (it restarts from the confirmed position,
        which may be behind what was sent): skip it, the sync client holds it until durable."""
        return commit_lsn <= max(self.sent, self.flushed)

    def on_durable(self, durable: int | None) -> bool:
        """The sync server reported ``durable`` for the slot's origin; True when the confirmed position moved."""
        if durable is None:
            return False
        while self.not_durable and self.not_durable[0] <= durable:
            self.not_durable.popleft()
        if durable <= self.flushed:
            return False  # never backwards (a snapshot's chunks are numbered below the slot's position)
        self.flushed = durable
        return True

    def status(self, client_time: int, *, reply_requested: bool = False) -> StandbyStatusUpdate:
        """The update to send now: written up to what was received, flushed and applied up to durable."""
        return StandbyStatusUpdate(max(self.received, self.flushed), self.flushed, self.flushed, client_time,
                                   reply_requested)

    @property
    def done(self) -> bool:
        """With ``until``: everything before it was received, and what was sent of it is durable."""
        if self.until is None or self.received < self.until:
            return False
        return not self.not_durable or self.not_durable[0] >= self.until


@dataclass
class PartsDurability:
    """A transaction cut into parts that travel under several sync origins (one per sink and table, in
    the pipeline) is durable once each part is durable at its origin; the slot may be confirmed up to
    the last transaction whose own parts, and every earlier transaction's, are all durable."""

    not_durable: deque[tuple[int, frozenset[str]]] = field(default_factory=deque)
    point: int | None = None

    def on_sent(self, commit_lsn: int, origins: frozenset[str]) -> None:
        """A transaction's parts were handed to their sinks under ``origins``."""
        self.not_durable.append((commit_lsn, origins))

    @property
    def origins(self) -> frozenset[str]:
        """The origins whose durable numbers decide the next step."""
        return frozenset(o for _, origins in self.not_durable for o in origins)

    def update(self, durable: dict[str, int | None]) -> int | None:
        """Advance with the origins' durable numbers; the durable point (a commit LSN) or None."""
        while self.not_durable:
            commit_lsn, origins = self.not_durable[0]
            if not all((durable.get(o) or -1) >= commit_lsn for o in origins):
                break
            self.not_durable.popleft()
            self.point = commit_lsn
        return self.point
