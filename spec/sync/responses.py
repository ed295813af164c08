"""Building ``DataSyncResponse`` s, and what one tells a client about a restart.

The ``first`` flag belongs to the first response after a start: one response in a server's
life, which only one of the origins it serves receives.  Every other origin learns of the
restart from its numbers, or from the server life every response names (the server-life
extension, ``spec.sync.messages.SERVER_LIFE_FIELD``): ``shows_restart``.
"""

from __future__ import annotations

import itertools

from spec.sync.messages import SyncResponse


class ResponseFactory:
    """Hands out responses; exactly the first one of a server's life carries ``first=true``.

    Responses are counted, and only response number 0 is the first: taking a number is one
    ``next`` on a count (atomic), so a busy answer given without the write lock cannot race a probe's.
    """

    def __init__(self, life: int | None = None) -> None:
        self._numbers = itertools.count()
        self.life = life
        """The number this server drew at its start (None: a server without the server-life extension)."""

    def _take_first(self) -> bool:
        return next(self._numbers) == 0

    def accepted(self, memory: int | None, durable: int | None) -> SyncResponse:
        """The answer to a probe or an accepted put."""
        return SyncResponse(accepted=True, memory_sequence_number=memory, durable_sequence_number=durable,
                            first=self._take_first(), server_life=self.life)

    def overloaded(self) -> SyncResponse:
        """The answer to a put that could not get the write lock in time (retry later)."""
        return SyncResponse(accepted=False, memory_sequence_number=None, durable_sequence_number=None,
                            first=self._take_first(), server_life=self.life)


def shows_restart(response: SyncResponse, memory_told: int | None, life_told: int | None = None) -> bool:
    """Whether ``response`` shows that the server lost what it held in memory for this origin.

    ``memory_told`` is the origin's memory number from the previous response to it.  Within a
    server's life an origin's memory number never goes backwards (a put at or below it is a
    replay or refused), so a lower or absent one means a restart dropped transactions the
    client was told were received, whether or not this response is the one with ``first``.
    ``life_told`` is the server life an earlier response named: a response naming another is from a
    server started since, whatever its numbers say.
    """
    if response.first:
        return True
    if life_told is not None and response.server_life is not None and response.server_life != life_told:
        return True
    if not response.accepted or memory_told is None:
        return False
    memory = response.memory_sequence_number
    return memory is None or memory < memory_told
