"""Sync cases along the derivation's axes the third round left out (issue 43's fourth round, docs/conformance.md,
"The sync checklist", rows 78 on):

- a flush rule with several tables, the rule's table not the oldest (the count rule);
- the lag window after every way a queue empties without a flush: a replay closing the open transaction, the
  transaction discarded at its timeout;
- a server limit at its bound on both sides: put slots (capability ``put-slots``); a put's bytes summed over its
  messages (capability ``put-bound``);
- equivalent inputs give the same rows: key or value columns in another order, interleaved columns, a put's
  rows split over record batches, the same change as one put, several puts of one transaction or several
  transactions, another table name of the grammar;
- each validation rule of a row at each position: first, middle and last row of a batch, the second record
  batch of a put, the second put of a transaction (refused whole, nothing of it lands);
- every flush setting at the smallest value it allows (count 1, lag 0 and one tick, size 1 byte);
- sequence numbers at the edges of their domain (0, 2^64-1) in answers and in the replay rule;
- client connections at their bound (capability ``connections``): who a newcomer at the cap evicts.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.flight as flight

from conformance.framework import CaseContext, Verdict
from conformance.sync.derived import LAG_S, TICK_S, _advance, _batch
from spec.sync.messages import ColumnDescriptor, SyncCommand
from spec.sync.writer import SyncSettings

if TYPE_CHECKING:
    from conformance.sync.suite import PutOutcome, SyncTarget


# -- the count rule on each table ----------------------------------------------------------------------

def count_on_each_table(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """max_syncs_per_url 2: table A (older) holds one item, then table B (newer, another origin) reaches two: B
    is flushed, A is not; then A's second item flushes A. Items alternate column orders, so each put is one."""
    from conformance.sync.suite import _ids, _item_put, _policy, _probe

    (a, path), (b, _) = _ids(), _ids()
    other = f"{path}_b"
    got = []
    with _policy(t, count=2):
        _item_put(t, ctx, path, a, 1, 2)
        _item_put(t, ctx, other, b, 1, 1)
        got.append(f"B at 1 item: {_probe(t, ctx, b)}")
        _item_put(t, ctx, other, b, 2, 2)
        got += [f"B at 2 items: {_probe(t, ctx, b)}", f"A at 1 item: {_probe(t, ctx, a)}"]
        _item_put(t, ctx, path, a, 2, 3)
        got.append(f"A at 2 items: {_probe(t, ctx, a)}")
    want = ["durable=None", "durable=2", "durable=None", "durable=2"]
    ok = all(f" {w} " in g for w, g in zip(want, got))
    return Verdict(ok, "B (newer) at 1 item: durable=None, at 2: durable=2 while A (older, 1 item) stays durable=None; "
                   "A at 2 items: durable=2", "; ".join(got))


# -- the lag window after a queue emptied without a flush ----------------------------------------------

QUEUE_EMPTIED: Final = ("a replay closing the open transaction", "the open transaction discarded at its timeout")


def lag_after_queue_emptied(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Tables X and Y hold nothing but an open transaction of A, which goes away without a flush (each way of
    :data:`QUEUE_EMPTIED`): nothing is pending any more, and Y never gets A's rows; later B puts to X: its
    data waits its own full lag, from its put, not from A's."""
    from conformance.sync.derived import new_data_lag
    from conformance.sync.suite import _cmd, _ids, _pending_bytes, _policy

    problems, got = [], []
    timeout = SyncSettings().transaction_timeout_s
    for way in QUEUE_EMPTIED:
        (a, path), (b, _) = _ids(), _ids()
        if way == QUEUE_EMPTIED[0]:
            t.put(ctx, _cmd(f"{path}_done", a, 1), _batch([(None, 1, "a")]))  # durable 1: a later close at 1 replays
        with _policy(t, lag=LAG_S):
            t.put(ctx, _cmd(path, a, None), _batch([(None, 1, "open")]))
            t.put(ctx, _cmd(f"{path}_y", a, None), _batch([(None, 1, "open")]))
            _advance(t, LAG_S / 2)
            if way == QUEUE_EMPTIED[0]:
                t.put(ctx, _cmd(path, a, 1), _batch([]))
            else:
                _advance(t, timeout - LAG_S / 2)
            pending = _pending_bytes(t)
            _advance(t, LAG_S / 4)
            steps = new_data_lag(t, ctx, path, b, 1)
        landed = os.path.isdir(os.path.join(t.store, f"{path}_y", "_delta_log")) and t.table(f"{path}_y")
        want = ["durable=None", "durable=None", "durable=1"]
        got.append(f"after {way}: pending {pending}; " + ", ".join(s.split(" first=")[0] for s in steps)
                   + f"; Y {landed or 'none'}")
        if not all(f" {w} " in s for w, s in zip(want, steps)) or pending or landed:
            problems.append(way)
    return Verdict(not problems, "after each way: nothing pending; B's put durable=None, a tick before its own lag "
                   "durable=None, at it durable=1; Y never gets A's rows", "; ".join(got))


# -- a put's bytes summed over its messages, at the bound ----------------------------------------------

PUT_BOUND_MAX: Final = 64 * 1024 * 1024
"""The largest ``PUTBOUND`` a case passes (the contract's cap: the case sends about twice it)."""


def _messages(total: int, parts: int) -> pa.Table:
    """One put's rows as ``parts`` record batches of one upsert each, ``total`` bytes of values in all."""
    batches = [pa.record_batch({"old_id": pa.array([None], pa.int64()), "new_id": pa.array([i + 1], pa.int64()),
                                "v": pa.array(["x" * (total // parts)])}) for i in range(parts)]
    return pa.Table.from_batches(batches)


def put_bound_over_messages(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """A put's bytes are summed over its messages: a put of two (and of three) messages, each well under the
    high-watermark, together a fifth over it, is refused for good (RESOURCE_EXHAUSTED, nothing kept), not answered
    accepted=false; the nearest valid one, the same messages together a fifth under it, is taken."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    words = t.control("PUTBOUND").split()
    if words[:1] != ["PUTBOUND"] or len(words) != 2 or not words[1].isdigit() or int(words[1]) > PUT_BOUND_MAX:
        raise RuntimeError(f"'PUTBOUND' answered {' '.join(words)!r}, not PUTBOUND <bytes> (at most {PUT_BOUND_MAX})")
    bound = int(words[1])
    got, problems = [], []
    for parts in (2, 3):
        origin, path = _ids()
        over = t.put(ctx, _cmd(path, origin, 1), _messages(bound * 6 // 5, parts))
        under = t.put(ctx, _cmd(path, origin, 1), _messages(bound * 4 // 5, parts))
        got.append(f"{parts} messages a fifth over: {_numbers(over)[:160]}; a fifth under: {_numbers(under)}")
        if not (over.error is not None and "PUT_TOO_LARGE" in over.error_text):
            problems.append(f"{parts} over")
        if not _numbers(under).startswith("accepted=True memory=1 "):
            problems.append(f"{parts} under")
    return Verdict(not problems, "two and three messages together a fifth over the bound: PUT_TOO_LARGE "
                   "(RESOURCE_EXHAUSTED); a fifth under it: accepted memory=1", "; ".join(got))


# -- put slots at their bound --------------------------------------------------------------------------

SLOT_WAIT_S: Final = 10.0
"""How long a held stream may take to be counted as holding a slot (real time; a bounded wait, not a verdict)."""


def _slots(t: SyncTarget) -> tuple[int, int]:
    """The target's (max concurrent puts, puts holding a slot now) (``SLOTS``)."""
    words = t.control("SLOTS").split()
    if words[:1] != ["SLOTS"] or len(words) != 3 or not all(w.isdigit() for w in words[1:]):
        raise RuntimeError(f"'SLOTS' answered {' '.join(words)!r}, not SLOTS <capacity> <in use>")
    return int(words[1]), int(words[2])


class _Held:
    """A probe's stream opened and never ended: its first message holds a slot until :meth:`end`."""

    def __init__(self, t: SyncTarget, cmd: SyncCommand) -> None:
        self.client = t.security.connect(t.location)
        options = flight.FlightCallOptions(timeout=60.0, headers=t.security.call_headers())
        self.writer, self.reader = self.client.do_put(flight.FlightDescriptor.for_command(cmd.to_descriptor_cmd()),
                                                      pa.schema([]), options=options)

    def end(self) -> str:
        """End the stream; what it was answered."""
        from conformance.sync.suite import PutOutcome, _numbers
        from spec.sync.messages import decode_response

        try:
            self.writer.done_writing()
            buf = self.reader.read()
            self.writer.close()
            return _numbers(PutOutcome(decode_response(buf.to_pybytes()) if buf is not None else None, None))
        except (flight.FlightError, pa.ArrowException) as exc:
            return f"error {exc}"
        finally:
            self.client.close()


def _until(count: int, read: Callable[[], int]) -> bool:
    """Wait (bounded) until ``read()`` says ``count`` (puts holding a slot, connections held)."""
    deadline = time.monotonic() + SLOT_WAIT_S
    while read() != count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _until_in_use(t: SyncTarget, count: int) -> bool:
    return _until(count, lambda: _slots(t)[1])


def put_slots_at_their_bound(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """With max_concurrent_puts - 1 streams holding a slot a probe is answered (it takes the last one); with
    every slot held a probe is refused busy (an error or ``accepted=false``); once one held stream ends, a
    probe is answered again, and the held streams are answered when they end."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    capacity = _slots(t)[0]
    origin, path = _ids()
    probe = _cmd(path, origin, None, ())
    held: list[_Held] = []
    got, problems = [f"{capacity} slots"], []
    try:
        # A put of an earlier case whose client went away gives its slot back once its thread ends, maybe later.
        if not _until_in_use(t, 0) or capacity < 1:
            return Verdict(False, "no put holding a slot before the case", f"{_slots(t)[1]} of {capacity}")
        for step, (holding, answered) in enumerate(((capacity - 1, True), (capacity, False), (capacity - 1, True))):
            while len(held) < holding:
                held.append(_Held(t, probe))
            while len(held) > holding:
                ended = held.pop().end()
                if not ended.startswith("accepted=True"):
                    problems.append(f"a held stream ended with {ended}")
            if not _until_in_use(t, holding):
                return Verdict(False, f"{holding} held streams hold a slot", f"SLOTS says {_slots(t)}")
            answer = _numbers(t.put(ctx, probe))
            got.append(f"{holding} held: {answer.split(' first=')[0]}")
            if answer.startswith("accepted=True") != answered:
                problems.append(f"with {holding} of {capacity} slots held the probe got {answer}")
    finally:
        for stream in held:
            stream.end()
    return Verdict(not problems, f"{capacity - 1} held: answered; {capacity} held: busy; {capacity - 1} again: "
                   "answered", "; ".join(problems) or "; ".join(got))


# -- equivalent inputs give the same rows ---------------------------------------------------------------

_STORED: Final = ((1, 1, "a", "x"), (1, 2, "b", "y"), (2, 1, "c", "z"))
"""(id, k, v, w) stored before the change."""
_CHANGE: Final = ((1, 1, 1, 1, "A", "X"), (1, 2, 3, 3, "B", "Y"), (2, 1, None, None, None, None),
                  (None, None, 4, 4, "D", "W"))
"""(old id, old k, new id, new k, v, w): an update, a key change, a delete and an insert."""
_RESULT: Final = {(1, 1): ("A", "X"), (3, 3): ("B", "Y"), (4, 4): ("D", "W")}

_COLUMNS: Final = {"old_id": ("old", "id"), "old_k": ("old", "k"), "new_id": ("new", "id"), "new_k": ("new", "k"),
                   "v": ("value", "v"), "w": ("value", "w")}
CANONICAL: Final = ("old_id", "old_k", "new_id", "new_k", "v", "w")


def _two_key_put(order: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> tuple[tuple[ColumnDescriptor, ...], pa.Table]:
    """Descriptors and a batch of ``rows`` (in :data:`CANONICAL` order) with the columns in ``order``."""
    from conformance.sync.suite import NEW, OLD, VALUE

    roles = {"old": OLD, "new": NEW, "value": VALUE}
    types = {"old_id": pa.int64(), "old_k": pa.int64(), "new_id": pa.int64(), "new_k": pa.int64(), "v": pa.string(),
             "w": pa.string()}
    columns = {name: pa.array([r[CANONICAL.index(name)] for r in rows], types[name]) for name in order}
    descs = tuple(ColumnDescriptor(role=roles[_COLUMNS[n][0]], name=_COLUMNS[n][1]) for n in order)
    return descs, pa.table(columns)


def _stored_rows() -> list[tuple[Any, ...]]:
    return [(None, None, i, k, v, w) for i, k, v, w in _STORED]


Form = Callable[["SyncTarget", CaseContext, str, str], list["PutOutcome"]]


def _one_put(order: Sequence[str], stored_order: Sequence[str] = CANONICAL) -> Form:
    def put(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> list[PutOutcome]:
        from conformance.sync.suite import _cmd

        outs = [t.put(ctx, _cmd(path, origin, 1, descs), batch)
                for descs, batch in [_two_key_put(stored_order, _stored_rows())]]
        descs, batch = _two_key_put(order, _CHANGE)
        return outs + [t.put(ctx, _cmd(path, origin, 2, descs), batch)]

    return put


def _split_batches(empty: bool) -> Form:
    """The change as one put of two record batches (two rows each), with an empty one between them if ``empty``."""
    def put(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> list[PutOutcome]:
        from conformance.sync.suite import _cmd, do_put

        first = _one_put(CANONICAL)(t, ctx, path, origin)[:1]
        descs, batch = _two_key_put(CANONICAL, _CHANGE)
        whole = batch.combine_chunks().to_batches()[0]
        parts = [whole.slice(0, 2), *([whole.slice(0, 0)] if empty else []), whole.slice(2)]
        return first + [do_put(t.location, _cmd(path, origin, 2, descs).to_descriptor_cmd(), parts,
                               timeout=ctx.remaining(), security=t.security)]

    return put


def _row_by_row(closing_each: bool) -> Form:
    """The change one row a put: in puts of one transaction (the last closes it), or one transaction each."""
    def put(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> list[PutOutcome]:
        from conformance.sync.suite import _cmd

        outs = _one_put(CANONICAL)(t, ctx, path, origin)[:1]
        for i, row in enumerate(_CHANGE):
            descs, batch = _two_key_put(CANONICAL, [row])
            seq = 2 + i if closing_each else (2 if i == len(_CHANGE) - 1 else None)
            outs.append(t.put(ctx, _cmd(path, origin, seq, descs), batch))
        return outs

    return put


def _renamed(suffix: str, form: Form) -> Form:
    def put(t: SyncTarget, ctx: CaseContext, path: str, origin: str) -> list[PutOutcome]:
        return form(t, ctx, path + suffix, origin)

    return put


EQUIVALENT_FORMS: Final[tuple[tuple[str, str, Form], ...]] = (
    ("the change in one put", "", _one_put(CANONICAL)),
    ("key columns in another order than the table's", "", _one_put(("old_k", "old_id", "new_k", "new_id", "v", "w"))),
    ("the table created with its key columns in another order", "",
     _one_put(CANONICAL, ("old_k", "old_id", "new_k", "new_id", "v", "w"))),
    ("value columns in another order", "", _one_put(("old_id", "old_k", "new_id", "new_k", "w", "v"))),
    ("every column in another place", "", _one_put(("w", "new_k", "old_id", "v", "new_id", "old_k"))),
    ("the put's rows in two record batches", "", _split_batches(False)),
    ("the put's rows in two record batches around an empty one", "", _split_batches(True)),
    ("a put per row, one transaction", "", _row_by_row(False)),
    ("a transaction per row", "", _row_by_row(True)),
    ("a table named with digits, '-', '_' and nested segments", "/a-b_c/9-x", _one_put(CANONICAL)),
)


def equivalent_inputs_same_rows(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Rows stored in a table keyed on (id, k), then an update, a key change, a delete and an insert, in each
    form of :data:`EQUIVALENT_FORMS` on a table of its own: every form is accepted and leaves the same rows."""
    from conformance.sync.suite import _ids, _numbers

    problems, got = [], []
    for what, suffix, form in EQUIVALENT_FORMS:
        origin, path = _ids()
        outs = form(t, ctx, path + suffix, origin)
        refused = [_numbers(o) for o in outs if o.error is not None or o.response is None or not o.response.accepted]
        rows = {} if refused else {(r["id"], r["k"]): (r["v"], r["w"]) for r in t.table(path + suffix)}
        got.append(f"{what}: {refused[0] if refused else rows}")
        if refused or rows != _RESULT:
            problems.append(got[-1])
    return Verdict(not problems, f"{len(EQUIVALENT_FORMS)} forms, each accepted, each leaving {_RESULT}",
                   "; ".join(problems) or f"all {len(EQUIVALENT_FORMS)} as expected")


# -- a row's validation rule at each position -----------------------------------------------------------

def _rule_rows() -> tuple[tuple[str, tuple[ColumnDescriptor, ...], Callable[[Sequence[int]], pa.Table],
                                Callable[[int], pa.Table]], ...]:
    """Each rule: its descriptors, a batch of valid rows for keys, and one violating row at a key."""
    from conformance.sync.suite import DESCS, DESCS_TWO_KEYS, VALUE, two_key_batch

    uint_descs = DESCS + (ColumnDescriptor(role=VALUE, name="u"),)

    def floats(rows: Sequence[tuple[float | None, float | None, str]]) -> pa.Table:
        return pa.table({"old_id": pa.array([r[0] for r in rows], pa.float64()),
                         "new_id": pa.array([r[1] for r in rows], pa.float64()), "v": pa.array([r[2] for r in rows])})

    def uints(rows: Sequence[tuple[int, int]]) -> pa.Table:
        return _batch([(None, k, "a") for k, _ in rows]).append_column("u", pa.array([u for _, u in rows], pa.uint8()))

    return (
        ("a two-column key null in one column", DESCS_TWO_KEYS,
         lambda keys: two_key_batch([(None, None, k, k, "a") for k in keys]),
         lambda key: two_key_batch([(None, None, key, None, "a")])),
        ("a NaN key", DESCS, lambda keys: floats([(None, float(k), "a") for k in keys]),
         lambda key: floats([(None, float("nan"), "a")])),
        ("an unsigned value past its signed type", uint_descs, lambda keys: uints([(k, 1) for k in keys]),
         lambda key: uints([(key, 200)])),
    )


POSITIONS: Final = ("first row", "middle row", "last row", "second record batch", "second put of the transaction")


def rule_at_each_position(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Each row rule's violating row, at each of :data:`POSITIONS` among valid rows: the put is INVALID_ARGUMENT
    and nothing of it lands (in a transaction, its first put's rows land once the transaction is closed)."""
    from conformance.sync.suite import _cmd, _ids, _numbers, do_put

    problems, got = [], []
    for rule, descs, valid, bad in _rule_rows():
        for where in POSITIONS:
            origin, path = _ids()
            if where == POSITIONS[4]:
                first = t.put(ctx, _cmd(path, origin, None, descs), valid([1, 2]))
                out = t.put(ctx, _cmd(path, origin, None, descs), pa.concat_tables([valid([3]), bad(4)]).combine_chunks())
                closed = t.put(ctx, _cmd(path, origin, 1, descs), valid([]).slice(0, 0))
                ids = sorted(int(r["id"]) for r in t.table(path)) if closed.error is None else []
                landed_ok = first.error is None and ids == [1, 2]
            else:
                rows = {POSITIONS[0]: [bad(1), valid([2, 3])], POSITIONS[1]: [valid([1]), bad(2), valid([3])],
                        POSITIONS[2]: [valid([1, 2]), bad(3)], POSITIONS[3]: [valid([1, 2]), bad(3)]}[where]
                if where == POSITIONS[3]:
                    out = do_put(t.location, _cmd(path, origin, 1, descs).to_descriptor_cmd(), rows,
                                 timeout=ctx.remaining(), security=t.security)
                else:
                    out = t.put(ctx, _cmd(path, origin, 1, descs), pa.concat_tables(rows).combine_chunks())
                ids = []
                landed_ok = not os.path.isdir(os.path.join(t.store, path, "_delta_log")) or not t.table(path)
            refused = isinstance(out.error, pa.ArrowInvalid)
            if not (refused and landed_ok):
                problems.append(f"{rule}, {where}: {_numbers(out)}; landed ok {landed_ok} {ids}")
        got.append(f"{rule}: refused at each position")
    return Verdict(not problems, f"each rule at each of {len(POSITIONS)} positions: INVALID_ARGUMENT, nothing of the "
                   "put lands", "; ".join(problems) or "; ".join(got))


# -- flush settings at their smallest values ------------------------------------------------------------

def policy_at_smallest_values(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """max_syncs_per_url 1, max_replication_lag_s 0 and max_in_memory_bytes 1 each flush a put at once (durable
    in its own answer); a lag of one tick waits that tick and not less."""
    from conformance.sync.suite import HELD_S, _cmd, _ids, _numbers, _probe

    got, problems = [], []
    for what, policy in (("count 1", f"POLICY {HELD_S} 1 {2**62}"), ("lag 0", f"POLICY 0 1000000 {2**62}"),
                         ("size 1 byte", f"POLICY {HELD_S} 1000000 1")):
        origin, path = _ids()
        t.command(policy)
        answer = _numbers(t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")])))
        got.append(f"{what}: {answer.split(' first=')[0]}")
        if not answer.startswith("accepted=True memory=1 durable=1 "):
            problems.append(got[-1])
    origin, path = _ids()
    t.command(f"POLICY {TICK_S!r} 1000000 {2**62}")
    answer = _numbers(t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")])))
    _advance(t, TICK_S)
    after = _probe(t, ctx, origin)
    t.command(f"POLICY 0 1000000 {2**62}")
    got.append(f"lag of a tick: {answer.split(' first=')[0]}, a tick later {after.split(' first=')[0]}")
    if " durable=None " not in answer or " durable=1 " not in after:
        problems.append(got[-1])
    return Verdict(not problems, "count 1, lag 0, size 1: durable=1 in the put's answer; lag of a tick: durable=None, "
                   "then durable=1 a tick later", "; ".join(problems) or "; ".join(got))


# -- the numbers at the edges of their domain -----------------------------------------------------------

def numbers_at_their_bounds(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Sequence numbers are uint64 and 0 is one: an origin whose first transaction closes at 0 is answered memory=0
    durable=0 (in the put's answer and a probe's), a replay at 0 is acknowledged and not applied, 1 is new; one
    closing at 2^64-1 is answered with it as memory and durable, and a replay at it is acknowledged, not applied."""
    from conformance.sync.suite import _cmd, _ids, _numbers, _probe

    top = 2**64 - 1
    origin, path = _ids()
    steps = [("closing at 0", 0, [(None, 1, "a")], "memory=0 durable=0"),
             ("a replay at 0", 0, [(None, 2, "replayed")], "memory=0 durable=0"),
             ("closing at 1", 1, [(None, 3, "c")], "memory=1 durable=1")]
    got, problems = [], []
    for what, seq, rows, want in steps:
        answer = _numbers(t.put(ctx, _cmd(path, origin, seq), _batch(rows)))
        probe = _probe(t, ctx, origin)
        got.append(f"{what}: {answer.split(' first=')[0]}; probe {probe.split(' first=')[0]}")
        if not (answer.startswith(f"accepted=True {want} ") and probe.startswith(f"accepted=True {want} ")):
            problems.append(got[-1])
    ids = sorted(int(r["id"]) for r in t.table(path))
    if ids != [1, 3]:
        problems.append(f"ids {ids}, want [1, 3] (the replay at 0 not applied)")
    origin, path = _ids()
    for what, rows in (("closing at 2^64-1", [(None, 1, "a")]), ("a replay at 2^64-1", [(None, 2, "replayed")])):
        answer = _numbers(t.put(ctx, _cmd(path, origin, top), _batch(rows)))
        got.append(f"{what}: {answer.split(' first=')[0]}")
        if not answer.startswith(f"accepted=True memory={top} durable={top} "):
            problems.append(got[-1])
    ids = sorted(int(r["id"]) for r in t.table(path))
    if ids != [1]:
        problems.append(f"ids {ids} at 2^64-1, want [1]")
    return Verdict(not problems, "memory and durable 0, then 1; 2^64-1 both; the replays at each acknowledged and "
                   "not applied", "; ".join(problems) or "; ".join(got))


# -- connections at their bound ---------------------------------------------------------------------------

def _connections(t: SyncTarget) -> tuple[int, int]:
    """The target's (max connections, client connections held now) (``CONNECTIONS``)."""
    words = t.control("CONNECTIONS").split()
    if words[:1] != ["CONNECTIONS"] or len(words) != 3 or not all(w.isdigit() for w in words[1:]):
        raise RuntimeError(f"'CONNECTIONS' answered {' '.join(words)!r}, not CONNECTIONS <max> <held>")
    return int(words[1]), int(words[2])


def _until_held(t: SyncTarget, count: int) -> bool:
    return _until(count, lambda: _connections(t)[1])


EVICTED_WAIT_S: Final = 5.0
"""How long an evicted connection may take to be seen closed (real time; a bounded wait, not a verdict)."""


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the target closed ``sock``: its end of stream within the bounded wait (what it sent first, such as
    an HTTP/2 server preface, is read past)."""
    deadline = time.monotonic() + EVICTED_WAIT_S
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            if sock.recv(65536) == b"":
                return True
    except TimeoutError:
        return False
    except OSError:
        return True
    return False


def _silent(t: SyncTarget) -> socket.socket | None:
    """A connection that sends nothing, once the target has taken it (the first bytes it sends, such as an HTTP/2
    server preface, arrive within the bounded wait); None if nothing came."""
    host, port = t.location.split("://", 1)[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=SLOT_WAIT_S)
    try:
        if sock.recv(65536):
            return sock
    except OSError:
        pass
    sock.close()
    return None


def connections_at_their_bound(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """The cap filled with silent connections (no handshake; each newcomer at the cap evicts the oldest, so those of
    earlier cases go first), the newest closed again: with max_connections - 1 held a probe is answered and evicts
    none; with one more (the cap reached) a probe is answered and evicts the oldest silent one only."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    limit = _connections(t)[0]
    origin, path = _ids()
    silent: list[socket.socket] = []
    got, problems = [f"{limit} connections"], []
    try:
        while len(silent) < limit:
            sock = _silent(t)
            if sock is None:
                return Verdict(False, f"{limit} silent connections taken", f"{len(silent)} taken, then none")
            silent.append(sock)
        silent.pop().close()
        for holding in (limit - 1, limit):
            while len(silent) < holding:
                sock = _silent(t)
                if sock is None:
                    return Verdict(False, f"{holding} silent connections taken", f"{len(silent)} taken, then none")
                silent.append(sock)
            if not _until_held(t, holding):
                return Verdict(False, f"{holding} silent connections held", f"{_connections(t)[1]} held")
            answer = _numbers(t.put(ctx, _cmd(path, origin, None, ())))
            after = _until_held(t, limit - 1)
            got.append(f"{holding} held: {answer.split(' first=')[0]}, then {_connections(t)[1]} held")
            if not answer.startswith("accepted=True") or not after:
                problems.append(got[-1])
        if not _closed_by_peer(silent[0]):
            problems.append("the oldest silent connection was not the one evicted")
    finally:
        for sock in silent:
            sock.close()
    return Verdict(not problems, f"{limit - 1} held: answered, {limit - 1} still held; {limit} held: answered, the "
                   f"oldest evicted, {limit - 1} held", "; ".join(problems) or "; ".join(got))


def first_once_per_server(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """``first`` belongs to one response in a server's life, not one per origin or per kind of answer: after a
    probe that takes it if it is still to be had, two new origins' probes, a put and a replay all have
    first=false."""
    from conformance.sync.suite import _cmd, _ids, _probe

    (a, path), (b, _), (spare, _) = _ids(), _ids(), _ids()
    _probe(t, ctx, spare)
    outs = [("a new origin's probe", t.put(ctx, _cmd(path, a, None, ()))),
            ("another new origin's probe", t.put(ctx, _cmd(path, b, None, ()))),
            ("a new origin's put", t.put(ctx, _cmd(path, b, 1), _batch([(None, 1, "a")]))),
            ("a replay at durable", t.put(ctx, _cmd(path, b, 1), _batch([(None, 2, "b")])))]
    got = [f"{what}: first={out.response.first if out.response is not None else 'n/a (error)'}" for what, out in outs]
    ok = all(out.response is None or not out.response.first for _, out in outs) and all(
        out.response is not None for _, out in outs[:3])
    return Verdict(ok, "first=False on each", "; ".join(got))


FIRST_KINDS: Final = ("a busy answer (accepted=false)", "a new origin's put")
"""The kinds of answer a server's life can start with beside a probe (``restart/first``, ``probe/first-after-start``)."""


def first_on_any_kind_of_answer(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """After each restart, the first answer carries first=true whatever its kind (:data:`FIRST_KINDS`; a busy one
    under a high-watermark of 1 byte), and the answer after it first=false."""
    from conformance.sync.derived_writer import _held
    from conformance.sync.suite import _cmd, _ids, _numbers, _policy

    got, problems = [], []
    for kind in FIRST_KINDS:
        origin, path = _ids()
        t.restart()
        with _policy(t):
            if kind == FIRST_KINDS[0]:
                _held(t, watermark=1)
            first = t.put(ctx, _cmd(path, origin, 1), _batch([(None, 1, "a")]))
            _held(t)
            after = t.put(ctx, _cmd(path, origin, 2), _batch([(None, 2, "b")]))
        busy = kind == FIRST_KINDS[0]
        got.append(f"{kind}: {_numbers(first)}, then {_numbers(after)}")
        if not (first.response is not None and first.response.first and first.response.accepted is not busy
                and after.response is not None and not after.response.first):
            problems.append(kind)
    return Verdict(not problems, "after each restart: first=True on the first answer (busy; a put), first=False on "
                   "the next", "; ".join(got))


def draining_answers_probes_only(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Transaction 1 of A is durable and B's transaction is open; once the target drains (``DRAIN``), probes of A,
    of B and of a new origin are answered with the numbers held, and every other put is refused: B's next put, B's
    closing put without rows, A's replay at 1, a new origin's put. Nothing of them lands; a restart ends it."""
    from conformance.sync.suite import _cmd, _ids, _numbers, _probe

    (a, path), (b, _), (c, _) = _ids(), _ids(), _ids()
    t.put(ctx, _cmd(path, a, 1), _batch([(None, 1, "a")]))
    t.put(ctx, _cmd(f"{path}_b", b, None), _batch([(None, 1, "b")]))
    problems, got = [], []
    try:
        t.command("DRAIN")
        for who, origin, want in (("A", a, "memory=1 durable=1"), ("B", b, "memory=None durable=None"),
                                  ("a new origin", c, "memory=None durable=None")):
            answer = _probe(t, ctx, origin)
            got.append(f"probe of {who}: {answer.split(' first=')[0]}")
            if not answer.startswith(f"accepted=True {want} "):
                problems.append(got[-1])
        for what, cmd, rows in (("B's next put", _cmd(f"{path}_b", b, None), [(None, 2, "b")]),
                                ("B's closing put without rows", _cmd(f"{path}_b", b, 1), []),
                                ("A's replay at 1", _cmd(path, a, 1), [(None, 2, "replayed")]),
                                ("a new origin's put", _cmd(path, c, 1), [(None, 3, "c")])):
            answer = _numbers(t.put(ctx, cmd, _batch(rows)))
            got.append(f"{what}: {answer[:60]}")
            if answer.startswith("accepted=True"):
                problems.append(got[-1])
        ids = sorted(int(r["id"]) for r in t.table(path))
        if ids != [1]:
            problems.append(f"A's table holds ids {ids}, want [1]")
    finally:
        t.restart()
    return Verdict(not problems, "probes answered with the numbers held; each other put refused; A's table [1]",
                   "; ".join(problems) or "; ".join(got))


def squash_leaves_open_transaction(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Two closed transactions of A insert keys and delete them again in table T; A's third, open, puts to T too.
    At the size threshold T is squashed: only the closed transactions' items are (the open one may yet be dropped),
    so they squash to nothing and nothing is flushed. The open transaction is then discarded at its timeout: once
    flushed, A's durable number is 2 and T holds none of the keys."""
    from conformance.sync.suite import HELD_S, SQUASHED_AWAY_ROWS, _cmd, _ids, _pending_bytes, _policy, _probe

    origin, path = _ids()
    keys = range(SQUASHED_AWAY_ROWS)
    with _policy(t):
        t.put(ctx, _cmd(path, origin, 1), _batch([(None, k, "a") for k in keys]))
        t.put(ctx, _cmd(path, origin, 2), _batch([(k, None, None) for k in keys]))
        t.put(ctx, _cmd(path, origin, None), _batch([(None, SQUASHED_AWAY_ROWS, "open")]))
        t.command(f"POLICY {HELD_S} 1000000 {max(1, _pending_bytes(t) // 4)}")
        _advance(t, 0.0)
        squashed = _probe(t, ctx, origin)
        t.command(f"POLICY {HELD_S} 1000000 {2**62}")
        _advance(t, SyncSettings().transaction_timeout_s)
    after = _probe(t, ctx, origin)
    rows = t.table(path) if os.path.isdir(os.path.join(t.store, path, "_delta_log")) else []
    ok = squashed.startswith("accepted=True memory=2 durable=None ") and after.startswith(
        "accepted=True memory=2 durable=2 ") and rows == []
    return Verdict(ok, "after the squash: memory=2 durable=None; the open transaction discarded, then flushed: "
                   "durable=2, T empty", f"{squashed.split(' first=')[0]}; {after.split(' first=')[0]}; T {rows[:3]}")
