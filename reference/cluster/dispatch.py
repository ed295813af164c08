"""One thread per node that delivers provider notifications to its Core, one at a time, in order.

This is the threading decision of docs/cluster.md (Q2) made concrete for every backend: callbacks
never run on the caller's thread, never concurrently for one node, and may re-enter the provider.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from spec.cluster.interface import ClusterCore
from spec.cluster.model import GossipUpdate, MembershipUpdate, Notification, ShardLogUpdate

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    ttl: float


@dataclass(frozen=True, slots=True)
class ClusterDown:
    pass


Event = Notification | Heartbeat | ClusterDown
_STOP = object()


class Dispatcher:
    def __init__(self, name: str, core: ClusterCore) -> None:
        self._core = core
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"cluster-callbacks {name}", daemon=True)
        self._thread.start()

    def post(self, event: Event) -> None:
        if not self._closed:
            self._queue.put(event)

    def close(self, timeout: float = 5.0) -> None:
        """Stop delivering; pending events are dropped, as they would be by a crash."""
        self._closed = True
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
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
        case MembershipUpdate(snapshot):
            core.update_membership(snapshot)
        case GossipUpdate(entries):
            core.notify_gossip_update(entries)
        case ShardLogUpdate(shard, entries):
            core.notify_shard_log_update(shard, entries)
        case Heartbeat(ttl):
            core.cluster_heartbeat(ttl)
        case ClusterDown():
            core.cluster_down()
