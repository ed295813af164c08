"""What the driver knows while the job runs: durable points per origin, progress lines, one line per fault.

The sinks publish their sync origins' durable numbers through the cluster provider; the
driver turns them into each source origin's durable point: the last transaction N such that
every part of every transaction up to N is durable at the sink that owns it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from reference.pipeline.changes import StreamSpec
from reference.pipeline.coordination import Member, RunKeys
from reference.pipeline.faults import CRASH_EXIT_STATUS
from reference.pipeline.routing import parts
from reference.pipeline.sink import sync_origin
from reference.pipeline.syncserver import SyncServerFailed


class SourceDurability:
    """Each source origin's durable point from its sinks' durable numbers (monotone)."""

    def __init__(self, spec: StreamSpec, readers: int, table: str) -> None:
        self.spec, self.table = spec, table
        self._txs: dict[int, list[tuple[int, tuple[int, ...]]]] = {
            o: [(tx.seq, tuple(sorted(parts(tx, readers)))) for tx in spec.transactions(o)]
            for o in range(spec.origins)
        }
        self._next = dict.fromkeys(self._txs, 0)
        self.last_seq = {o: (txs[-1][0] if txs else 0) for o, txs in self._txs.items()}
        self.final = {sync_origin(table, o, r): max((s for s, rs in txs if r in rs), default=None)
                      for o, txs in self._txs.items() for r in range(readers)}
        """The last sequence number each sync origin carries (None: that sink gets nothing of it)."""

    def update(self, durable: dict[str, int | None]) -> dict[str, int]:
        """Advance with the sync origins' durable numbers; return the source origins' durable points."""
        out: dict[str, int] = {}
        for o, txs in self._txs.items():
            i = self._next[o]
            while i < len(txs) and all((durable.get(sync_origin(self.table, o, r)) or 0) >= txs[i][0]
                                       for r in txs[i][1]):
                i += 1
            self._next[o] = i
            out[self.spec.origin_name(o)] = txs[i - 1][0] if i else 0
        return out


@dataclass
class Sample:
    """One progress observation (seconds since the job started)."""

    t: float
    received: int
    synced: int
    durable: dict[str, int]


@dataclass
class Monitor:
    """Prints progress from the sinks' gossip and one line per fault; with chaos, kills the sync
    server once."""

    member: Member
    keys: RunKeys
    durability: SourceDurability
    total: int
    """Sink rows of the whole run (a change split across two sinks is two)."""
    restart_server: Callable[[], str] | None = None
    watch_task_kill: bool = False
    """Announce the sink task a fault plan kills (``RunKeys.chaos_kill``), once it is claimed."""
    chaos_at: float = 0.2
    interval_s: float = 0.5
    out: TextIO = sys.stderr
    samples: list[Sample] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="pipeline-progress", daemon=True)

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()

    def event(self, text: str) -> None:
        t = time.monotonic() - self._started
        self.events.append((t, text))
        print(f"[{t:6.1f}s] {text}", file=self.out, flush=True)

    def sample(self) -> Sample:
        received = synced = 0
        durable: dict[str, int | None] = {}
        for entry in self.member.core.entries(self.keys.progress).values():
            progress: dict[str, Any] = json.loads(entry.value)
            received += progress["received"]
            synced += progress["synced"] + progress["skipped"]
            durable.update(progress["durable"])
        s = Sample(time.monotonic() - self._started, received, synced, self.durability.update(durable))
        self.samples.append(s)
        return s

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            previous = self.samples[-1] if self.samples else Sample(0.0, 0, 0, {})
            s = self.sample()
            rate = max(0, s.synced - previous.synced) / max(s.t - previous.t, 1e-9)
            members = len(self.member.core.nodes())
            points = " ".join(f"{o}={n}" for o, n in s.durable.items())
            print(f"[{s.t:6.1f}s] {s.synced}/{self.total} sink rows synced ({rate:,.0f}/s), durable {points}, "
                  f"{members} cluster members", file=self.out, flush=True)
            self._announce_task_kill()
            if self.restart_server is not None and s.synced >= self.chaos_at * self.total:
                self._kill_server(self.restart_server)
                self.restart_server = None

    def _announce_task_kill(self) -> None:
        killed = self.member.value(self.keys.chaos_kill) if self.watch_task_kill else None
        if killed is not None:
            self.watch_task_kill = False
            self.event(task_kill_line(killed))

    def _kill_server(self, restart: Callable[[], str]) -> None:
        started = time.monotonic()
        try:
            location = restart()
        except SyncServerFailed as error:  # the run is stopping, or the new server did not start
            self.event(f"chaos: killed the sync server (SIGKILL); not restarted: {error}")
            return
        self.event(f"chaos: killed the sync server (SIGKILL), restarted it at {location} in "
                   f"{time.monotonic() - started:.1f} s; the sinks reconnect and resend what it had not made durable")


def task_kill_line(killed: dict[str, Any]) -> str:
    """The chaos line of a sink task that killed itself (the claim ``CrashSink`` published)."""
    return (f"chaos: killed sink {killed['reader']} (task attempt {killed['attempt']}) at its record "
            f"{killed['record']}, exit status {CRASH_EXIT_STATUS} as a crashed executor; the streaming shuffle "
            f"cannot retry one reader, so the job fails and is re-run")
