"""Records which (state, event) pairs of the channel tables the model checks exercise, and reports it."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from spec.shuffle.transitions import READER_TABLE, WRITER_TABLE, Table
from tests.shuffle.table_lookups import observed

EXERCISED: set[tuple[str, str, str]] = set()


def _record(table: Table[Any, Any], state: Any, event: Any) -> None:
    EXERCISED.add((table.name, state.value, event.value))


@pytest.fixture
def table_coverage() -> Iterator[None]:
    """Count the pairs this test drives through the tables (model checks only, not the totality test)."""
    with observed(WRITER_TABLE, _record), observed(READER_TABLE, _record):
        yield


def all_pairs(table: Table[Any, Any]) -> set[tuple[str, str, str]]:
    states = {s for s, _ in table.rejections} | {s for s, _ in table.transitions}
    events = {e for _, e in table.rejections} | {e for _, e in table.transitions}
    return {(table.name, s.value, e.value) for s in states for e in events}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not EXERCISED:
        return
    tr = terminalreporter
    tr.section("shuffle state-machine coverage (model checks)")
    for table in (WRITER_TABLE, READER_TABLE):
        pairs = all_pairs(table)
        listed = {(table.name, s.value, e.value) for s, e in table.transitions}
        hit = EXERCISED & pairs
        tr.write_line(
            f"{table.name}: {len(hit)} of {len(pairs)} (state, event) pairs exercised; "
            f"{len(hit & listed)} of {len(listed)} listed transitions"
        )
        missing = sorted(listed - hit)
        if missing:
            tr.write_line(f"  listed transitions not exercised: {', '.join(f'{s}/{e}' for _, s, e in missing)}")
        rejected = sorted(hit - listed)
        if rejected:
            tr.write_line(f"  rejected pairs exercised: {', '.join(f'{s}/{e}' for _, s, e in rejected)}")
