"""A WriterDirectory for one attempt without a coordinator, for tests of single tasks."""

from __future__ import annotations

import threading

from spec.shuffle import coordination


class MemoryDirectory:
    """Writers register and readers look them up; the first failure reported is the attempt's."""

    def __init__(self, writers: tuple[coordination.WriterLocation, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._writers = {writer.writer_id: writer for writer in writers}
        self.registered = threading.Event()
        self.failures: list[str] = []

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
            return coordination.Writers(self.failures[0] if self.failures else "", tuple(self._writers.values()))

    def unregister(self, key: coordination.ShuffleKey, writer_id: int) -> None:
        with self._lock:
            self._writers.pop(writer_id, None)

    def report_failure(self, key: coordination.ShuffleKey, role: coordination.Role, task: int,
                       description: str) -> None:
        with self._lock:
            self.failures.append(f"{role.name.lower()} {task} failed: {description}")
