"""The failure detector's time in a conformance harness (conformance/cluster/controls.py): real
monotonic time until the runner stops it (the ``clock`` capability), then a clock that moves only
when told. An :class:`~reference.cluster.memory.InProcessCluster` is handed it as its ``clock``.

Stopped, the time is a whole second not earlier than the running time plus whole milliseconds, so
an age of exactly a threshold (0.5 s, 1 s) is computed exactly and a case can hit it at its instant;
it never goes back, so no node looks younger than it is. Running again continues from there.
"""

from __future__ import annotations

import math
import time

from spec.clock import ms_after


class DetectorClock:
    def __init__(self) -> None:
        self._offset = 0.0
        self._origin: float | None = None
        self._advanced_ms = 0

    @property
    def stopped(self) -> bool:
        return self._origin is not None

    def now(self) -> float:
        if self._origin is None:
            return time.monotonic() + self._offset
        return ms_after(self._origin, self._advanced_ms)

    def stop(self) -> None:
        """Stand still (at the next whole second); a no-op when already stopped."""
        if self._origin is None:
            self._origin, self._advanced_ms = float(math.ceil(self.now())), 0

    def advance(self, ms: int) -> None:
        """Move a stopped clock on by ``ms`` milliseconds."""
        assert self._origin is not None, "advance a stopped clock only"
        self._advanced_ms += ms

    def run(self) -> None:
        """Follow real time again, from where the stopped clock stands."""
        if self._origin is not None:
            self._offset = self.now() - time.monotonic()
            self._origin = None
