"""How provider notifications reach a node's Core, one at a time, in order.

:class:`Dispatcher` is the threading decision of docs/cluster.md (Q2) made concrete for every
backend: one thread per node, so callbacks never run on the caller's thread, never concurrently
for one node, and may re-enter the provider. :class:`InlineMailbox` serves Cores that only enqueue
(the cluster service's connections): it calls them on the posting thread, with no thread of its
own, which keeps the service's thread count fixed whatever the number of nodes.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from spec.cluster.interface import ClusterCore
from spec.cluster.model import GossipUpdate, MembershipChange, MembershipUpdate, MembershipView, Notification, ShardLogUpdate
from spec.cluster.session import ClusterDown as ClusterDown  # the Core's cluster_down, as a session reports it

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    ttl: float


Event = Notification | Heartbeat | ClusterDown
_STOP = object()


@runtime_checkable
class DeltaCore(Protocol):
    """An inline Core that takes membership as changes (the cluster service's sessions send them on
    as MEMBERSHIP_DELTA), so telling it costs the changes, not the snapshot."""

    def membership_changed(self, changes: Sequence[MembershipChange], base: int, view: MembershipView) -> None:
        """``changes`` (consecutive, in commit order) apply on the membership of epoch ``base``;
        ``view`` shows the membership after them for the length of the call."""


class Mailbox(Protocol):
    def start(self) -> None:
        """Begin delivering (never under a lock a starting thread might need)."""

    def post(self, event: Event) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


class InlineMailbox:
    """Delivers on the posting thread; for Cores whose callbacks never block (they enqueue).

    Posts come from one ordered fan-out (the in-process cluster's outbox), so per-node order is
    still commit order."""

    def __init__(self, core: ClusterCore) -> None:
        self._core = core
        self._delta_core = core if isinstance(core, DeltaCore) else None  # checked once: the check is slow
        self._closed = False

    def start(self) -> None:
        """Nothing to start: it delivers on the posting thread."""

    def post(self, event: Event) -> None:
        if self._closed:
            return
        try:
            _deliver(self._core, event)
        except Exception:  # a Core bug must not stop the fan-out to other nodes
            log.exception("cluster callback raised")

    def post_membership(self, changes: Sequence[MembershipChange], base: int, view: MembershipView) -> None:
        """Tell a run of ``changes`` at once (see :class:`DeltaCore`); a Core without
        ``membership_changed`` gets the snapshot after them."""
        if self._delta_core is None:
            self.post(MembershipUpdate(snapshot=view.snapshot()))
        elif not self._closed:
            try:
                self._delta_core.membership_changed(changes, base, view)
            except Exception:  # a Core bug must not stop the fan-out to other nodes
                log.exception("cluster callback raised")

    def close(self, timeout: float = 5.0) -> None:
        self._closed = True


class Dispatcher:
    """Events posted before ``start`` wait in the queue."""

    def __init__(self, name: str, core: ClusterCore) -> None:
        self._core = core
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"cluster-callbacks {name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def post(self, event: Event) -> None:
        if not self._closed:
            self._queue.put(event)

    def close(self, timeout: float = 5.0) -> None:
        """Stop delivering; pending events are dropped, as they would be by a crash."""
        self._closed = True
        self._queue.put(_STOP)
        if self._thread.ident is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is _STOP or self._closed:
                return
            try:
                _deliver(self._core, event)
            except Exception:  # a Core bug must not stop the node's notifications
                log.exception("cluster callback raised")


def _deliver(core: ClusterCore, event: object) -> None:
    match event:
        case MembershipUpdate(snapshot=snapshot):
            core.update_membership(snapshot)
        case GossipUpdate(entries=entries):
            core.notify_gossip_update(entries)
        case ShardLogUpdate(shard=shard, entries=entries):
            core.notify_shard_log_update(shard, entries)
        case Heartbeat(ttl):
            core.cluster_heartbeat(ttl)
        case ClusterDown():
            core.cluster_down()
