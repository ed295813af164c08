"""Fault plans: the faults a run injects into its sink tasks, chosen by the job and given to them.

The sink asks its plan for the records to consume; :data:`NO_FAULTS` hands them back untouched,
so a production run has no chaos branch anywhere in the sink. ``--chaos`` gives the sinks a
:class:`CrashSink` instead (the driver kills the sync server itself, see progress.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from reference.pipeline.coordination import Member, RunKeys

T = TypeVar("T")

CRASH_EXIT_STATUS = 137
"""What a process killed by SIGKILL reports: the crashed executor a --chaos task imitates."""


class FaultPlan:
    """The faults of a run; this base injects none (pickled into the sink tasks with their config)."""

    def sink_records(self, records: Iterable[T], reader: int, attempt: str, member: Member) -> Iterable[T]:
        """The records sink ``reader`` (task attempt ``attempt``) consumes."""
        return records


NO_FAULTS = FaultPlan()


@dataclass(frozen=True)
class CrashSink(FaultPlan):
    """Sink ``reader`` dies as a crashed executor would (no cleanup, exit status 137) when its
    ``after``-th record arrives, once per run: the first attempt to get there claims the crash in
    the run's gossip (``RunKeys.chaos_kill``, which the driver announces: progress.py), a retried one
    goes on."""

    run_id: str
    reader: int
    after: int

    def sink_records(self, records: Iterable[T], reader: int, attempt: str, member: Member) -> Iterable[T]:
        if reader != self.reader:
            return records
        return self._crash_at(records, reader, attempt, member)

    def _crash_at(self, records: Iterable[T], reader: int, attempt: str, member: Member) -> Iterator[T]:
        for count, record in enumerate(records, 1):
            if count == self.after and member.claim(RunKeys(self.run_id).chaos_kill,
                                                    {"reader": reader, "attempt": attempt, "record": count}):
                os._exit(CRASH_EXIT_STATUS)
            yield record
