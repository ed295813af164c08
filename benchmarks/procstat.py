"""What a process holds, read from /proc: threads, file descriptors, resident memory."""

from __future__ import annotations

import os
from typing import NamedTuple


class ProcessSample(NamedTuple):
    threads: int
    fds: int
    rss_bytes: int


def sample(pid: int | None = None) -> ProcessSample:
    """Threads, open descriptors and resident set size of ``pid`` (this process by default)."""
    base = f"/proc/{pid or os.getpid()}"
    threads = rss_kb = 0
    with open(f"{base}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return ProcessSample(threads, len(os.listdir(f"{base}/fd")), rss_kb * 1024)
