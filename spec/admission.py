"""Admission of connections a server cannot yet trust, as small sans-IO policy objects (as h2 keeps flow
control in ``windows.py``). Both hold a bounded number of connections and, at the bound, let a newcomer
push out the connection worth least, never the newcomer itself: a crowd that holds every place earns
nothing by holding it.

``StrangerAdmission`` (the shuffle's and cluster's reactor): a server accepts a connection as a stranger.
It stays one until the protocol says the peer is useful (a shuffle writer's reader sent its first CREDIT;
a cluster node's HELLO was welcomed): a handshake alone does not make a connection useful, so an
authenticated peer that never asks for anything is still a stranger. At most ``max_pending`` strangers
are held (a newcomer evicts the oldest, the oldest of those that have not proven the shared secret first:
while strangers without the secret are held, they cannot push out a peer that proved it), and each must
identify itself within ``bind_timeout_s`` of being accepted. The reactor (``reference/net/reactor.py``)
tells this object what happened and closes what it returns.

``ConnectionAdmission`` (the sync server's front, ``reference/sync/front.py``): every client connection,
at most ``max_connections``, ranked by what it is doing (``ConnectionUse``, which
``spec.http2_watch`` reads from HTTP/2 frame headers); a newcomer at the cap evicts one the server
already closed but that still has bytes to take, else the one that has done nothing for longest
(its handshake unfinished since its accept, or idle since its last stream), else the one waiting
longest for a stream's first message, never one carrying a request: when every connection carries
one, the newcomer is refused (its client retries).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Generic, Hashable, TypeVar

from spec.clock import after

K = TypeVar("K", bound=Hashable)


def due_by(due: dict[K, float], now: float) -> list[K]:
    """The keys of ``due`` (in order of due time) whose time is at or before ``now``."""
    late = []
    for peer, at in due.items():
        if at > now:
            break
        late.append(peer)
    return late


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
        self._due[peer] = after(now, self.bind_timeout_s)
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
        late = due_by(self._due, now)
        for peer in late:
            self._forget(peer)
        return late

    def deadline(self) -> float | None:
        """When the next stranger is due; None with none held."""
        return next(iter(self._due.values()), None)


class ConnectionUse(enum.IntEnum):
    """What a held connection is doing, in the order a newcomer at the cap evicts (lowest first)."""

    ENDING = 0
    """The server closed its side; only its last bytes are still being written to the client (final: no use
    reported after it changes it)."""
    HANDSHAKE = 1
    """Its handshake is not complete (a slow-loris stays here)."""
    IDLE = 2
    """Handshake done, no stream open."""
    WAITING = 3
    """Streams open, none of which has sent a whole first message yet (silent streams)."""
    BUSY = 4
    """A stream carrying a request is open: never evicted."""


@dataclass(frozen=True)
class Admission(Generic[K]):
    """The verdict on a newcomer: admitted (making room by evicting ``evicted``, if not None) or refused."""

    admitted: bool
    evicted: K | None = None


_EVICTION_RANK = {ConnectionUse.ENDING: 0, ConnectionUse.HANDSHAKE: 1, ConnectionUse.IDLE: 1, ConnectionUse.WAITING: 2}
"""Which connections a newcomer evicts first (lowest rank, oldest in it first); a request in flight never.

An unfinished handshake and an idle connection share a rank, so the one doing nothing for longest
goes (a handshake counts from its accept, idleness from its last stream's end): with handshakes
first, a crowd reconnecting as fast as it is evicted had its newcomers evict each other, and the
client's own new connection with them, rather than the idle connections sitting in every slot
(measured: 1,878 of 1,881 evictions hit handshakes; one put waited 13.8 s). A slow-loris still
goes before anything younger than it."""


class ConnectionAdmission(Generic[K]):
    """Open client connections by use; in each eviction rank, in the order they entered their use
    (callers report events in time order, so arrival order is age order: no clock is needed here)."""

    def __init__(self, max_connections: int) -> None:
        if max_connections < 1:
            raise ValueError(f"admission needs max_connections >= 1, got {max_connections}")
        self.max_connections = max_connections
        self._ranks: list[dict[K, None]] = [{} for _ in range(max(_EVICTION_RANK.values()) + 1)]
        """Each eviction rank's connections, in the order they entered their use."""
        self._use: dict[K, ConnectionUse] = {}

    def __len__(self) -> int:
        return len(self._use)

    def __contains__(self, peer: object) -> bool:
        return peer in self._use

    def accepted(self, peer: K) -> Admission[K]:
        """A connection arrived, its handshake not done; at the cap, whom it evicts, or that it is refused."""
        evicted = None
        if len(self._use) >= self.max_connections:
            evicted = next((next(iter(rank)) for rank in self._ranks if rank), None)
            if evicted is None:
                return Admission(admitted=False)
            self.closed(evicted)
        self._enter(peer, ConnectionUse.HANDSHAKE)
        return Admission(admitted=True, evicted=evicted)

    def using(self, peer: K, use: ConnectionUse) -> None:
        """The connection is now doing ``use`` (a relay reports it each time bytes go by, so mostly the use it was
        in): entering a use anew makes it the youngest of its rank; the same use reported again keeps its
        place (a connection pinging while idle is still idle since its last stream); ENDING is final (once the
        server closed its side nothing the client sends makes the connection worth keeping)."""
        held = self._use.get(peer)
        if held is not None and held is not use and held is not ConnectionUse.ENDING:
            self._leave(peer)
            self._enter(peer, use)

    def _enter(self, peer: K, use: ConnectionUse) -> None:
        self._use[peer] = use
        if use in _EVICTION_RANK:
            self._ranks[_EVICTION_RANK[use]][peer] = None

    def _leave(self, peer: K) -> None:
        use = self._use.pop(peer)
        if use in _EVICTION_RANK:
            del self._ranks[_EVICTION_RANK[use]][peer]

    def closed(self, peer: K) -> None:
        """The connection ended, whoever ended it."""
        if peer in self._use:
            self._leave(peer)
