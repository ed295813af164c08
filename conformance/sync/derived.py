"""Sync cases derived from the specification's own rules rather than written bug by bug.

- **Squash chains** (docs/spec/sync.md#squashing): every sequence of up to four changes (insert,
  update, delete, key change) on one or two keys that a table could receive, from an empty table or
  one holding either key or both, judged against a small model of the table (:func:`final_state`).
  All chains run at once, each on its own keys, so a case is a handful of puts: the chains in one
  put, one put per change flushed together, and one put per change flushed after each.
- **Lag deadline** (docs/spec/sync.md#flush-policy): pending data is flushed at exactly
  ``max_replication_lag_s`` after the oldest of it arrived, never one tick before, also when more
  data came later, after a flush and after a failed flush was retried; a failed flush is retried at
  exactly the instant its wait (``spec.sync.flush_failures``) ends, after each of several failures.
- **No-ops** (probes, replays, refused puts): they must leave the table's files as they were.
- **Every rule at its smallest violating input, every shape of its input** (issue 43's second planted
  round): the transaction timeout at its instant and the refusal it leaves (once); a zero-row closing put
  on each kind of table; the descriptor count one off on both sides; a partly null key on each side and in
  each column; a key inserted twice in one put, on each apply path; the size rule's table when the largest
  is the older and when it is the newer; the durable number restored from tables read in either order.

The checks reuse the suite's helpers (imported when they run: :mod:`conformance.sync.suite` lists
these cases).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from conformance import inexact
from conformance.framework import CaseContext, Verdict
from spec.clock import elapsed
from spec.sync.flush_failures import FlushFailures
from spec.sync.messages import ColumnDescriptor
from spec.sync.writer import SyncSettings

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

KEYS: Final = (1, 2)
MAX_CHAIN: Final = 4
TICK_S: Final = 1 / 1024
"""The smallest step the lag cases take: a binary fraction, so clock sums are exact."""
MS_S: Final = 0.001
"""The step of the inexact cases: a millisecond, what an implementation counting integer milliseconds moves by."""
LAG_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Change:
    """One row of a change batch: ``old`` -> ``new`` (None: no such key), carrying ``value``."""

    old: int | None
    new: int | None

    @property
    def kind(self) -> str:
        if self.old is None:
            return f"insert {self.new}"
        if self.new is None:
            return f"delete {self.old}"
        return f"update {self.old}" if self.old == self.new else f"move {self.old}->{self.new}"


def valid_changes(present: frozenset[int]) -> list[Change]:
    """Every change a table holding the keys ``present`` (of :data:`KEYS`) can receive."""
    out = [Change(None, k) for k in KEYS if k not in present]
    for k in sorted(present):
        out += [Change(k, k), Change(k, None)] + [Change(k, j) for j in KEYS if j not in present]
    return out


def after(present: frozenset[int], change: Change) -> frozenset[int]:
    kept = present - {change.old} if change.old is not None else present
    return kept | {change.new} if change.new is not None else kept


@dataclass(frozen=True, slots=True)
class Chain:
    """Keys stored before, then changes in order."""

    stored: frozenset[int]
    changes: tuple[Change, ...]

    def __str__(self) -> str:
        return f"stored {sorted(self.stored)}: " + ", ".join(c.kind for c in self.changes)


def chains(max_length: int = MAX_CHAIN) -> list[Chain]:
    """Every chain of 1..``max_length`` valid changes from each stored state (none, key 1, both keys)."""
    out: list[Chain] = []
    for stored in (frozenset(), frozenset({1}), frozenset(KEYS)):
        frontier: list[tuple[frozenset[int], tuple[Change, ...]]] = [(stored, ())]
        for _ in range(max_length):
            frontier = [(after(present, c), done + (c,)) for present, done in frontier for c in valid_changes(present)]
            out += [Chain(stored, done) for _, done in frontier]
    return out


def final_state(chain: Chain, values: Callable[[int], str | None], stored_value: Callable[[int], str],
                keeps: Callable[[int], bool] = lambda step: False) -> dict[int, str | None]:
    """The model: the table after the chain, change ``i`` writing ``values(i)``, or keeping the value of the
    row it changes when ``keeps(i)`` (a CHANGED flag false on an update or a key change)."""
    table: dict[int, str | None] = {k: stored_value(k) for k in chain.stored}
    for i, change in enumerate(chain.changes):
        kept = table.get(change.old) if change.old is not None else None
        if change.old is not None:
            del table[change.old]
        if change.new is not None:
            table[change.new] = kept if kept is not None and keeps(i) else values(i)
    return table


# -- running the chains on a target --------------------------------------------------------

def _key(chain: int, key: int) -> int:
    return 10 * chain + key


def _value(chain: int, step: int) -> str:
    return f"c{chain}s{step}"


def _stored_value(chain: int, key: int) -> str:
    return f"c{chain}k{key}"


ChainRow = tuple[int | None, int | None, str | None, bool, str | None]
"""``old_id, new_id, v, changed_v, w`` (the last two sent only with CHANGED columns)."""


def _batch(rows: Sequence[tuple[int | None, int | None, str | None]]) -> pa.Table:
    return pa.table({"old_id": pa.array([r[0] for r in rows], pa.int64()),
                     "new_id": pa.array([r[1] for r in rows], pa.int64()),
                     "v": pa.array([r[2] for r in rows], pa.string())})


SHAPES: Final = ("whole", "changed", "left-out", "reordered", "two-key")
"""How a chain run's puts look: every row written whole (the Arrow apply path); with v's CHANGED flag false on
every other update or key change and a second value w (the row-by-row apply path); with the table's second
value w left out of every change (a stored value kept, a new row without one); with the columns in another
order (new key, value, old key) and a null value at every other step; keyed on two columns (the chain's
number and the key), so two keys of a chain share their first column."""


@dataclass(frozen=True)
class ChainRun:
    """The chains a case runs and how their puts look (:data:`SHAPES`; ``changed`` runs each chain twice, once
    per parity of its CHANGED flags)."""

    chains: tuple[Chain, ...]
    shape: str = "whole"

    @classmethod
    def of(cls, shape: str) -> ChainRun:
        every = chains()
        return cls(tuple(c for c in every for _ in range(2)) if shape == "changed" else tuple(every), shape)

    @property
    def changed(self) -> bool:
        return self.shape == "changed"

    def keeps(self, i: int, step: int) -> bool:
        """Whether change ``step`` of chain ``i`` sends v's CHANGED flag false (only updates and key changes)."""
        return self.changed and self.chains[i].changes[step].old is not None and (i + step) % 2 == 1

    def nulls(self, i: int, step: int) -> bool:
        """Whether change ``step`` of chain ``i`` writes a null v (the reordered shape, every other step)."""
        return self.shape == "reordered" and (i + step) % 2 == 1

    @property
    def descs(self) -> tuple[ColumnDescriptor, ...]:
        from conformance.sync.suite import DESCS, DESCS_CHANGED, NEW, OLD, VALUE

        if self.shape == "reordered":
            return (ColumnDescriptor(role=NEW, name="id"), ColumnDescriptor(role=VALUE, name="v"),
                    ColumnDescriptor(role=OLD, name="id"))
        if self.shape == "two-key":
            from conformance.sync.suite import DESCS_TWO_KEYS

            return DESCS_TWO_KEYS
        return DESCS_CHANGED if self.changed else DESCS

    @property
    def stored_descs(self) -> tuple[ColumnDescriptor, ...]:
        """The stored rows' put: with w too when the changes leave it out."""
        from conformance.sync.suite import DESCS_V_W

        return DESCS_V_W if self.shape == "left-out" else self.descs

    def batch(self, rows: Sequence[ChainRow], stored: bool = False) -> pa.Table:
        table = _batch([r[:3] for r in rows])
        if self.shape == "two-key":  # key K of chain i as (i, K): _key(i, K) split back
            def part(column: str, i: int) -> pa.Array:
                return pc.divide(table[column], 10) if i == 0 else pc.subtract(table[column],
                                                                              pc.multiply(pc.divide(table[column], 10), 10))
            return pa.table({"old_id": part("old_id", 0), "old_k": part("old_id", 1), "new_id": part("new_id", 0),
                             "new_k": part("new_id", 1), "v": table["v"]})
        if self.shape == "reordered":
            return table.select(["new_id", "v", "old_id"])
        if self.shape == "left-out" and stored:
            return table.append_column("w", pa.array([r[4] for r in rows], pa.string()))
        if not self.changed:
            return table
        return table.append_column("changed_v", pa.array([r[3] for r in rows], pa.bool_())).append_column(
            "w", pa.array([r[4] for r in rows], pa.string()))

    def stored_rows(self) -> list[ChainRow]:
        return [(None, _key(i, k), _stored_value(i, k), True, "w" + _stored_value(i, k))
                for i, c in enumerate(self.chains) for k in sorted(c.stored)]

    def stored_batch(self) -> pa.Table:
        return self.batch(self.stored_rows(), stored=True)

    def step_rows(self, step: int) -> list[ChainRow]:
        """Change ``step`` of every chain long enough, chains interleaved."""
        rows: list[ChainRow] = []
        for i, chain in enumerate(self.chains):
            if step < len(chain.changes):
                c = chain.changes[step]
                keep = self.keeps(i, step)
                value = None if c.new is None or self.nulls(i, step) else "ignored" if keep else _value(i, step)
                rows.append((None if c.old is None else _key(i, c.old), None if c.new is None else _key(i, c.new),
                             value, not keep, None if c.new is None else "w" + _value(i, step)))
        return rows

    def step_batch(self, step: int) -> pa.Table:
        return self.batch(self.step_rows(step))

    def expected(self) -> dict[int, tuple[str | None, str | None]]:
        """Each key's (v, w) by the model (w None where the table has no w)."""
        out: dict[int, tuple[str | None, str | None]] = {}
        for i, chain in enumerate(self.chains):
            state = final_state(chain, lambda step: None if self.nulls(i, step) else _value(i, step),
                                lambda k: _stored_value(i, k), lambda step: self.keeps(i, step))
            if self.changed:
                w: dict[int, str | None] = dict(final_state(chain, lambda step: "w" + _value(i, step),
                                                            lambda k: "w" + _stored_value(i, k)))
            elif self.shape == "left-out":  # w rides with its row; a row the chain inserts has none
                w = dict(final_state(chain, lambda step: None, lambda k: "w" + _stored_value(i, k), lambda step: True))
            else:
                w = {}
            out.update({_key(i, k): (v, w.get(k)) for k, v in state.items()})
        return out


def _judge_chains(t: SyncTarget, path: str, run: ChainRun, errors: Sequence[str]) -> Verdict:
    got = {int(r["id"]) * (10 if "k" in r else 1) + int(r.get("k") or 0): (r["v"], r.get("w")) for r in t.table(path)}
    want = run.expected()
    chain_of = {_key(i, k): i for i in range(len(run.chains)) for k in KEYS}
    mine: list[dict[int, tuple[str | None, str | None]]] = [{} for _ in run.chains]
    expected: list[dict[int, tuple[str | None, str | None]]] = [{} for _ in run.chains]
    for rows, by_chain in ((got, mine), (want, expected)):  # one pass each, not one per chain
        for key, value in rows.items():
            if key in chain_of:
                by_chain[chain_of[key]][key] = value
    wrong = [f"chain #{i} ({chain}): table {mine[i]}, model {expected[i]}"
             for i, chain in enumerate(run.chains) if mine[i] != expected[i]]
    shape = {"whole": "without CHANGED columns", "changed": "with v's CHANGED flag false on alternate updates",
             "left-out": "with the table's value w left out of every change",
             "reordered": "with the columns in another order and null values",
             "two-key": "keyed on two columns"}[run.shape]
    expected_text = (f"{len(run.chains)} chains of up to {MAX_CHAIN} changes on keys {KEYS}, {shape}: the table "
                     "equals the model")
    if errors:
        return Verdict(False, expected_text, "; ".join(errors[:2]))
    return Verdict(not wrong, expected_text, f"{len(wrong)} chains differ: " + "; ".join(wrong[:3]) if wrong
                   else f"all {len(run.chains)} chains as modelled")


Layout = Callable[["SyncTarget", CaseContext, str, str, ChainRun], list[str]]


def chain_case(layout: Layout, shape: str = "whole") -> Callable[[SyncTarget, CaseContext], Verdict]:
    """Store the chains' initial keys, run ``layout``'s puts of their changes, compare with the model."""
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        from conformance.sync.suite import _cmd, _ids, _numbers

        origin, path = _ids()
        run = ChainRun.of(shape)
        stored = t.put(ctx, _cmd(path, origin, 1, run.stored_descs), run.stored_batch())
        if stored.error is not None:
            return Verdict(False, "the stored keys are accepted", _numbers(stored))
        return _judge_chains(t, path, run, layout(t, ctx, path, origin, run))

    return check


def _failed(outcome_text: str, step: int) -> list[str]:
    return [] if outcome_text.startswith("accepted=True") else [f"the put of change {step + 1}: {outcome_text}"]


def one_put(t: SyncTarget, ctx: CaseContext, path: str, origin: str, run: ChainRun) -> list[str]:
    """Every change of every chain in one put (one transaction), flushed after it."""
    from conformance.sync.suite import _cmd, _numbers

    rows = [r for step in range(MAX_CHAIN) for r in run.step_rows(step)]
    return _failed(_numbers(t.put(ctx, _cmd(path, origin, 2, run.descs), run.batch(rows))), 0)


def put_per_change(t: SyncTarget, ctx: CaseContext, path: str, origin: str, run: ChainRun) -> list[str]:
    """Change i of every chain in transaction i, each flushed after its put."""
    from conformance.sync.suite import _cmd, _numbers

    errors: list[str] = []
    for step in range(MAX_CHAIN):
        errors += _failed(_numbers(t.put(ctx, _cmd(path, origin, 2 + step, run.descs), run.step_batch(step))), step)
    return errors


def one_transaction(t: SyncTarget, ctx: CaseContext, path: str, origin: str, run: ChainRun) -> list[str]:
    """Change i of every chain in put i of one transaction (the last put closes it), held back and flushed
    together: the puts of one transaction squash in order."""
    from conformance.sync.suite import _cmd, _numbers, _policy

    errors: list[str] = []
    with _policy(t):
        for step in range(MAX_CHAIN):
            seq = 2 if step == MAX_CHAIN - 1 else None
            errors += _failed(_numbers(t.put(ctx, _cmd(path, origin, seq, run.descs), run.step_batch(step))), step)
    return errors


def flushed_together(t: SyncTarget, ctx: CaseContext, path: str, origin: str, run: ChainRun) -> list[str]:
    """Change i of every chain in transaction i, all four held back and flushed in one flush."""
    from conformance.sync.suite import _policy

    with _policy(t):
        return put_per_change(t, ctx, path, origin, run)


# -- the lag deadline -------------------------------------------------------------------------

def _advance(t: SyncTarget, seconds: float) -> None:
    t.command(f"ADVANCE {seconds!r}")


def lag_boundaries(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """With only the lag threshold in play (``LAG_S``): each put's data is flushed at exactly the lag after
    the table's oldest pending data arrived, not one tick (``TICK_S``) before; a later put to the same table
    does not move that instant; after a flush the next data waits a full lag of its own."""
    from conformance.sync.suite import _cmd, _ids, _policy, _probe

    origin, path = _ids()
    want: list[str] = []
    got: list[str] = []

    def expect(durable: int | None, what: str) -> None:
        want.append(f"{what}: durable={durable}")
        numbers = _probe(t, ctx, origin)
        got.append(f"{what}: {numbers.split(' first=')[0].split(' ', 2)[-1]}")

    with _policy(t, lag=LAG_S):
        t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")]))
        _advance(t, LAG_S / 2)
        t.put(ctx, _cmd(path, origin, 2), _batch([(None, 2, "b")]))
        _advance(t, LAG_S / 2 - TICK_S)
        expect(None, "one tick before the lag of the oldest data")
        _advance(t, TICK_S)
        expect(2, "at the lag of the oldest data")
        t.put(ctx, _cmd(path, origin, 3), _batch([(None, 3, "c")]))
        _advance(t, LAG_S - TICK_S)
        expect(2, "one tick before the lag of data put after a flush")
        _advance(t, TICK_S)
        expect(3, "at its lag")
    ok = all(g.endswith(w.split(": ", 1)[1]) for w, g in zip(want, got))
    return Verdict(ok and len(got) == len(want), "; ".join(want), "; ".join(got))


def lag_after_failed_flush(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A table whose flush failed (its first commit file's name taken by a directory) is written once it
    can be; from then on its new data again waits exactly the lag, not a tick less."""
    from conformance.sync.suite import _cmd, _ids, _policy, _probe

    origin, path = _ids()
    blocker = os.path.join(t.store, path, "_delta_log", f"{0:020}.json")
    got = []
    with _policy(t, lag=LAG_S):
        t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")]))
        os.makedirs(blocker)
        try:
            _advance(t, LAG_S)
        finally:
            os.rmdir(blocker)
        _advance(t, 600.0)  # past any retry wait
        got.append(_probe(t, ctx, origin))
        got += new_data_lag(t, ctx, path, origin, 2)[1:]
    want = ["durable=1", "durable=1", "durable=2"]
    ok = all(f" {w} " in g for w, g in zip(want, got))
    return Verdict(ok, "after the retry: " + "; then one tick before the next lag ".join(want[:2]) + f"; at it {want[2]}",
                   "; ".join(got))


def new_data_lag(t: SyncTarget, ctx: CaseContext, path: str, origin: str, seq: int) -> list[str]:
    """Put transaction ``seq`` (one row) to ``path`` under a lag of ``LAG_S``: the numbers right after it, a
    tick before its lag and at it."""
    from conformance.sync.suite import _cmd, _probe

    t.put(ctx, _cmd(path, origin, seq), _batch([(None, seq, "b")]))
    got = [_probe(t, ctx, origin)]
    _advance(t, LAG_S - TICK_S)
    got.append(_probe(t, ctx, origin))
    _advance(t, TICK_S)
    got.append(_probe(t, ctx, origin))
    return got


def retry_waits(failures: int) -> list[float]:
    """The waits before each retry after ``failures`` consecutive failed flushes, from the spec's table."""
    table, now, waits = FlushFailures(), 0.0, []
    for _ in range(failures):
        retry_at = table.failed("t", "", now).retry_at
        waits.append(elapsed(now, retry_at))
        now = retry_at
    return waits


RETRIES: Final = 4
"""Consecutive failures judged: up to the cap of the wait."""


def _failing_then_retried(t: SyncTarget, ctx: CaseContext, earlier: Sequence[float], wait: float, tick: float,
                          lead: float = 0.0) -> str | None:
    """``lead`` s on, tables A (three rows) and B (one row), one transaction each, reach the size threshold together;
    A, the largest, fails to flush (its first commit file's name taken by a directory), then B is flushed, which
    brings the pending bytes under the threshold, so no rule but the retry asks for A again. A fails at its retries
    after the ``earlier`` waits too; one ``tick`` before the retry after ``wait`` nothing is durable; the directory
    removed, the retry at its instant lands A (durable 2). What went otherwise (None: nothing)."""
    from conformance.sync.suite import HELD_S, _cmd, _ids, _pending_bytes, _probe

    origin, path = _ids()
    blocker = os.path.join(t.store, path, "_delta_log", f"{0:020}.json")
    if lead:
        _advance(t, lead)
    t.put(ctx, _cmd(path, origin, 1), _batch([(None, key, "a") for key in (1, 2, 3)]))
    t.put(ctx, _cmd(f"{path}_b", origin, 2), _batch([(None, 1, "b")]))
    os.makedirs(blocker)
    try:
        t.command(f"POLICY {HELD_S} 1000000 {_pending_bytes(t)}")
        _advance(t, 0.0)
        for done in earlier:
            _advance(t, done)
        _advance(t, wait - tick)
        early = _probe(t, ctx, origin)
    finally:
        os.rmdir(blocker)
    _advance(t, tick)
    at = _probe(t, ctx, origin)
    t.command(f"POLICY {HELD_S} 1000000 {2**62}")
    if " durable=None " not in early or " durable=2 " not in at:
        return f"retry after {len(earlier) + 1} failure(s) (wait {wait:g} s): a tick before it {early}; at it {at}"
    return None


def retry_at_its_instants(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """For k = 1..``RETRIES``: a table failing its first k flushes (:func:`_failing_then_retried`), not durable a
    tick before the k-th retry's instant and durable at it."""
    from conformance.sync.suite import _policy

    waits = retry_waits(RETRIES)
    with _policy(t):
        problems = [p for k in range(1, RETRIES + 1) if (p := _failing_then_retried(
            t, ctx, waits[:k - 1], waits[k - 1], TICK_S)) is not None]
    return Verdict(not problems, f"retries after waits of {', '.join(f'{w:g}' for w in waits)} s, each at exactly its "
                   "instant: durable=None a tick before, durable=2 at it", "; ".join(problems) or "as expected")


def retry_at_inexact_instants(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """The first retry of a failing table (:func:`_failing_then_retried`) after a failure at the first whole-ms
    instant from where the target's clock stands (``ADVANCE`` moves it from 0) after which the wait summed as float
    seconds lands past its instant (:mod:`conformance.inexact`): not durable a ms before, durable at it."""
    from conformance.sync.suite import _policy

    wait = retry_waits(1)[0]
    with _policy(t):
        lead = inexact.sum_late(round(wait * 1000), t.now, first_ms=0)
        problem = _failing_then_retried(t, ctx, [], wait, MS_S, lead / 1000)
    return Verdict(problem is None, f"a failure {lead} ms on, retried {wait:g} s later: durable=None a ms before, "
                   "durable=2 at it", problem or "as expected")


INEXACT_LAGS_MS: Final = (200, 700)
"""The lags of the inexact case: tenths of a second, inexact in binary."""


def lag_at_inexact_instants(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """For each lag of :data:`INEXACT_LAGS_MS`: a put at the first whole-ms instant from where the target's clock
    stands after which the lag summed as float seconds lands past its instant (:mod:`conformance.inexact`), then
    the clock a ms before the lag and at it: not durable, then durable."""
    from conformance.sync.suite import _cmd, _ids, _policy, _probe

    want, got = [], []
    for lag_ms in INEXACT_LAGS_MS:
        origin, path = _ids()
        with _policy(t, lag=lag_ms / 1000):
            lead = inexact.sum_late(lag_ms, t.now, first_ms=0)
            _advance(t, lead / 1000)
            t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")]))
            _advance(t, (lag_ms - 1) / 1000)
            got.append(_probe(t, ctx, origin))
            _advance(t, MS_S)
            got.append(_probe(t, ctx, origin))
        want += [f"lag {lag_ms} ms from a put {lead} ms on, a ms before it: durable=None",
                 f"at it: durable=1"]
    ok = len(got) == len(want) and all(f" {w.rsplit(': ', 1)[1]} " in g for w, g in zip(want, got))
    return Verdict(ok, "; ".join(want), "; ".join(got))


# -- no-ops ---------------------------------------------------------------------------------

def _files(root: str) -> dict[str, int]:
    """Every file under ``root`` with its size (the table's data files and its whole log)."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            full = os.path.join(folder, name)
            out[os.path.relpath(full, root)] = os.path.getsize(full)
    return out


NoOp = Callable[["SyncTarget", CaseContext, str, str], str]


def _noop_probe(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
    from conformance.sync.suite import _cmd, _numbers

    return _numbers(t.put(ctx, _cmd(path, origin, None, ())))


def _noop_replay(seq: int) -> NoOp:
    def put(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
        from conformance.sync.suite import _cmd, _numbers

        return _numbers(t.put(ctx, _cmd(path, origin, seq), _batch([(None, 2, "replayed"), (1, None, None)])))

    return put


def _noop_refused(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
    from conformance.sync.suite import DESCS, _cmd, _numbers

    return _numbers(t.put(ctx, _cmd(path, origin, 11, DESCS[:2]), _batch([(1, None, None)])))


def _noop_interleaved(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
    """Another origin's transaction is open on another table: this origin's put to the table is refused."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    other, _ = _ids()
    t.put(ctx, _cmd(f"{path}_other", other, None), _batch([(None, 1, "open")]))
    answer = _numbers(t.put(ctx, _cmd(path, origin, 11), _batch([(None, 2, "interleaved")])))
    t.put(ctx, _cmd(f"{path}_other", other, 1), _batch([]))
    return answer


def _noop_empty_transaction(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
    from conformance.sync.suite import _cmd, _numbers

    return _numbers(t.put(ctx, _cmd(path, origin, 11), _batch([])))


def _noop_mistyped(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
    from conformance.sync.suite import _cmd, _numbers

    batch = pa.table({"old_id": pa.array([None], pa.int64()), "new_id": pa.array([2], pa.int64()),
                      "v": pa.array([2], pa.int64())})
    return _numbers(t.put(ctx, _cmd(path, origin, 11), batch))


def _noop_closing_elsewhere(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> str:
    """A transaction whose rows go to another table, closed by a put without rows naming this one."""
    from conformance.sync.suite import _cmd, _numbers

    t.put(ctx, _cmd(f"{path}_rows", origin, None), _batch([(None, 1, "elsewhere")]))
    return _numbers(t.put(ctx, _cmd(path, origin, 11), _batch([])))


NOOPS: Final[tuple[tuple[str, NoOp], ...]] = (
    ("a probe naming the table", _noop_probe),
    ("a replay below durable (a delete and an insert)", _noop_replay(5)),
    ("a replay at exactly durable", _noop_replay(10)),
    ("a put refused for its descriptors", _noop_refused),
    ("a put refused as interleaved in another origin's transaction", _noop_interleaved),
    ("a transaction opened with zero rows and a sequence (refused)", _noop_empty_transaction),
    ("a put whose value type differs from the table's (refused)", _noop_mistyped),
    ("a put without rows closing a transaction whose rows went to another table", _noop_closing_elsewhere),
)


def noops_write_nothing(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Transaction 10 is durable in the table; each no-op after it, flushed after every put, leaves every
    file of the table as it was; a probe naming a table that does not exist creates nothing."""
    from conformance.sync.suite import _cmd, _ids

    origin, path = _ids()
    t.put(ctx, _cmd(path, origin, 10), _batch([(None, 1, "a")]))
    root = os.path.join(t.store, path)
    before = _files(root)
    problems = []
    for what, noop in NOOPS:
        answer = noop(t, ctx, path, origin)
        now = _files(root)
        if now != before:
            changed = sorted(set(now.items()) ^ set(before.items()))
            problems.append(f"{what} ({answer}) changed {[name for name, _ in changed][:3]}")
            before = now
    missing = f"{path}_absent"
    _noop_probe(t, ctx, missing, origin)
    if os.path.exists(os.path.join(t.store, missing)):
        problems.append("a probe naming a table that does not exist created it")
    return Verdict(not problems, f"{len(NOOPS)} no-ops and a probe of a missing table write nothing",
                   "; ".join(problems) or "nothing written")



# -- every rule at its smallest violating input, every shape of a rule's input ----------------------------

def transaction_timeout_at_its_instant(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Origin A opens a transaction and falls silent. One tick before ``transaction_timeout_s`` (the spec's
    default, 300 s) another origin's put is still refused as interleaved; at exactly it A's transaction is
    discarded and that put is taken; A's next put is refused once (TransactionDiscarded), and the replay
    after that refusal is taken."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    (a, path), (b, other) = _ids(), _ids()
    t.put(ctx, _cmd(path, a, None), _batch([(None, 1, "a")]))
    _advance(t, SyncSettings().transaction_timeout_s - TICK_S)
    early = t.put(ctx, _cmd(other, b, 1), _batch([(None, 1, "b")]))
    _advance(t, TICK_S)
    steps = [
        ("one tick before the timeout, B's put: refused (interleaved)",
         early.error is not None and "started without finishing" in early.error_text, early),
        ("at the timeout, B's put: accepted, memory=1", None, t.put(ctx, _cmd(other, b, 1), _batch([(None, 1, "b")]))),
        ("A's next put: refused, its transaction was discarded", None, t.put(ctx, _cmd(path, a, 1), _batch([(None, 2, "a")]))),
        ("A's replay after that: accepted, memory=1", None,
         t.put(ctx, _cmd(path, a, 1), _batch([(None, 1, "a"), (None, 2, "a")]))),
    ]
    judged = [steps[0][1], _numbers(steps[1][2]).startswith("accepted=True memory=1 "),
              steps[2][2].error is not None and "discarded" in steps[2][2].error_text,
              _numbers(steps[3][2]).startswith("accepted=True memory=1 ")]
    return Verdict(all(judged), "; ".join(what for what, _, _ in steps),
                   "; ".join(f"{what.split(':')[0]}: {_numbers(out)}" for what, _, out in steps))


CLOSED_ON: Final = ("the table its rows went to", "another table, with nothing pending", "a table that does not exist")


def closing_put_on_each_table(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A transaction's rows go to table T (flushed after every put); its zero-row closing put names each of
    :data:`CLOSED_ON` in turn: a put without rows touches no table, so each transaction is durable at once."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    got, problems = [], []
    for where in CLOSED_ON:
        (origin, path), (filler, _) = _ids(), _ids()
        closing = {CLOSED_ON[0]: path, CLOSED_ON[1]: f"{path}_other", CLOSED_ON[2]: f"{path}_absent"}[where]
        if where == CLOSED_ON[1]:
            t.put(ctx, _cmd(closing, filler, 1), _batch([(None, 1, "x")]))
        t.put(ctx, _cmd(path, origin, None), _batch([(None, 1, "a")]))
        answer = _numbers(t.put(ctx, _cmd(closing, origin, 7), _batch([])))
        got.append(f"{where}: {answer}")
        if not answer.startswith("accepted=True memory=7 durable=7 "):
            problems.append(where)
    return Verdict(not problems, "closed on each: accepted memory=7 durable=7", "; ".join(got))


def descriptor_count_off_by_one(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """One descriptor too few and one too many for a batch of three columns: each is refused with
    Seafowl's text."""
    from conformance.sync.suite import DESCS, VALUE, _cmd, _expect_error, _ids

    verdicts = []
    for descs in (DESCS[:-1], DESCS + (ColumnDescriptor(role=VALUE, name="extra"),)):
        origin, path = _ids()
        verdicts.append(_expect_error(t.put(ctx, _cmd(path, origin, 1, descs), _batch([(None, 1, "a")])),
                                      "Invalid sync schema: Column descriptors do not match the schema"))
    return Verdict(all(v.passed for v in verdicts), "2 and 4 descriptors: " + verdicts[0].expected,
                   "; ".join(v.actual for v in verdicts))


PARTLY_NULL_ROWS: Final = (
    ("old key, first column null", (None, 1, 1, 1, "a")),
    ("old key, second column null", (1, None, 1, 1, "a")),
    ("new key, first column null", (None, None, None, 1, "a")),
    ("new key, second column null", (None, None, 1, None, "a")),
)
"""``old_id, old_k, new_id, new_k, v``: each key side of a two-column key null in one column only."""


def partly_null_key_each_side(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A two-column key null in one column only names no row, on either side and in either column: each
    such put (one row) is INVALID_ARGUMENT."""
    from conformance.sync.suite import DESCS_TWO_KEYS, _cmd, _expect_error, _ids, two_key_batch

    got, problems = [], []
    for what, row in PARTLY_NULL_ROWS:
        origin, path = _ids()
        verdict = _expect_error(t.put(ctx, _cmd(path, origin, 1, DESCS_TWO_KEYS), two_key_batch([row])), "")
        got.append(f"{what}: {verdict.actual}")
        if not verdict.passed:
            problems.append(what)
    return Verdict(not problems, f"{len(PARTLY_NULL_ROWS)} rows (each side, each column): INVALID_ARGUMENT",
                   "; ".join(got))


def duplicate_keys_last_wins(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A key inserted twice in one put (a replayed insert) holds the second insert's values: on an empty
    table and on a stored row, without CHANGED columns (every row replaced whole) and with them."""
    from conformance.sync.suite import DESCS, DESCS_CHANGED, _cmd, _ids, _numbers, rows_batch

    shapes = (
        ("empty table", None, rows_batch([(None, 1, "a"), (None, 1, "b")]), {"id": 1, "v": "b"}, DESCS),
        ("stored row", rows_batch([(None, 1, "s")]), rows_batch([(None, 1, "a"), (None, 1, "b")]), {"id": 1, "v": "b"},
         DESCS),
        ("with CHANGED columns", None, rows_batch([(None, 1, "a", True, "x"), (None, 1, "b", True, "y")], changed=True),
         {"id": 1, "v": "b", "w": "y"}, DESCS_CHANGED),
    )
    got, problems = [], []
    for what, stored, twice, want, descs in shapes:
        origin, path = _ids()
        if stored is not None:
            t.put(ctx, _cmd(path, origin, 1, descs), stored)
        out = t.put(ctx, _cmd(path, origin, 2, descs), twice)
        table = t.table(path) if out.error is None else _numbers(out)
        got.append(f"{what}: {table}")
        if table != [want]:
            problems.append(what)
    return Verdict(not problems, "; ".join(f"{what}: [{want}]" for what, _, _, want, _ in shapes), "; ".join(got))


def size_rule_picks_largest(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Two tables, each one transaction of its own origin, reach the size threshold together: the largest is
    flushed, whether it is the older or the newer, and the other waits (the bytes left are under the
    threshold)."""
    from conformance.sync.suite import HELD_S, _cmd, _ids, _pending_bytes, _policy, _probe

    got, problems = [], []
    for larger_first in (True, False):
        (first, path), (second, _) = _ids(), _ids()
        sizes = (8, 1) if larger_first else (1, 8)
        with _policy(t):
            for origin, rows, table in zip((first, second), sizes, (path, f"{path}_b")):
                t.put(ctx, _cmd(table, origin, 1), _batch([(None, key, "v" * 8) for key in range(rows)]))
            t.command(f"POLICY {HELD_S} 1000000 {_pending_bytes(t)}")
            _advance(t, 0.0)
            numbers = [_probe(t, ctx, first), _probe(t, ctx, second)]
        larger, smaller = numbers if larger_first else numbers[::-1]
        shape = "the older larger" if larger_first else "the newer larger"
        got.append(f"{shape}: larger {larger.split(' first=')[0]}, smaller {smaller.split(' first=')[0]}")
        if " durable=1 " not in larger or " durable=None " not in smaller:
            problems.append(shape)
    return Verdict(not problems, "the larger table durable=1, the smaller durable=None (each shape)", "; ".join(got))


def restart_durable_from_newest_table(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Transaction 1 lands in table P/inner, transaction 2 in table P (so a store walking its directories
    reads the older record last): after a restart the origin's durable number is 2, the largest its tables
    record, whatever order they are read in."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    origin, path = _ids()
    t.put(ctx, _cmd(f"{path}/inner", origin, 1), _batch([(None, 1, "a")]))
    t.put(ctx, _cmd(path, origin, 2), _batch([(None, 1, "b")]))
    t.restart()
    answer = _numbers(t.put(ctx, _cmd(path, origin, None, ())))
    return Verdict(" durable=2 " in answer, "after a restart: durable=2", answer)
