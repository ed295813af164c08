"""Records which (state, event) pairs of the channel tables the model checks exercise, and reports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from spec.shuffle.transitions import READER_TABLE, WRITER_TABLE, Table
from tests.shuffle.table_lookups import observed

EXERCISED: set[tuple[str, str, str]] = set()

ROOT = Path(__file__).resolve().parents[2]
EXHAUSTIVE = Path(__file__).with_name("test_exhaustive_shuffle.py")
SEARCHES_IN_BACKGROUND = ("2x2-1rec-on-one-pair-1fault",)
"""Exhaustive searches started when collection ends, each in a process of its own: about a minute of CPU
that runs while the rest of the suite mostly waits on timers, sockets and JVMs; only its own test reads it."""
SEARCH_DEADLINE_S = 900


class BackgroundSearch:
    """One exhaustive search running as ``python test_exhaustive_shuffle.py NAME``; :meth:`result` waits for it
    (SEARCH_DEADLINE_S from its start). Output goes to files: a pipe nobody reads yet would stall it once full."""

    def __init__(self, name: str, directory: Path) -> None:
        self.stdout, self.stderr = directory / f"{name}.json", directory / f"{name}.err"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
        with open(self.stdout, "w") as stdout, open(self.stderr, "w") as stderr:
            self.process = subprocess.Popen([sys.executable, str(EXHAUSTIVE), name], cwd=ROOT, env=env,
                                            stdout=stdout, stderr=stderr)
        self.deadline = time.monotonic() + SEARCH_DEADLINE_S

    def result(self) -> tuple[int, set[tuple[str, str, str]]]:
        """The states explored and the table pairs exercised; AssertionError with the search's own words if it
        found a violation or did not end."""
        try:
            self.process.wait(max(self.deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the search did not end within {SEARCH_DEADLINE_S} s") from None
        if self.process.returncode != 0:
            raise AssertionError(self.stderr.read_text())
        found = json.loads(self.stdout.read_text())
        return found["states"], {(t, s, e) for t, s, e in found["exercised"]}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


_SEARCHES = pytest.StashKey[dict[str, BackgroundSearch]]()
_SEARCH_DIRECTORY = pytest.StashKey["tempfile.TemporaryDirectory[str]"]()


def pytest_collection_finish(session: pytest.Session) -> None:
    names = {item.callspec.params["name"] for item in session.items
             if item.path == EXHAUSTIVE and hasattr(item, "callspec")} & set(SEARCHES_IN_BACKGROUND)
    if not names:
        return
    directory = tempfile.TemporaryDirectory(prefix="streamwire-exhaustive-")
    session.config.stash[_SEARCH_DIRECTORY] = directory
    session.config.stash[_SEARCHES] = {name: BackgroundSearch(name, Path(directory.name)) for name in sorted(names)}


def pytest_sessionfinish(session: pytest.Session) -> None:
    for search in session.config.stash.get(_SEARCHES, {}).values():
        search.stop()
    if _SEARCH_DIRECTORY in session.config.stash:
        session.config.stash[_SEARCH_DIRECTORY].cleanup()


@pytest.fixture
def background_searches(request: pytest.FixtureRequest) -> dict[str, BackgroundSearch]:
    """The searches started in the background for this session, by case name."""
    return request.config.stash.get(_SEARCHES, {})


@pytest.fixture
def exercised_pairs() -> set[tuple[str, str, str]]:
    """The table pairs the model checks exercised, for a search that ran in another process to add its own."""
    return EXERCISED


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
