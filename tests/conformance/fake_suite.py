"""A fake suite installed as ``conformance.fake.suite``, run through the real ``run`` command
(import the ``fake_suite`` fixture into a test module)."""

from __future__ import annotations

import argparse
import sys
import types
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

import pytest

from conformance import runner
from conformance.framework import Case, RunOptions, Suite


@dataclass(frozen=True)
class FakeTarget:
    description: str = "fake"
    capabilities: frozenset[str] = frozenset({"writer"})


@contextmanager
def open_fake_target(options: RunOptions) -> Iterator[FakeTarget]:
    yield FakeTarget()


OpenTarget = Callable[[RunOptions], AbstractContextManager[Any]]


class RunFake(Protocol):
    def __call__(self, *argv: str) -> int: ...


@pytest.fixture
def fake_suite(monkeypatch: pytest.MonkeyPatch) -> Callable[[Sequence[Case], OpenTarget], RunFake]:
    """``fake_suite(cases, open_target, independent)`` installs a suite (its cases independent against every target
    when ``independent``) and returns ``run(*argv)``, ``python -m conformance run`` on it."""
    def install(cases: Sequence[Case], open_target: OpenTarget = open_fake_target, independent: bool = False) -> RunFake:
        module = types.ModuleType("conformance.fake.suite")
        module.SUITE = Suite("fake", cases, open_target, ("writer", "reader"), "fake only",  # type: ignore[attr-defined]
                             independent_cases=lambda target: independent)
        monkeypatch.setitem(sys.modules, "conformance.fake.suite", module)

        def run(*argv: str) -> int:
            parser = argparse.ArgumentParser()
            runner.add_arguments(parser)
            args = parser.parse_args(["--suite", "shuffle", *argv])
            args.suite = "fake"
            return runner.main(args)

        return run

    return install
