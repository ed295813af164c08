"""Watching the channel tables' lookups from tests: the spec keeps no observers, so a test wraps
:meth:`Table.apply` for as long as a block runs."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from spec.shuffle.transitions import Table

Observer = Callable[[Table[Any, Any], Any, Any], None]
"""Called with (table, state, event) for every pair a machine looks up, before the answer is given."""


@contextmanager
def observed(table: Table[Any, Any], observer: Observer) -> Iterator[None]:
    """Call ``observer`` on every lookup of ``table`` while the block runs (blocks nest)."""
    unwrapped = Table.apply

    def apply(self: Table[Any, Any], state: Any, event: Any) -> Any:
        if self is table:
            observer(self, state, event)
        return unwrapped(self, state, event)

    Table.apply = apply  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.apply = unwrapped  # type: ignore[method-assign]
