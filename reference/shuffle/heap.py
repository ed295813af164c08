"""Freed heap memory kept for the next network buffers instead of given back to the kernel (glibc).

Both sides of a shuffle allocate and free one network buffer per DATA (32 KiB by default): the
writer's buffer is freed once its write completed, each record the reader copies out once its
consumer is done with it. glibc gives the top of its heap back to the kernel whenever more than
128 KiB of it is free (``M_TRIM_THRESHOLD``), so under that steady churn the next buffers fault
their pages in again: 2.4 page faults and 6-7 µs of system time per 32 KiB DATA on the writer, a
third of its work (docs/shuffle-runtime.md). A task lets its process keep as much freed memory as
the protocol's own budget lets the task hold anyway (writerMaxMemory / readerMaxMemory), and keeps
buffers below glibc's largest dynamic mmap threshold on the heap (setting a threshold turns glibc's
dynamic thresholds off). Without glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Final

M_TRIM_THRESHOLD: Final = -1
M_MMAP_THRESHOLD: Final = -3
"""``mallopt`` parameters (glibc's malloc.h)."""

MMAP_THRESHOLD_MAX: Final = 32 * 1024 * 1024
"""glibc's ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit: the highest its dynamic threshold goes, and the most ``mallopt`` accepts."""


def _glibc_mallopt() -> Any:
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return None
        return ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):
        return None


_MALLOPT: Final = _glibc_mallopt()
_lock = threading.Lock()
_retained = 0


def retain_freed_heap(budget: int) -> int:
    """Let the process keep up to ``budget`` bytes of freed heap (only ever raised); returns what it keeps
    (0 without glibc)."""
    global _retained
    with _lock:
        if _MALLOPT is not None and budget > _retained:
            if _MALLOPT(M_MMAP_THRESHOLD, min(budget, MMAP_THRESHOLD_MAX)) and _MALLOPT(M_TRIM_THRESHOLD, budget):
                _retained = budget
        return _retained
