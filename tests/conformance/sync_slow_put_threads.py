"""The reference sync target, but a put whose client went away keeps its thread, and so its put slot, a while after
its connection is gone (as on a loaded machine): ``python sync_slow_put_threads.py --store DIR``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from conformance.sync import reference_target
from reference.sync.transport import _Call
from spec.sync.errors import InterruptedPut

THREAD_END_S = 0.2
"""How long an interrupted put's thread takes to end: longer than a case takes to open its next connections."""

Read = Callable[[_Call], "bytes | None"]


def _slow_to_end(read: Read) -> Read:
    def reading(call: _Call) -> bytes | None:
        try:
            return read(call)
        except InterruptedPut:
            time.sleep(THREAD_END_S)
            raise
    return reading


if __name__ == "__main__":
    _Call.read = _slow_to_end(_Call.read)  # type: ignore[method-assign, assignment]
    sys.exit(reference_target.main())
