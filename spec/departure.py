"""Connections a server closes once their queued output is written, as a sans-IO bound.

A server that refuses a peer answers in one line and closes; when events are still queued ahead of
that line (a cluster node's multi-megabyte gossip event), closing at once would drop the line with
them. So such a connection departs: it stops serving requests, its queue is written, and it closes
when the queue is empty. A peer that never reads must not hold the server for it: a connection departs
only when at most ``max_bytes`` are queued (more, and it closes at once, its queue abandoned), and for
at most ``linger_s``. The reactor (``reference/net/reactor.py``) tells this object what happened and
closes what it returns.
"""

from __future__ import annotations

from typing import Generic

from spec.admission import K, due_by
from spec.clock import after


class Departures(Generic[K]):
    """Connections writing their last output, oldest first, with the time each is closed regardless."""

    def __init__(self, max_bytes: int, linger_s: float) -> None:
        if max_bytes < 0 or linger_s <= 0:
            raise ValueError(f"departures need max_bytes >= 0 and linger_s > 0, got {max_bytes} and {linger_s}")
        self.max_bytes = max_bytes
        self.linger_s = linger_s
        self._due: dict[K, float] = {}
        """Each departing connection and when it is closed even if unwritten, in order of departure."""

    def __len__(self) -> int:
        return len(self._due)

    def leaving(self, peer: K, queued_bytes: int, now: float) -> bool:
        """The owner closes ``peer`` after its output: True when it lingers to write ``queued_bytes``,
        False when it closes now (nothing queued, or more than ``max_bytes``)."""
        if queued_bytes == 0 or queued_bytes > self.max_bytes:
            return False
        self._due.setdefault(peer, after(now, self.linger_s))
        return True

    def closed(self, peer: K) -> None:
        """The connection ended (its output written, or for any other reason)."""
        self._due.pop(peer, None)

    def expired(self, now: float) -> list[K]:
        """The departing connections whose time is over (forgotten here; the caller closes them)."""
        late = due_by(self._due, now)
        for peer in late:
            del self._due[peer]
        return late

    def deadline(self) -> float | None:
        """When the next departing connection is closed regardless; None with none departing."""
        return next(iter(self._due.values()), None)
