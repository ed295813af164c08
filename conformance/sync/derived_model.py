"""A sync case judged against the specification's own endpoint, answer by answer (issue 43's fourth round).

Where the other derived cases put one rule at its boundary, :func:`numbers_against_the_model` walks the
operation space: puts of two origins to three tables (opening, closing, new, at memory, at durable: a
replay, the other origin inside an open transaction, a closing put without rows), probes, blocked and
unblocked tables (a flush fails while its next commit file's name is taken), and the clock moved to each
instant the flush schedule names (a tick before the next deadline, at it). Every answer, the numbers of
both origins after every move of the clock, and finally every table's rows, are compared with what
:class:`spec.sync.server.SyncServerEndpoint` answers to the same inputs, fed the same ``now`` and told the
same flush outcomes. The steps come from a seeded generator that reads the model's state (which origin is
open, its numbers, the next deadline), so each walk reaches the flush rules with several tables, the lag
and retry windows after every way a queue empties, and the sequence rule on each side; the walks are
fixed by their seeds, so a case is deterministic.

Pending bytes are the target's own measure, so the size threshold stays out of reach here (its cases are
in :mod:`conformance.sync.derived`); puts alternate two column orders per table, so every put is an item
of its own whatever an implementation merges; the clock never passes a deadline without stopping at it (a
silent transaction is discarded at its timeout on both sides, and the model's next put is refused as the
target's must be).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from conformance.framework import CaseContext, Verdict
from conformance.sync.derived import TICK_S
from spec.clock import after
from spec.sync.errors import SyncError
from spec.sync.messages import SyncCommand
from spec.sync.schema import SyncSchema
from spec.sync.server import SyncServerEndpoint, TransactionExpired
from spec.sync.squash import SquashedChange
from spec.sync.writer import SyncSettings

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget


@dataclass(frozen=True)
class Walk:
    """One walk: its seed, its policy (lag, count) and how many steps it takes."""

    seed: int
    lag_s: float
    count: int
    steps: int


WALKS: Final = (Walk(1, 10.0, 3, 40), Walk(2, 4.0, 2, 40), Walk(3, 10.0, 1_000_000, 30), Walk(4, 2.0, 3, 40))
"""Fixed before the case was first run: the count rule at 2 and 3 items and out of play, lags of 2-10 s."""

TABLES: Final = 3
ORIGINS: Final = 2


@dataclass
class _Model:
    """The specification's endpoint fed what the target is fed, and the rows it says each table holds."""

    settings: SyncSettings
    endpoint: SyncServerEndpoint = field(init=False)
    now: float = 0.0
    marks: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: dict[str, dict[int, str]] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)
    expired: list[str] = field(default_factory=list)
    """Origins whose open transaction was discarded at its timeout."""

    def __post_init__(self) -> None:
        self.endpoint = SyncServerEndpoint(self.settings)

    def carry_out(self) -> None:
        """Every step due at ``now``, a flush of a blocked table failing (the driver's loop)."""
        while (action := self.endpoint.next_action(self.now)) is not None:
            if isinstance(action, TransactionExpired):
                self.expired.append(action.origin)
                continue
            table = action.table
            plan = self.endpoint.plan_flush(table, self.marks.get(table, {}), action.reason)
            if table in self.blocked:
                self.endpoint.flush_failed(table, "blocked", self.now)
                continue
            stored = self.rows.setdefault(table, {})
            for item in plan.apply:
                for row in item.payload.batch.to_pylist():
                    stored[int(row["new_id"])] = str(row["v"])
            self.marks[table] = plan.table_marks
            self.endpoint.flushed(plan)

    def put(self, cmd: SyncCommand, table: str, batch: pa.Table) -> str:
        """The answer to a put, as the numbers text the suite prints, or ``error``."""
        rows = batch.num_rows
        try:
            if self.endpoint.admit(cmd, rows):
                return _text(self.endpoint, cmd.origin)
            schema = SyncSchema.validate(cmd.column_descriptors, batch.schema) if rows else None
            change = SquashedChange.of_put(schema, [batch]) if schema is not None else None
            received = self.endpoint.record(cmd, table=table, rows=rows, change=change, now=self.now, claim=lambda: True)
        except SyncError:
            return "error"
        if received is None:
            return "busy"
        self.carry_out()
        return _text(self.endpoint, cmd.origin)

    def advance(self, seconds: float) -> None:
        self.now = after(self.now, seconds)
        self.carry_out()


def _text(endpoint: SyncServerEndpoint, origin: str) -> str:
    memory, durable = endpoint.sequences(origin)
    return f"accepted=True memory={memory} durable={durable}"


def _seen(answer: str) -> str:
    """The target's answer in the model's words (``error`` for any refusal; ``first`` left out)."""
    if answer.startswith("error"):
        return "error"
    if answer.startswith("accepted=False"):
        return "busy"
    return answer.split(" first=")[0]


class _Walker:
    """Drives one walk on the target and the model side by side, collecting every difference."""

    def __init__(self, t: SyncTarget, ctx: CaseContext, walk: Walk, stack: ExitStack) -> None:
        from conformance.sync.suite import _ids

        self.t, self.ctx, self.walk, self.stack = t, ctx, walk, stack
        self.random = random.Random(walk.seed)
        tag = _ids()[1]
        self.paths = [f"{tag}_m{i}" for i in range(TABLES)]
        self.origins = [f"{_ids()[0]}-{i}" for i in range(ORIGINS)]
        self.model = _Model(SyncSettings(max_replication_lag_s=walk.lag_s, max_syncs_per_url=walk.count,
                                         max_in_memory_bytes=2**62))
        self.puts_to = [0] * TABLES
        self.next_key = 1
        self.blockers: dict[int, ExitStack] = {}
        self.open: int | None = None
        """The origin whose transaction the model holds open."""
        self.log: list[str] = []
        self.differences: list[str] = []

    # -- what the walk does --------------------------------------------------------
    def _compare(self, what: str, want: str, got: str) -> None:
        self.log.append(f"{what}: {got}")
        if want != got and not self.differences:
            self.differences.append(f"walk {self.walk.seed} step {len(self.log)} ({what}): target {got}, "
                                    f"spec {want}; before: {'; '.join(self.log[-4:-1])}")

    def put(self, origin: int, table: int, sequence: int | None, rows: int) -> None:
        from conformance.sync.suite import DESCS, DESCS_SWAPPED, _cmd, _numbers

        keys = [self.random.randint(1, 4) + 10 * table for _ in range(rows)]
        keys = list(dict.fromkeys(keys))
        values = [f"w{self.walk.seed}s{len(self.log)}k{k}" for k in keys]
        swapped = self.puts_to[table] % 2 == 1
        self.puts_to[table] += 1
        columns = {"new_id": pa.array(keys, pa.int64()), "old_id": pa.array([None] * len(keys), pa.int64()),
                   "v": pa.array(values, pa.string())}
        order = ("new_id", "old_id", "v") if swapped else ("old_id", "new_id", "v")
        batch = pa.table({name: columns[name] for name in order})
        cmd = _cmd(self.paths[table], self.origins[origin], sequence, DESCS_SWAPPED if swapped else DESCS)
        want = self.model.put(cmd, self.paths[table], batch)
        if want.startswith("accepted"):
            self.open = origin if sequence is None else None
        got = _seen(_numbers(self.t.put(self.ctx, cmd, batch)))
        self._compare(f"put {origin}->{table} seq={sequence} rows={len(keys)}", want, got)

    def probe(self, origin: int) -> None:
        from conformance.sync.suite import _probe

        want = _text(self.model.endpoint, self.origins[origin])
        self._compare(f"probe {origin}", want, _seen(_probe(self.t, self.ctx, self.origins[origin])))

    def advance(self, seconds: float) -> None:
        from conformance.sync.derived import _advance

        self.model.advance(seconds)
        if self.open is not None and self.origins[self.open] in self.model.expired:
            self.model.expired.clear()
            self.open = None
        _advance(self.t, seconds)
        self.log.append(f"advance {seconds:g}")
        for origin in range(ORIGINS):
            self.probe(origin)

    def block(self, table: int) -> None:
        from conformance.sync.derived_writer import _blocked

        if table in self.blockers:
            self.blockers.pop(table).close()
            self.model.blocked.discard(self.paths[table])
            self.log.append(f"unblock {table}")
            return
        blocker = ExitStack()
        blocker.enter_context(_blocked(self.t, self.paths[table]))
        self.blockers[table] = blocker
        self.stack.callback(blocker.close)
        self.model.blocked.add(self.paths[table])
        self.log.append(f"block {table}")

    # -- choosing the next step from the model's state -------------------------------------
    def _sequence(self, origin: int) -> int | None:
        memory, durable = self.model.endpoint.sequences(self.origins[origin])
        choices: list[int | None] = [None, (memory or 0) + 1, (memory or 0) + 1]
        if memory is not None:
            choices.append(memory)
        if durable is not None:
            choices.append(durable)
        return self.random.choice(choices)

    def step(self) -> None:
        r = self.random.random()
        open_origin = self.open
        if r < 0.55:
            if open_origin is not None and self.random.random() < 0.85:
                origin = open_origin
            else:
                origin = self.random.randrange(ORIGINS)
            rows = self.random.choice((1, 1, 2, 0)) if open_origin == origin else self.random.choice((1, 2))
            sequence = self._sequence(origin)
            if rows == 0 and sequence is None:
                sequence = (self.model.endpoint.sequences(self.origins[origin])[0] or 0) + 1
            self.put(origin, self.random.randrange(TABLES), sequence, rows)
        elif r < 0.85:
            gap = self.model.endpoint.next_deadline(self.model.now) - self.model.now
            choices = [s for s in (TICK_S, gap - TICK_S, gap, gap) if 0 <= s <= gap]
            self.advance(self.random.choice(choices))
        elif r < 0.93:
            self.block(self.random.randrange(TABLES))
        else:
            self.probe(self.random.randrange(ORIGINS))

    def finish(self) -> None:
        """Unblock every table, close the open transaction, let every retry come due; then judge the rows."""
        for table in list(self.blockers):
            self.block(table)
        open_origin = self.open
        if open_origin is not None:
            memory = self.model.endpoint.sequences(self.origins[open_origin])[0]
            self.put(open_origin, 0, (memory or 0) + 1, 0)
        for _ in range(4 * TABLES):
            gap = self.model.endpoint.next_deadline(self.model.now) - self.model.now
            self.advance(gap)
            if not self.model.endpoint.pending_tables:
                break
        for table, path in enumerate(self.paths):
            want = self.model.rows.get(path, {})
            got = {int(r["id"]): str(r["v"]) for r in self.t.table(path)} if self._exists(path) else {}
            if got != want and not self.differences:
                self.differences.append(f"walk {self.walk.seed}: table {table} holds {got}, spec {want}")

    def _exists(self, path: str) -> bool:
        log = os.path.join(self.t.store, path, "_delta_log")
        return os.path.isdir(log) and any(name.endswith(".json") for name in os.listdir(log))

    def run(self) -> Iterator[str]:
        for _ in range(self.walk.steps):
            self.step()
            if self.differences:
                break
        if not self.differences:
            self.finish()
        yield from self.differences


def numbers_against_the_model(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Each walk of :data:`WALKS` under its policy: every answer, the numbers after every move of the clock
    and every table's rows at the end equal the specification's endpoint's."""
    from conformance.sync.suite import _policy

    problems: list[str] = []
    answers = 0
    for walk in WALKS:
        with ExitStack() as stack, _policy(t, lag=walk.lag_s, count=walk.count):
            walker = _Walker(t, ctx, walk, stack)
            problems += list(walker.run())
            answers += len(walker.log)
        if problems:
            break
    return Verdict(not problems, f"{len(WALKS)} seeded walks: every answer, the numbers after every move of the "
                   "clock and every table's rows as the spec's endpoint says", "; ".join(problems)
                   or f"{answers} steps as the spec says")
