"""Building ``DataSyncResponse`` s: the ``first`` flag belongs to the first response after a start."""

from __future__ import annotations

from spec.sync.messages import SyncResponse


class ResponseFactory:
    """Hands out responses; exactly the first one of a server's life carries ``first=true``."""

    def __init__(self) -> None:
        self._first = True

    def _take_first(self) -> bool:
        first, self._first = self._first, False
        return first

    def accepted(self, memory: int | None, durable: int | None) -> SyncResponse:
        """The answer to a probe or an accepted put."""
        return SyncResponse(accepted=True, memory_sequence_number=memory, durable_sequence_number=durable,
                            first=self._take_first())

    def overloaded(self) -> SyncResponse:
        """The answer to a put that could not get the write lock in time (retry later)."""
        return SyncResponse(accepted=False, memory_sequence_number=None, durable_sequence_number=None,
                            first=self._take_first())
