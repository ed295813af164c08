"""Tables whose flush failed: capped exponential backoff before the next attempt, sans-IO.

A table that cannot be written (full disk, read-only store, a rejected commit) keeps
its pending data and is retried on its own once its wait is over, whatever the flush
policy says; meanwhile the policy skips it so the other tables keep flushing.  The wait
doubles from 1 s up to 5 s, so once the cause is gone the table is written (and the
durable numbers catch up) within 5 s plus one flush.  Time is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec.clock import after


@dataclass(frozen=True)
class TableFailure:
    """The state of a failing table: consecutive failures, the last error's text, the next attempt."""

    failures: int
    last_error: str
    retry_at: float


class FlushFailures:
    """Consecutive flush failures per table and when each may be tried again."""

    def __init__(self, initial_backoff_s: float = 1.0, max_backoff_s: float = 5.0) -> None:
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._tables: dict[str, TableFailure] = {}

    def failed(self, table: str, error: str, now: float) -> TableFailure:
        """Record a failed flush of ``table``; the wait doubles with each consecutive failure."""
        count = self._tables[table].failures + 1 if table in self._tables else 1
        wait = min(self.initial_backoff_s * 2 ** (count - 1), self.max_backoff_s)
        failure = TableFailure(count, error, after(now, wait))
        self._tables[table] = failure
        return failure

    def succeeded(self, table: str) -> None:
        """``table`` was flushed: it is healthy again."""
        self._tables.pop(table, None)

    def nothing_left(self, table: str) -> None:
        """``table`` has nothing pending any more (its data was discarded): there is no flush to retry."""
        self._tables.pop(table, None)

    def waiting(self, now: float) -> frozenset[str]:
        """Tables whose next attempt is not due yet."""
        return frozenset(t for t, f in self._tables.items() if f.retry_at > now)

    def due(self, now: float) -> list[str]:
        """Failing tables whose next attempt is due: flush them now, policy or not."""
        return [t for t, f in self._tables.items() if f.retry_at <= now]

    def next_retry(self) -> float | None:
        """When the next failing table is due (None: none is failing)."""
        return min((f.retry_at for f in self._tables.values()), default=None)

    def report(self) -> dict[str, TableFailure]:
        """Every failing table and its state."""
        return dict(self._tables)
