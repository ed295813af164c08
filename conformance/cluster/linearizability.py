"""Linearizability of one key's compare-and-swap history (Wing & Gong search, memoized as in
Lowe's and Knossos' checkers).

Each operation is a CAS whose response is either success with the new revision, or a mismatch
reporting the key's entry at that time. The sequential specification is a register of
(value, revision): success needs the current revision to be the expected one and yields a strictly
greater revision; a mismatch needs a different current revision and reports exactly the current
entry. A history is linearizable if some order consistent with real time satisfies it.
"""

from __future__ import annotations

from dataclasses import dataclass

State = tuple[bytes, int] | None


@dataclass(frozen=True, slots=True)
class CasOp:
    """``invoked``/``completed`` on one monotonic clock; ``revision`` set on success, else
    ``actual`` (None: the key was absent)."""

    invoked: float
    completed: float
    expected: int | None
    value: bytes
    succeeded: bool
    revision: int | None = None
    actual: State = None


def step(state: State, op: CasOp) -> tuple[bool, State]:
    current = None if state is None else state[1]
    if op.succeeded:
        assert op.revision is not None
        ok = current == op.expected and (current is None or op.revision > current)
        return ok, (op.value, op.revision)
    return current != op.expected and state == op.actual, state


def check(history: list[CasOp], initial: State = None) -> bool:
    """True when ``history`` (complete operations only) is linearizable from ``initial``."""
    ops = sorted(history, key=lambda o: o.invoked)
    full = (1 << len(ops)) - 1
    seen: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = [(0, initial)]
    while stack:
        done, state = stack.pop()
        if done == full:
            return True
        if (done, state) in seen:
            continue
        seen.add((done, state))
        pending = [i for i in range(len(ops)) if not done >> i & 1]
        horizon = min(ops[i].completed for i in pending)
        for i in pending:
            if ops[i].invoked > horizon:
                break  # ops invoked after some pending op completed cannot come first
            ok, after = step(state, ops[i])
            if ok:
                stack.append((done | 1 << i, after))
    return False
