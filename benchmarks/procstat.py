"""What a process holds, read from /proc: threads, file descriptors, resident memory; the processes below it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple


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


class CpuSeconds(NamedTuple):
    """CPU time (user + system) of a JVM and of the processes it started (PySpark's Python workers)."""

    jvm: float
    python: float

    def __sub__(self, earlier: tuple[float, ...]) -> CpuSeconds:
        return CpuSeconds(round(self.jvm - earlier[0], 2), round(self.python - earlier[1], 2))


def _times(pid: int) -> tuple[int, float, float]:
    """Parent pid, own CPU seconds, and CPU seconds of its children already reaped (from /proc/pid/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def jvm_pid(sc: Any) -> int:
    """The process id of the JVM a local PySpark context launched."""
    return int(sc._gateway.proc.pid)


def cpu_seconds(jvm_pid: int) -> CpuSeconds:
    """CPU seconds so far of ``jvm_pid`` and of all its descendants (live ones, and the ones they reaped):
    figures of a side-by-side run that the machine's load changes less than wall time."""
    times: dict[int, tuple[int, float, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                times[int(entry)] = _times(int(entry))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    tree, grew = {jvm_pid}, True
    while grew:
        below = {pid for pid, (parent, _, _) in times.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    python = sum(times[pid][1] + times[pid][2] for pid in tree - {jvm_pid})
    return CpuSeconds(times[jvm_pid][1], python)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the sync server leads a session of its own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
