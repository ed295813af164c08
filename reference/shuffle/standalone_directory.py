"""A shuffle directory for tasks that run without a cluster: a conformance target facing one peer,
a benchmark, a test of single tasks.

It knows the writers it was given and those that register, and keeps every failure reported; the
first is the attempt's, as on the cluster (reference/shuffle/cluster_directory.py).
"""

from __future__ import annotations

import threading

from spec.shuffle import coordination


class StandaloneDirectory:
    """A :class:`~spec.shuffle.coordination.ShuffleDirectory` in this process, for one attempt."""

    def __init__(self, writers: tuple[coordination.WriterLocation, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._writers = {writer.writer_id: writer for writer in writers}
        self.registered = threading.Event()
        """Set once a writer registered."""
        self.failures: list[str] = []
        """Every failure reported, in order (the first is the attempt's)."""

    @property
    def writers(self) -> tuple[coordination.WriterLocation, ...]:
        with self._lock:
            return tuple(self._writers.values())

    def register(self, key: coordination.ShuffleKey, writer: coordination.WriterLocation) -> None:
        with self._lock:
            self._writers[writer.writer_id] = writer
        self.registered.set()

    def lookup(self, key: coordination.ShuffleKey) -> coordination.Writers:
        with self._lock:
            if self.failures:
                return coordination.Writers(tuple(self._writers.values()), coordination.AttemptFailure(self.failures[0]))
            return coordination.Writers(tuple(self._writers.values()))

    def unregister(self, key: coordination.ShuffleKey, writer_id: int) -> None:
        with self._lock:
            self._writers.pop(writer_id, None)

    def report_failure(self, key: coordination.ShuffleKey, role: coordination.Role, task: int,
                       description: str) -> None:
        with self._lock:
            self.failures.append(coordination.failure_text(role, task, description))
