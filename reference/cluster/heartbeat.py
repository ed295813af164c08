"""A node's heartbeat thread, the same for every backend: renew every heartbeat interval and tell
the Core what came of it.

A backend supplies only its renewal: it returns the TTL the Core may count on (a
``cluster_heartbeat``), or None when there is nothing to tell; it raises ProviderUnavailable when
liveness is lost (the Core is told ``cluster_down`` once, until a renewal succeeds again) and
ProviderClosed when the handle is done (the thread ends: closed, or taken over by a successor).
"""

from __future__ import annotations

import threading
from typing import Callable

from reference.cluster.dispatch import ClusterDown, Heartbeat, Mailbox
from spec.cluster.errors import ProviderClosed, ProviderUnavailable


class HeartbeatThread:
    """Created idle: ``start`` it once the handle is registered, outside any lock."""

    def __init__(self, name: str, interval: float, renew: Callable[[], float | None], mailbox: Mailbox,
                 stopped: threading.Event) -> None:
        self._interval = interval
        self._renew = renew
        self._mailbox = mailbox
        self._stopped = stopped
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        down = False
        while not self._stopped.wait(self._interval):
            try:
                ttl = self._renew()
            except ProviderClosed:
                return
            except ProviderUnavailable:
                if not down:
                    self._mailbox.post(ClusterDown())
                down = True
                continue
            down = False
            if ttl is not None:
                self._mailbox.post(Heartbeat(ttl))

    def join(self, timeout: float) -> None:
        """Wait for the thread to end (after ``stopped`` is set); a no-op on the thread itself or unstarted."""
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
