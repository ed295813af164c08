"""Admission of unknown peers: what a server holds for connections that have not identified
themselves yet, as a small sans-IO policy object (as h2 keeps flow control in ``windows.py``).

A server accepts a connection as a stranger. It stays one until the protocol says the peer is
useful (a shuffle writer's reader sent its first CREDIT; a cluster node's HELLO was welcomed):
a handshake alone does not make a connection useful, so an authenticated peer that never asks for
anything is still a stranger. At most ``max_pending`` strangers are held (a newcomer evicts the
oldest, the oldest of those that have not proven the shared secret first: while strangers without
the secret are held, they cannot push out a peer that proved it), and each must identify itself within
``bind_timeout_s`` of being accepted. The reactor
(``reference/net/reactor.py``) tells this object what happened and closes what it returns.
"""

from __future__ import annotations

from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


class StrangerAdmission(Generic[K]):
    """Accepted, not yet identified connections, oldest first, with the time each is due."""

    def __init__(self, max_pending: int, bind_timeout_s: float) -> None:
        if max_pending < 1 or bind_timeout_s <= 0:
            raise ValueError(f"admission needs max_pending >= 1 and bind_timeout_s > 0, "
                             f"got {max_pending} and {bind_timeout_s}")
        self.max_pending = max_pending
        self.bind_timeout_s = bind_timeout_s
        self._due: dict[K, float] = {}
        """Each stranger and when it must have identified itself, in order of arrival (so of due time)."""
        self._proven: set[K] = set()
        """Strangers that proved the shared secret (an authentication handshake) but asked for nothing yet."""

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, peer: object) -> bool:
        return peer in self._due

    def accepted(self, peer: K, now: float) -> list[K]:
        """A connection arrived; returns the strangers to close to make room for it: the oldest other one
        that has not proven the secret, or, when every other has, the oldest of all (never the newcomer)."""
        self._due[peer] = now + self.bind_timeout_s
        evicted = []
        while len(self._due) > self.max_pending:
            oldest = next((p for p in self._due if p not in self._proven and p != peer), next(iter(self._due)))
            self._forget(oldest)
            evicted.append(oldest)
        return evicted

    def proven(self, peer: K) -> None:
        """The peer proved the shared secret: still a stranger with its deadline, evicted only after the rest."""
        if peer in self._due:
            self._proven.add(peer)

    def identified(self, peer: K) -> None:
        """The protocol found the peer useful: no deadline and no room among strangers any more."""
        self._forget(peer)

    def closed(self, peer: K) -> None:
        """The connection ended, whoever ended it."""
        self._forget(peer)

    def _forget(self, peer: K) -> None:
        self._due.pop(peer, None)
        self._proven.discard(peer)

    def expired(self, now: float) -> list[K]:
        """The strangers whose time to identify themselves is over (forgotten here; the caller closes them)."""
        late = []
        for peer, due in self._due.items():
            if due > now:
                break
            late.append(peer)
        for peer in late:
            self._forget(peer)
        return late

    def deadline(self) -> float | None:
        """When the next stranger is due; None with none held."""
        return next(iter(self._due.values()), None)
