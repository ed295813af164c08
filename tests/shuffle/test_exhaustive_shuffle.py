"""Exhaustive small-scope check: every interleaving of tiny shuffles, breadth-first, with state hashing.

1x1 and 2x2, up to two records per pair, with and without one fault of any kind at any point. Each
state's invariants are checked as it is reached; a state with nothing enabled must be an end state
(both sides completed or failed, with the oracle's expected errors) - no violation, no deadlock.
The 2x2 scopes use the network's eager mode (see :class:`Network`): sockets, producers and consumers
act at once, timers fire at quiescence, the fault strikes connection (0, 0), and after the first
failure one fair schedule (the liveness drain) stands for all the others.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import pickle
import sys
from collections import deque
from functools import cache
from enum import Enum
from operator import attrgetter, methodcaller
from typing import Any, Callable

import pytest
from shuffle_netsim import Action, Network

from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.transitions import READER_TABLE, WRITER_TABLE, Table
from tests.shuffle.table_lookups import observed

SETTINGS = ShuffleSettings(
    network_buffer_size=8,  # a 3-byte record (7 framed bytes) fills 90% of it: one DATA per record
    writer_max_memory=1,  # permits = R * 8 * 2: two buffers per reader in flight, then the producer blocks
    reader_max_memory=2 * 39,  # one DATA (35 + 4 bytes of body) per writer before reading pauses
    writer_connection_timeout_ms=1000,
)


def explore(start: Network, limit: int, past_failure: bool = True) -> int:
    """Visit every reachable state; return how many distinct states there were.

    With ``past_failure`` False a state where some side has failed is not expanded: the failure was
    checked against the oracle when it happened, and one fair schedule (the liveness drain) checks
    that the others end too.

    A state is its pickle: the bytes serve as its identity (hashed) and as the copy to expand. On a
    violation the action path from the start is attached, ready to become a trace vector.
    """
    blob = dumps(start)
    root = fingerprint(start)
    parent: dict[bytes, tuple[bytes, Action] | None] = {root: None}
    frontier = deque([(blob, root)])
    while frontier:
        blob, key = frontier.popleft()
        net = pickle.loads(blob)
        actions = list(net.actions()) + list(net.fault_actions())
        try:
            if net.failures and not past_failure:
                net.drain()
                continue
            if not actions:
                net.check_final()
            for i, action in enumerate(actions, 1):
                nxt = net if i == len(actions) else pickle.loads(blob)  # the last action takes the state itself
                nxt.apply(action)
                nkey = fingerprint(nxt)
                if nkey not in parent:
                    parent[nkey] = (key, action)
                    frontier.append((dumps(nxt), nkey))
        except AssertionError as violation:
            raise AssertionError(f"{violation}\npath: {path_to(parent, key)}") from violation
        assert len(parent) <= limit, f"state space above {limit}: the scope is not small any more"
    return len(parent)


PROTOCOL = pickle.HIGHEST_PROTOCOL


class _Reducers(dict[type, Callable[[Any], object]]):
    """The pickler's dispatch table, one reducer per type, made on first sight: slotted dataclasses
    (messages, sends, channels, errors' faults) pickle as their class and field values, without the
    ``fields()`` walk of their generated ``__getstate__`` and ``__setstate__`` on every object; enum members
    by name; deques as lists (a deque's own reduce calls ``copyreg._slotnames`` every time). That was most
    of the search's time. Other types pickle as they always do."""

    def __missing__(self, cls: type) -> Callable[[Any], object]:
        reducer: Callable[[Any], object]
        if issubclass(cls, type):  # a class with a metaclass (an enum's, an ABC's): by name, as usual
            reducer = attrgetter("__qualname__")
        elif issubclass(cls, Enum):
            reducer = lambda member: (getattr, (cls, member.name))  # noqa: E731
        elif cls is deque:
            reducer = lambda d: (deque, (list(d), d.maxlen))  # noqa: E731
        elif dataclasses.is_dataclass(cls) and hasattr(cls, "__slots__"):
            names = _field_names(cls)
            values = attrgetter(*names) if len(names) > 1 else lambda obj: tuple(getattr(obj, n) for n in names)
            reducer = lambda obj: (_rebuild, (cls, values(obj)))  # noqa: E731
        else:
            reducer = methodcaller("__reduce_ex__", PROTOCOL)
        self[cls] = reducer
        return reducer


_REDUCERS = _Reducers()


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _rebuild(cls: type, values: tuple[object, ...]) -> object:
    obj = object.__new__(cls)
    for name, value in zip(_field_names(cls), values):
        object.__setattr__(obj, name, value)
    return obj


def dumps(obj: object) -> bytes:
    out = io.BytesIO()
    pickler = pickle.Pickler(out, PROTOCOL)
    pickler.dispatch_table = _REDUCERS
    pickler.dump(obj)
    return out.getvalue()


def _flat(obj: object, skip: tuple[str, ...] = ()) -> tuple[object, ...]:
    """An object's attributes with every dict and set put in a fixed order (their fill order is history, not state).

    A dict's items are ordered by the text their repr starts with, ``(key, ``: the order of their whole
    reprs, as keys are distinct ints, strings or tuples, without spelling out every value."""
    out: list[object] = []
    for name, value in sorted(vars(obj).items()):
        if name in skip:
            continue
        if isinstance(value, dict):
            value = sorted(value.items(), key=_item_order)
        elif isinstance(value, (set, frozenset)):
            value = sorted(value, key=repr)
        out.append((name, value))
    return tuple(out)


def fingerprint(net: Network) -> bytes:
    """Equal for equal states, whatever order their dicts and sets were filled in."""
    parts = (_flat(net, skip=("writers", "readers", "pairs", "settings")), [_flat(m) for m in net.writers.values()], [_flat(m) for m in net.readers.values()],
             [_flat(p) for p in net.pairs.values()])
    return hashlib.blake2b(dumps(parts), digest_size=16).digest()


def _item_order(item: tuple[object, object]) -> str:
    return f"({item[0]!r}, "


def path_to(parent: dict[bytes, tuple[bytes, Action] | None], key: bytes) -> list[Action]:
    path: list[Action] = []
    link = parent[key]
    while link is not None:
        key, action = link
        path.append(action)
        link = parent[key]
    return path[::-1]


CASES = {
    # name: writers, readers, records per pair, records only on pair (0, 0), faults, eager
    "1x1-2rec": (1, 1, 2, False, 0, False),
    "1x1-2rec-1fault": (1, 1, 2, False, 1, False),
    "2x2-2rec": (2, 2, 2, False, 0, True),
    "2x2-1rec-on-one-pair-1fault": (2, 2, 1, True, 1, True),
}


def search(name: str) -> tuple[int, set[tuple[str, str, str]]]:
    """Explore case ``name``: the distinct states, and the table pairs its machines looked up."""
    exercised: set[tuple[str, str, str]] = set()

    def record(table: Table[Any, Any], state: Any, event: Any) -> None:
        exercised.add((table.name, state.value, event.value))

    writers, readers, records, one_pair, faults, eager = CASES[name]
    script = {(w, r): [bytes([w, r, i]) for i in range(records if (w, r) == (0, 0) or not one_pair else 0)]
              for w in range(writers) for r in range(readers)}
    net = Network(script, writers, readers, SETTINGS, wire_capacity=1, faults=faults,
                  ack_timeout_ms=2000, eager=eager)
    with observed(WRITER_TABLE, record), observed(READER_TABLE, record):
        states = explore(net, limit=100_000, past_failure=not eager)
    return states, exercised


@pytest.mark.parametrize("name", list(CASES))
def test_every_interleaving_ends_correctly(name: str, background_searches: dict[str, Any],
                                           exercised_pairs: set[tuple[str, str, str]],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    started = background_searches.get(name)
    states, exercised = started.result() if started is not None else search(name)
    exercised_pairs.update(exercised)
    with capsys.disabled():
        print(f"\nexhaustive {name}: {states} distinct states explored, no violation, no deadlock")
    assert states > 1


if __name__ == "__main__":  # one search in a process of its own (tests/shuffle/conftest.py starts it)
    found_states, found_pairs = search(sys.argv[1])
    print(json.dumps({"states": found_states, "exercised": sorted(found_pairs)}))
