"""A record of the sockets and threads an owner created, so a leak check counts only its own.

Counting every socket of the process makes a check depend on whatever else runs in it (a
driver's cluster service, an etcd client's pool, another test's late cleanup). A ledger is handed
to the objects under test; they enter what they open, and ``open_sockets``/``live_threads`` say
what of that is still held.
"""

from __future__ import annotations

import socket
import threading


class ResourceLedger:
    """Sockets and threads entered by their creators; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    def add_socket(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def add_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.append(thread)

    @property
    def sockets_opened(self) -> int:
        with self._lock:
            return len(self._sockets)

    @property
    def threads_started(self) -> int:
        with self._lock:
            return len(self._threads)

    def open_sockets(self) -> list[socket.socket]:
        """Entered sockets not closed yet."""
        with self._lock:
            return [s for s in self._sockets if s.fileno() >= 0]

    def live_threads(self) -> list[threading.Thread]:
        """Entered threads still running."""
        with self._lock:
            return [t for t in self._threads if t.is_alive()]
