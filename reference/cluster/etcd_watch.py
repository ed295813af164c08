"""One watch of a cluster's etcd prefix per process, decoded once and mirrored once.

Every node of an :class:`reference.cluster.etcd.EtcdCluster` needs every committed revision of the
prefix (membership, gossip, its shard's log). Watching once per process instead of once per node
means a write costs one HTTP stream read, one JSON decode and one mirror update here, plus, per
node, only the work of telling it. Subscribers are handed each committed revision in order, as a
:class:`CommittedRevision` with the shared mirror already updated; a subscriber attached later starts from
the mirror as it is then and gets every later revision, so none is seen twice or missed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Mapping, Protocol

from reference.cluster.etcd_gateway import EtcdGateway, KeyValue, WatchEvent, WatchStream
from spec.cluster.errors import ProviderUnavailable

RETRY_S = 0.1
"""Pause before watching again after etcd went away (it resumes from the next unseen revision)."""


@dataclass(frozen=True, slots=True)
class CommittedRevision:
    """One committed revision: its events (keys relative to the prefix) and what the changed keys
    held before it."""

    revision: int
    events: list[tuple[str, WatchEvent]]
    previous: dict[str, KeyValue | None] = field(default_factory=dict)

    def touches(self, *prefixes: str) -> bool:
        return any(key.startswith(prefixes) for key, _ in self.events)


class Subscriber(Protocol):
    def apply(self, change: CommittedRevision, mirror: Mapping[str, KeyValue]) -> None:
        """Called on the watch thread, in revision order, with the mirror after ``change``."""


class SharedWatch:
    """The mirror of ``prefix`` and the one thread that keeps it current."""

    def __init__(self, gateway: EtcdGateway, prefix: str) -> None:
        self._gateway = gateway
        self._prefix = prefix
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._closed = threading.Event()
        self._stream: WatchStream | None = None
        kvs, revision = gateway.range(prefix, prefix=True)
        self.mirror: dict[str, KeyValue] = {kv.key[len(prefix):]: kv for kv in kvs}
        self._thread = threading.Thread(target=self._run, args=(revision + 1,), daemon=True,
                                        name=f"etcd-watch {prefix}")
        self._thread.start()

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def close(self, timeout: float) -> None:
        self._closed.set()
        stream = self._stream
        if stream is not None:
            stream.cancel()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self, revision: int) -> None:
        while not self._closed.is_set():
            try:
                self._stream = self._gateway.watch(self._prefix, revision)
                if self._closed.is_set():
                    self._stream.cancel()
                    return
                for events in self._stream:
                    for group in _by_revision(events):
                        self._apply(group)
                        revision = group[0].kv.mod_revision + 1
            except ProviderUnavailable:
                self._closed.wait(RETRY_S)

    def _apply(self, group: list[WatchEvent]) -> None:
        change = CommittedRevision(group[0].kv.mod_revision, [(e.kv.key[len(self._prefix):], e) for e in group])
        with self._lock:
            for key, event in change.events:
                change.previous.setdefault(key, self.mirror.get(key))
                if event.deleted:
                    self.mirror.pop(key, None)
                else:
                    self.mirror[key] = event.kv
            for subscriber in self._subscribers:
                subscriber.apply(change, self.mirror)


def _by_revision(events: list[WatchEvent]) -> list[list[WatchEvent]]:
    groups: dict[int, list[WatchEvent]] = {}
    for event in events:
        groups.setdefault(event.kv.mod_revision, []).append(event)
    return [groups[r] for r in sorted(groups)]
