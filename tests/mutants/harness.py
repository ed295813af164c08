"""Apply one mutant to a scratch copy of the tree, run its tests there, and report who killed it.

The working tree is never touched: each worker copies the repository once into a temporary
directory, patches one file, runs pytest with ``-x`` and restores the file. Bytecode caching is
off in the scratch copy so a restored file of the same size and second is never run stale.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from conformance.mutation import ROOT, Mutant, PatchDoesNotApply, Planted, copy_tree, patched
from conformance.mutation import check_catalogue as check_mutants
from tests.mutants.catalogue import ALL_MUTANTS, selection

__all__ = ["ROOT", "PatchDoesNotApply", "patched", "check_catalogue", "run_all", "chosen", "Outcome"]

FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
PER_MUTANT_TIMEOUT = 900.0
"""A hang guard only: a mutant that makes the suite loop forever (or a thread it left keeps pytest
from exiting) counts as killed by timeout. Five selections' worth of a loaded machine, so a slow but
healthy selection is never a false kill."""
PYTEST_THEN_EXIT = ("import os, sys, pytest\ncode = int(pytest.main(sys.argv[1:]))\n"
                    "sys.stdout.flush(); sys.stderr.flush()\nos._exit(code)")
"""pytest, then an exit that does not wait for threads a mutant left hanging (a writer blocked for good)."""
PER_TEST_TIMEOUT = 180
"""pytest-timeout's bound on one test under a mutant (a runtime bug often hangs a test rather than
failing it); that test then counts as the killer. The slowest selected test takes about 20 s on a
quiet machine and took 58.7 s under a load of 30 (a 60 s bound failed its baseline there)."""


class BaselineFails(Exception):
    """The unmutated tree already fails a selection: every mutant would count as killed."""


@dataclass(frozen=True, slots=True)
class Outcome:
    mutant: str
    killed: bool
    killed_by: str | None
    seconds: float


def check_catalogue(root: Path = ROOT, mutants: Iterable[Mutant] = ALL_MUTANTS) -> None:
    """Every patch applies to the current code, changes it and leaves valid Python (a syntax error
    would be "killed" by the import, not by a test); fails loudly on the first that doesn't."""
    mutants = list(mutants)
    check_mutants(root, mutants)
    for mutant in mutants:
        try:
            compile(patched((root / mutant.file).read_text(), mutant), mutant.file, "exec")
        except SyntaxError as error:
            raise PatchDoesNotApply(f"mutant {mutant.name}: the patched {mutant.file} is not Python: {error}") from None


@dataclass
class Scratch:
    """A private copy of the repository for one worker."""

    root: Path

    @classmethod
    def create(cls, parent: Path) -> "Scratch":
        return cls(copy_tree(Path(parent) / f"tree-{len(list(parent.iterdir()))}"))

    def run(self, mutant: Mutant) -> Outcome:
        started = time.monotonic()
        with Planted(self.root, mutant):
            killed_by = self._first_failure(selection(mutant))
        return Outcome(mutant.name, killed_by is not None, killed_by, round(time.monotonic() - started, 2))

    def baseline(self, tests: Sequence[str]) -> None:
        """Run ``tests`` on the unmutated copy; raise :class:`BaselineFails` if anything fails."""
        failure = self._first_failure(tests)
        if failure is not None:
            raise BaselineFails(f"the unmutated tree fails {failure}: fix it before counting kills")

    def _first_failure(self, tests: Sequence[str]) -> str | None:
        env = dict(os.environ, PYTHONPATH=str(self.root), PYTHONDONTWRITEBYTECODE="1",
                   HYPOTHESIS_PROFILE="ci")
        env.pop("CI", None)  # CI would turn local skips into failures that are not kills
        command = [sys.executable, "-c", PYTEST_THEN_EXIT, "-x", "-q", "--tb=no", "-rfE", "-p", "no:cacheprovider",
                   f"--timeout={PER_TEST_TIMEOUT}", *tests]
        try:
            done = subprocess.run(command, cwd=self.root, env=env, capture_output=True, text=True,
                                  timeout=PER_MUTANT_TIMEOUT)
        except subprocess.TimeoutExpired:
            return "timeout"
        if done.returncode == 0:
            return None
        found = FAILED_LINE.search(done.stdout)
        if found:
            return found.group(1)
        last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or ["?"])[-1]
        return f"pytest exit {done.returncode}: {last[:120]}"


def run_all(mutants: Sequence[Mutant], workers: int = 2, baseline: bool = True,
            progress: Callable[[Outcome], None] = lambda _: None) -> list[Outcome]:
    """Run every mutant, at most ``workers`` at a time, each worker in its own scratch copy.

    With ``baseline`` every selected test is first run once on the unmutated copy (skip it only where
    the same tests are known to pass, as in ``make test``, which runs them anyway).
    """
    check_catalogue(ROOT, mutants)
    with tempfile.TemporaryDirectory(prefix="streamwire-mutants-") as parent:
        scratches = [Scratch.create(Path(parent)) for _ in range(max(1, min(workers, len(mutants))))]
        free = list(scratches)
        if baseline:
            scratches[0].baseline(list(dict.fromkeys(test for m in mutants for test in selection(m))))

        def one(mutant: Mutant) -> Outcome:
            scratch = free.pop()
            try:
                outcome = scratch.run(mutant)
            finally:
                free.append(scratch)
            progress(outcome)
            return outcome

        with ThreadPoolExecutor(max_workers=len(scratches)) as pool:
            return list(pool.map(one, mutants))


def chosen(items: Sequence[Mutant], names: Iterable[str]) -> Iterator[Mutant]:
    """The mutants named (all of them when none are), in catalogue order; an unknown name is an error."""
    wanted = set(names)
    unknown = wanted - {m.name for m in items}
    if unknown:
        raise SystemExit(f"unknown mutants: {', '.join(sorted(unknown))}")
    return (m for m in items if not wanted or m.name in wanted)
