"""Planting one bug in a private copy of the tree: a search/replace of one short snippet.

Shared by the two ways this project measures what its checks catch: the mutation harness
(``tests/mutants``: the unit tests against a mutated spec) and the sensitivity command
(:mod:`conformance.sensitivity`: the live suite against a mutated implementation). A snippet is
anchored by its text, not by line numbers, so unrelated edits do not move it; when the code it
names changes, :func:`check_catalogue` fails loudly and the entry has to be rewritten.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Iterable

ROOT: Final = Path(__file__).resolve().parents[1]
LEFT_OUT: Final = (".git", ".venv", "build", "reports", "__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache",
                   ".hypothesis", "*.egg-info")
"""Not copied into a scratch tree: history, the environment, caches and outputs."""


@dataclass(frozen=True, slots=True)
class Mutant:
    """One realistic bug: ``search`` in ``file`` (relative to the tree) becomes ``replace``."""

    name: str
    file: str
    search: str
    replace: str
    description: str
    equivalent: str = ""
    """Why no case can tell it from the correct code (an equivalent mutant, argued in
    docs/conformance.md); empty for a bug a case must catch."""
    tests: tuple[str, ...] = ()
    """The tests that should kill it (pytest node ids or files); empty: its catalogue's default selection."""

    @property
    def module(self) -> str:
        """The dotted name of the module it plants in (``spec/cluster/model.py``: ``spec.cluster.model``)."""
        return self.file.removesuffix(".py").replace("/", ".")

    def source(self, original: str) -> str:
        """``original`` with the bug planted (so :func:`conformance.operator_mutants.fresh_modules` imports it)."""
        return patched(original, self)


class PatchDoesNotApply(Exception):
    """The catalogue is out of step with the code: the anchored snippet is gone or ambiguous."""


def patched(source: str, mutant: Mutant) -> str:
    """``source`` with the mutant's snippet replaced; it must occur exactly once."""
    count = source.count(mutant.search)
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times"
        raise PatchDoesNotApply(f"mutant {mutant.name}: snippet {mutant.search!r} {where} in {mutant.file}")
    return source.replace(mutant.search, mutant.replace)


def check_catalogue(root: Path, mutants: Iterable[Mutant]) -> None:
    """Every patch applies to the current code and changes it (fails loudly on the first that doesn't)."""
    for mutant in mutants:
        source = (root / mutant.file).read_text()
        if patched(source, mutant) == source:
            raise PatchDoesNotApply(f"mutant {mutant.name}: the patch changes nothing")


def copy_tree(destination: Path) -> Path:
    """A private copy of the repository at ``destination`` (without history, environment or caches)."""
    shutil.copytree(ROOT, destination, ignore=shutil.ignore_patterns(*LEFT_OUT))
    return destination


class Planted:
    """``mutant`` written into the copy at ``root`` for the duration of a ``with`` block, then undone."""

    def __init__(self, root: Path, mutant: Mutant) -> None:
        self.path = root / mutant.file
        self.mutant = mutant
        self.original = ""

    def __enter__(self) -> Planted:
        self.original = self.path.read_text()
        self.path.write_text(patched(self.original, self.mutant))
        return self

    def __exit__(self, *exc: object) -> None:
        self.path.write_text(self.original)


def exec_target_in(copy: Path, arguments: str) -> str:
    """An ``exec:`` target running ``python -P arguments`` on ``copy`` (``-P``: the copy, not the working
    directory, on the path), so the unmodified judge meets the planted implementation."""
    return (f"exec:env PYTHONPATH={shlex.quote(str(copy))} PYTHONDONTWRITEBYTECODE=1 "
            f"{shlex.quote(sys.executable)} -P {arguments}")
