"""Sync cases derived from the writer's and the flush schedule's bounds and branches (``spec.sync.writer``,
``spec.sync.flush_failures``, ``spec.sync.admission.fits_watermark``), each row of docs/conformance.md's
"The sync checklist" that the cases of :mod:`conformance.sync.derived` did not already hold:

- the high-watermark: a put bringing pending data exactly to it is taken, one byte past it is answered
  ``accepted=false`` and keeps nothing, and the same put is taken once there is room;
- the transaction timeout counts from the transaction's *last* put, and what a discarded transaction put
  never lands;
- a replay closing an open transaction closes it and drops what it put;
- a failed table's backoff starts again after a success, and a failed table is not flushed by the policy
  before its wait ends, also after its data was discarded meanwhile.

All run on the target's clock (``flush-control``), so each takes a few puts and no waiting.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from conformance.framework import CaseContext, Verdict
from conformance.sync.derived import LAG_S, TICK_S, _advance, _batch, new_data_lag, retry_waits
from spec.sync.writer import RowGroupLimits, SyncSettings

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget


def _held(t: SyncTarget, watermark: int | None = None, lag: float | None = None) -> None:
    """Hold every flush back (no threshold reached), with this high-watermark (None: the target's own)."""
    from conformance.sync.suite import HELD_S

    t.command(f"POLICY {lag if lag is not None else HELD_S:g} 1000000 {2**62}" + (f" {watermark}" if watermark else ""))


def watermark_at_its_bound(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Flushes held back, puts of one shape (so of one size s, measured as the growth of ``PENDING``): with
    the high-watermark at exactly pending + s the put is taken; at pending + s - 1 it is answered
    ``accepted=false``, its numbers and the pending bytes do not move; at pending + s again it is taken."""
    from conformance.sync.suite import _cmd, _ids, _numbers, _pending_bytes, _policy

    origin, path = _ids()
    batch = _batch([(None, 1, "a"), (None, 2, "b")])
    got, problems = [], []
    with _policy(t):
        t.put(ctx, _cmd(path, origin, 1), batch)
        first = _pending_bytes(t)
        t.put(ctx, _cmd(f"{path}_2", origin, 2), batch)
        size = _pending_bytes(t) - first
        steps = ((3, 0, True, "at exactly the watermark"), (4, -1, False, "one byte past it"),
                 (4, 0, True, "the same put once it fits"))
        for seq, off, taken, what in steps:
            before = _pending_bytes(t)
            _held(t, watermark=before + size + off)
            answer = _numbers(t.put(ctx, _cmd(f"{path}_{seq}", origin, seq), batch))
            after = _pending_bytes(t)
            got.append(f"{what}: {answer.split(' first=')[0]}, pending +{after - before}")
            want = f"accepted=True memory={seq} " if taken else f"accepted=False memory={seq - 1} "
            if not answer.startswith(want) and not (not taken and answer.startswith("accepted=False memory=None ")):
                problems.append(what)
            if after - before != (size if taken else 0):
                problems.append(f"{what}: pending moved by {after - before}")
    return Verdict(not problems and size > 0, f"puts of {size} bytes: taken at exactly the watermark; one byte past "
                   "it accepted=false, nothing kept; taken once it fits", "; ".join(got))


def timeout_from_last_put(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A's transaction puts at 0 and again at 200 s, then falls silent: another origin is refused one tick
    before 200 s + ``transaction_timeout_s`` and taken at exactly it; A's two puts never land."""
    from conformance.sync.suite import _cmd, _ids, _numbers, _pending_bytes, _policy

    (a, path), (b, other) = _ids(), _ids()
    timeout = SyncSettings().transaction_timeout_s
    with _policy(t):
        t.put(ctx, _cmd(path, a, None), _batch([(None, 1, "a")]))
        _advance(t, 200.0)
        t.put(ctx, _cmd(path, a, None), _batch([(None, 2, "a")]))
        _advance(t, timeout - TICK_S)
        early = t.put(ctx, _cmd(other, b, 1), _batch([(None, 1, "b")]))
        held_early = _pending_bytes(t)
        _advance(t, TICK_S)
        held_at = _pending_bytes(t)  # discarded at its instant by the server's own timer, before any put
        at = t.put(ctx, _cmd(other, b, 1), _batch([(None, 1, "b")]))
    landed = os.path.isdir(os.path.join(t.store, path, "_delta_log")) and t.table(path)
    ok = early.error is not None and "started without finishing" in early.error_text \
        and _numbers(at).startswith("accepted=True memory=1 ") and not landed and held_early > 0 and held_at == 0
    return Verdict(ok, "a tick before the timeout from A's last put: B refused (interleaved), A's rows pending; at "
                   "it, before any put: nothing pending, then B taken (memory=1); A's rows never land",
                   f"before: {_numbers(early)}, pending {held_early}; at: pending {held_at}, {_numbers(at)}; "
                   f"A's table: {landed or 'none'}")


def replay_closes_open_transaction(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Transaction 1 of A is durable (key 1). A opens another (key 5, held back) and closes it at 1, a replay:
    it is acknowledged (memory=1 durable=1), the transaction is closed (B's put is taken, not refused as
    interleaved) and neither its rows nor the closing put's land."""
    from conformance.sync.suite import _cmd, _ids, _numbers, _policy

    (a, path), (b, other) = _ids(), _ids()
    t.put(ctx, _cmd(path, a, 1), _batch([(None, 1, "a")]))
    with _policy(t):
        t.put(ctx, _cmd(path, a, None), _batch([(None, 5, "open")]))
        replay = _numbers(t.put(ctx, _cmd(path, a, 1), _batch([(None, 6, "closing")])))
        other_origin = _numbers(t.put(ctx, _cmd(other, b, 1), _batch([(None, 1, "b")])))
    rows = t.table(path)
    ok = replay.startswith("accepted=True memory=1 durable=1 ") and other_origin.startswith("accepted=True memory=1 ") \
        and rows == [{"id": 1, "v": "a"}]
    return Verdict(ok, "replay: accepted memory=1 durable=1; B's put taken; A's table [{'id': 1, 'v': 'a'}]",
                   f"replay: {replay}; B: {other_origin}; A's table {rows}")


@contextmanager
def _blocked(t: SyncTarget, path: str) -> Iterator[None]:
    """No Delta writer can commit the next version of the table at ``path`` while this lasts (a directory takes
    the name of that commit file: commit files are put-if-absent)."""
    log = os.path.join(t.store, path, "_delta_log")
    versions = [int(n[:-5]) for n in os.listdir(log) if n.endswith(".json") and n[:-5].isdigit()] \
        if os.path.isdir(log) else []
    blocker = os.path.join(log, f"{max(versions, default=-1) + 1:020}.json")
    os.makedirs(blocker)
    try:
        yield
    finally:
        os.rmdir(blocker)


def _tick_before_and_at(t: SyncTarget, ctx: CaseContext, origin: str) -> tuple[str, str]:
    """``origin``'s numbers a tick before the clock's next instant and at it."""
    from conformance.sync.suite import _probe

    early = _probe(t, ctx, origin)
    _advance(t, TICK_S)
    return early, _probe(t, ctx, origin)


def _durable_at_the_retry(early: str, at: str, before: str) -> Verdict:
    """Nothing durable a tick before the retry's instant, the one put durable at it."""
    ok = " durable=None " in early and " durable=1 " in at
    return Verdict(ok, f"{before}: durable=None; at it: durable=1", f"{early}; {at}")


def backoff_restarts_after_success(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Table T fails once and lands at its first retry; later its next commit fails once: that retry comes after
    the first wait again (1 s), not the second (a success ends the run of failures). Each failure comes from
    the size rule, released by a smaller table's flush, so only the retry asks for T again."""
    from conformance.sync.suite import HELD_S, _cmd, _ids, _pending_bytes, _policy, _probe

    origin, path = _ids()
    first_wait = retry_waits(1)[0]
    got = []
    with _policy(t):
        for version, (big, small) in enumerate(((1, 2), (3, 4))):
            t.put(ctx, _cmd(path, origin, big), _batch([(None, key, f"v{version}") for key in (1, 2, 3)]))
            t.put(ctx, _cmd(f"{path}_b{version}", origin, small), _batch([(None, 1, "b")]))
            with _blocked(t, path):
                t.command(f"POLICY {HELD_S} 1000000 {_pending_bytes(t)}")
                _advance(t, 0.0)
                _advance(t, first_wait - TICK_S)
                got.append(_probe(t, ctx, origin))
            _advance(t, TICK_S)
            got.append(_probe(t, ctx, origin))
            _held(t)
    want = ["durable=None", "durable=2", "durable=2", "durable=4"]
    ok = all(f" {w} " in g for w, g in zip(want, got))
    return Verdict(ok, "first failure: a tick before 1 s " + ", at it ".join(want[:2]) + "; the failure after the "
                   "success: a tick before 1 s " + ", at it ".join(want[2:]), "; ".join(got))


def two_failing_tables(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Tables A and C (origins of their own) fail at their lag, C half a second after A; A's cause gone, A is
    retried at exactly its own instant (the earlier of the two retries), not at C's."""
    from conformance.sync.suite import _cmd, _ids, _policy

    (a, path), (c, other) = _ids(), _ids()
    wait = retry_waits(1)[0]
    with _policy(t, lag=LAG_S):
        t.put(ctx, _cmd(path, a, 1), _batch([(None, 1, "a")]))
        _advance(t, 0.5)
        t.put(ctx, _cmd(other, c, 1), _batch([(None, 1, "c")]))
        with _blocked(t, other):
            with _blocked(t, path):
                _advance(t, LAG_S - 0.5)
                _advance(t, 0.5)
            _advance(t, wait - 0.5 - TICK_S)
            early, at = _tick_before_and_at(t, ctx, a)
    return _durable_at_the_retry(early, at, "A a tick before its retry")


def newer_failing_table_retried(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Tables A (older) and C (newer, origins of their own) each fail by the size rule, C half a second after A,
    each released by a smaller table's flush (so no rule but the retry asks for either again); with C's cause
    gone and A's not, C is retried at exactly its own instant, although the older A is still failing."""
    from conformance.sync.suite import HELD_S, _cmd, _ids, _pending_bytes, _policy

    (a, path), (c, other) = _ids(), _ids()
    wait = retry_waits(1)[0]
    with _policy(t), _blocked(t, path):
        for origin, table in ((a, path), (c, other)):
            _advance(t, 0.0 if table == path else 0.5)
            t.put(ctx, _cmd(table, origin, 1), _batch([(None, key, "a") for key in (1, 2, 3)]))
            t.put(ctx, _cmd(f"{table}_small", f"{origin}-small", 1), _batch([(None, 1, "b")]))
            with _blocked(t, other):
                t.command(f"POLICY {HELD_S} 1000000 {_pending_bytes(t)}")
            t.command(f"POLICY {HELD_S} 1000000 {2**62}")
        _advance(t, wait - TICK_S)
        early, at = _tick_before_and_at(t, ctx, c)
    return _durable_at_the_retry(early, at, "C a tick before its retry")


def failing_table_waits(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A flush at the lag fails; its cause gone at once, the table is still not written before its wait ends
    (the lag rule, which still holds, skips a table waiting to retry), and is written at its end."""
    from conformance.sync.suite import _cmd, _ids, _policy

    origin, path = _ids()
    wait = retry_waits(1)[0]
    with _policy(t, lag=LAG_S):
        t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")]))
        with _blocked(t, path):
            _advance(t, LAG_S)
        _advance(t, wait - TICK_S)
        early, at = _tick_before_and_at(t, ctx, origin)
    return _durable_at_the_retry(early, at, "a tick before the retry")


def discarded_failing_table(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A's open transaction is all table T holds; T's flush at the lag fails, then the transaction is discarded
    at its timeout, so T has nothing to retry. B's later put to T waits its full lag like any new data (the old
    failure does not flush it at once): durable=None a tick before the lag, durable=1 at it."""
    from conformance.sync.suite import _cmd, _ids, _policy

    (a, path), (b, _) = _ids(), _ids()
    timeout = SyncSettings().transaction_timeout_s
    with _policy(t, lag=LAG_S):
        t.put(ctx, _cmd(path, a, None), _batch([(None, 1, "a")]))
        with _blocked(t, path):
            _advance(t, LAG_S)
            _advance(t, timeout - LAG_S)
        got = new_data_lag(t, ctx, path, b, 1)
    want = ["durable=None", "durable=None", "durable=1"]
    ok = all(f" {w} " in g for w, g in zip(want, got))
    return Verdict(ok, f"B's put: {want[0]}; a tick before its lag: {want[1]}; at it: {want[2]}", "; ".join(got))


def row_group_bounds(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A flush writes row groups of at most ``RowGroupLimits.max_rows`` rows: a table of one row more lands
    whole, and an update keeping a stored value (CHANGED false) reads it back from the row group holding it,
    on each side of the boundary; a row over the byte bound is a row group of its own (never an empty one)."""
    from conformance.sync.suite import DESCS_CHANGED, _cmd, _ids, _numbers, rows_batch

    limits = RowGroupLimits()
    problems, got = [], []
    for count in (limits.max_rows + 1,):
        origin, path = _ids()
        stored = [(None, key, f"v{key}", True, f"w{key}") for key in range(count)]
        first = t.put(ctx, _cmd(path, origin, 1, DESCS_CHANGED), rows_batch(stored, changed=True))
        edges = [0, limits.max_rows - 1, limits.max_rows]
        second = t.put(ctx, _cmd(path, origin, 2, DESCS_CHANGED),
                       rows_batch([(key, key, None, False, f"u{key}") for key in edges], changed=True))
        have = {r["id"]: (r["v"], r["w"]) for r in t.table(path)} if first.error is None and second.error is None else {}
        want = {key: (f"v{key}", f"u{key}" if key in edges else f"w{key}") for key in range(count)}
        got.append(f"{count} rows: {len(have)} landed")
        if have != want:
            wrong = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
            problems.append(f"{count} rows: {len(have)} landed, keys differing {wrong[:4]}; {_numbers(first)}; "
                            f"{_numbers(second)}")
    origin, path = _ids()
    wide = t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "v" * (limits.max_bytes + 1)), (None, 2, "v")]))
    lengths = [len(r["v"]) for r in t.table(path)] if wide.error is None else []
    got.append(f"a row over the byte bound: {lengths}")
    if lengths != [limits.max_bytes + 1, 1]:
        problems.append(f"a row of {limits.max_bytes + 1} B and one of 1 B: values of {lengths} B; {_numbers(wide)}")
    return Verdict(not problems, f"every row lands and every kept value is read back (row groups of "
                   f"{limits.max_rows} rows); a row over {limits.max_bytes} B is a row group of its own",
                   "; ".join(problems) or "; ".join(got))


def truncate_at_its_place(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """The truncate extension (capability ``truncate``): a truncating put empties its table at its place in the
    stream and applies its own rows; one without rows (never a probe) closes its transaction and empties the
    table; held back with puts before and after it, only the rows from it on land."""
    from dataclasses import replace

    from conformance.sync.suite import _cmd, _ids, _numbers, _policy

    origin, path = _ids()
    got, problems = [], []

    def put(seq: int, rows: list[int], truncate: bool = False) -> None:
        out = t.put(ctx, replace(_cmd(path, origin, seq), truncate=truncate), _batch([(None, k, f"v{k}") for k in rows]))
        if not _numbers(out).startswith(f"accepted=True memory={seq} "):
            problems.append(f"put {seq}: {_numbers(out)}")

    def expect(what: str, ids: list[int]) -> None:
        have = sorted(r["id"] for r in t.table(path))
        got.append(f"{what}: {have}")
        if have != ids:
            problems.append(f"{what}: ids {have}, want {ids}")

    put(1, [1, 2])
    put(2, [3], truncate=True)
    expect("truncating put with a row", [3])
    put(3, [], truncate=True)
    expect("truncating put without rows", [])
    with _policy(t):
        put(4, [4])
        put(5, [5], truncate=True)
        put(6, [6])
    expect("flushed with a put before and one after it", [5, 6])
    with _policy(t):
        put(7, [7], truncate=True)
        put(8, [8])
        put(9, [9], truncate=True)
        put(10, [10])
    expect("two truncations in one flush: the last one counts", [9, 10])
    return Verdict(not problems, "ids [3]; then []; then [5, 6]; then [9, 10]", "; ".join(problems) or "; ".join(got))
