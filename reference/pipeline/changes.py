"""The change stream: deterministic CDC transactions of several source origins over one key space.

Everything is a pure function of a :class:`StreamSpec` (seed, sizes), so source tasks generate
the stream where they run and the driver recomputes it independently for the oracle; a task
that is re-run generates exactly the same transactions again.

Origin ``i`` owns the keys ``k`` with ``k % origins == i`` (rows of one source database never
collide with another's), numbers its transactions 1, 2, 3, ... and draws from its own random
generator.  Every change carries the full row image except plain updates, which may leave
``note`` unchanged (CHANGED=false, as a TOASTed column in PostgreSQL's logical decoding).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

MAX_TX_CHANGES = 6
"""Largest number of changes in one source transaction."""


class Op(enum.IntEnum):
    """What a change does to a row."""

    INSERT = 0
    UPDATE = 1
    KEY_CHANGE = 2
    DELETE = 3


@dataclass(frozen=True, slots=True)
class Change:
    """One row change as a CDC source reports it (``old_id``/``new_id`` as in the sync protocol).

    ``note`` is None with ``note_changed`` false when an update keeps the stored note.
    """

    op: Op
    entity: int
    old_id: int | None
    new_id: int | None
    value: int | None
    note: str | None
    note_changed: bool


@dataclass(frozen=True, slots=True)
class Transaction:
    """A source transaction: the changes of ``origin`` committed with sequence number ``seq``."""

    origin: int
    seq: int
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class StreamSpec:
    """The whole stream: ``changes`` row changes over ``keys`` keys from ``origins`` sources."""

    seed: int
    changes: int
    keys: int
    origins: int

    def __post_init__(self) -> None:
        if self.origins < 1 or self.changes < 0:
            raise ValueError("need at least one origin and a non-negative number of changes")
        if self.keys < self.origins:
            raise ValueError(f"--keys ({self.keys}) must be at least --origins ({self.origins})")

    def origin_name(self, origin: int) -> str:
        """The source origin's name (its database, in CDC terms)."""
        return f"src{origin}"

    def changes_of(self, origin: int) -> int:
        """How many changes ``origin`` generates (the total split as evenly as possible)."""
        return self.changes // self.origins + (1 if origin < self.changes % self.origins else 0)

    def transactions(self, origin: int) -> Iterator[Transaction]:
        """The transactions of ``origin`` in commit order."""
        return _OriginGenerator(self, origin).run()


T = TypeVar("T")


class _Pool(Generic[T]):
    """A set with O(1) add, remove and uniform random choice."""

    def __init__(self, items: list[T]) -> None:
        self._items = list(items)
        self._index = {item: i for i, item in enumerate(self._items)}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: T) -> None:
        self._index[item] = len(self._items)
        self._items.append(item)

    def remove(self, item: T) -> None:
        i = self._index.pop(item)
        last = self._items.pop()
        if i < len(self._items):
            self._items[i] = last
            self._index[last] = i

    def choice(self, rng: random.Random) -> T:
        return self._items[rng.randrange(len(self._items))]


class _OriginGenerator:
    """One origin's database: live entities and free keys, changed by random valid operations."""

    def __init__(self, spec: StreamSpec, origin: int) -> None:
        self.spec, self.origin = spec, origin
        self.rng = random.Random(f"streamwire-pipeline/{spec.seed}/{origin}")
        self.free: _Pool[int] = _Pool(list(range(origin, spec.keys, spec.origins)))
        self.live: _Pool[int] = _Pool([])
        self.key_of: dict[int, int] = {}
        self.capacity = len(self.free)
        self.next_entity = origin

    def run(self) -> Iterator[Transaction]:
        left, seq = self.spec.changes_of(self.origin), 0
        while left > 0:
            size = min(left, self.rng.randint(1, MAX_TX_CHANGES))
            seq += 1
            yield Transaction(self.origin, seq, tuple(self._change(f"{seq}.{i}") for i in range(size)))
            left -= size

    def _choose(self) -> Op:
        fill = len(self.live) / self.capacity
        weights = {
            Op.INSERT: 0.5 * (1 - fill) if self.free else 0.0,
            Op.UPDATE: 0.4 if self.live else 0.0,
            Op.KEY_CHANGE: 0.15 * (1 - fill) if self.live and self.free else 0.0,
            Op.DELETE: 0.05 + 0.15 * fill if self.live else 0.0,
        }
        ops = [op for op, w in weights.items() if w > 0]
        return self.rng.choices(ops, [weights[op] for op in ops])[0]

    def _change(self, tag: str) -> Change:
        op = self._choose()
        value = self.rng.getrandbits(31)
        if op is Op.INSERT:
            entity, key = self.next_entity, self.free.choice(self.rng)
            self.next_entity += self.spec.origins
            self.free.remove(key)
            self.live.add(entity)
            self.key_of[entity] = key
            return Change(op, entity, None, key, value, f"n{tag}", True)
        entity = self.live.choice(self.rng)
        key = self.key_of[entity]
        if op is Op.UPDATE:
            if self.rng.random() < 0.3:
                return Change(op, entity, key, key, value, None, False)
            return Change(op, entity, key, key, value, f"u{tag}", True)
        if op is Op.KEY_CHANGE:
            new_key = self.free.choice(self.rng)
            self.free.remove(new_key)
            self.free.add(key)
            self.key_of[entity] = new_key
            return Change(op, entity, key, new_key, value, f"k{tag}", True)
        self.live.remove(entity)
        self.free.add(key)
        del self.key_of[entity]
        return Change(op, entity, key, None, None, None, False)
