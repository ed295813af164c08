"""``python -m conformance sensitivity``: how many planted bugs the unmodified suite catches.

A suite is worth what it catches. Each bug of a suite's catalogue (``conformance/<suite>/bugs.py``)
is planted, one at a time, in a private copy of the tree; the suite of *this* tree (the judge,
never mutated) then runs against the copy's implementation through the target kind an outside
implementation would use (``exec:`` with the copy on ``PYTHONPATH``). A bug is caught when a case
the unmodified reference passes is no longer passed (a MUST or SHOULD case fails or times out, or
the target no longer starts; the baseline checks the reference passes them all, SHOULDs included);
the run of that bug stops at its first failing case. Each worker has its own copy, temp dirs and ports (every target binds
port 0), so two bugs run side by side safely. An entry may be argued equivalent (``Mutant.equivalent``:
no case can tell it from the correct code); it is planted too, reported apart and left out of the
score, so an argument a case refutes shows. Exit 0 when every bug not argued equivalent was caught.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Final, Protocol, Sequence

from conformance.framework import CaseOutcome, RunOptions, TargetUnreachable
from conformance.mutation import ROOT, Mutant, Planted, check_catalogue, copy_tree
from conformance.runner import SUITES, is_failure, load_suite, run_case, select_cases
from spec.auth import AuthConfig

CASE_TIMEOUT_S: Final = 15.0
"""Per case: a planted bug that hangs an exchange is caught by the timeout, so keep it short."""


class Catalogue(Protocol):
    """What ``conformance/<suite>/bugs.py`` provides."""

    BUGS: tuple[Mutant, ...]
    SMOKE: tuple[str, ...]

    def target_for(self, copy: Path) -> str:
        """The target spec that runs the implementation in ``copy`` as an outside implementation."""


@dataclass(frozen=True, slots=True)
class Outcome:
    bug: str
    caught: bool
    caught_by: str | None
    """The first failing case id, or ``target-unreachable: <reason>``."""
    seconds: float


def load_catalogue(suite: str) -> Catalogue:
    catalogue: Catalogue = importlib.import_module(f"conformance.{suite}.bugs")
    return catalogue


def auth_runs(catalogue: Catalogue) -> tuple[AuthConfig, ...]:
    """The authenticated runs a catalogue asks for (``AUTH_RUNS``; none by default)."""
    runs: tuple[AuthConfig, ...] = getattr(catalogue, "AUTH_RUNS", ())
    return runs


def first_failure(suite_name: str, target: str, timeout: float = CASE_TIMEOUT_S,
                  authenticated: Sequence[AuthConfig] = ()) -> str | None:
    """Run the suite against ``target``, stopping at the first failing case; its id (None: all passed). Then,
    once for each of ``authenticated``, the cases the first run left unobserved for want of a secret (a shuffle
    suite's ``auth/`` cases), with that secret, cipher and engine version: a bug in the handshake or the
    cipher fails them."""
    suite = load_suite(suite_name)
    runs = [RunOptions(suite=suite_name, target=target, timeout=timeout)]
    runs += [RunOptions(suite=suite_name, target=target, timeout=timeout, auth=auth) for auth in authenticated]
    try:
        cases = select_cases(suite, runs[0])
        for index, options in enumerate(runs):
            unobserved = []
            with suite.open_target(options) as opened:
                for case in cases:
                    report = run_case(case, opened, options)
                    if is_failure(report, strict=True):
                        return case.id
                    if report.outcome is CaseOutcome.UNSUPPORTED:
                        unobserved.append(case)
            cases = unobserved if index == 0 else cases
    except TargetUnreachable as exc:
        return f"target-unreachable: {exc}"
    except Exception as exc:  # whatever stops the copy's implementation from starting
        return f"target-unreachable: {' '.join(f'{type(exc).__name__}: {exc}'.split())[:160]}"
    return None


class BaselineFails(Exception):
    """The unmodified copy already fails a case: every bug would count as caught."""


def measure(suite: str, bugs: Sequence[Mutant], workers: int = 2, baseline: bool = True,
            progress: Callable[[Outcome], None] = lambda _: None) -> list[Outcome]:
    """Plant each bug in a worker's private copy and run the suite against it."""
    catalogue = load_catalogue(suite)
    check_catalogue(ROOT, bugs)
    with tempfile.TemporaryDirectory(prefix="streamwire-sensitivity-") as parent:
        copies = [copy_tree(Path(parent) / f"tree-{i}") for i in range(max(1, min(workers, len(bugs))))]
        if baseline:
            failure = first_failure(suite, catalogue.target_for(copies[0]), authenticated=auth_runs(catalogue))
            if failure is not None:
                raise BaselineFails(f"the unmodified {suite} implementation fails {failure}")
        free, lock = list(copies), threading.Lock()
        outcomes: dict[str, Outcome] = {}

        def one(bug: Mutant) -> None:
            with lock:
                copy = free.pop()
            started = time.monotonic()
            try:
                with Planted(copy, bug):
                    failure = first_failure(suite, catalogue.target_for(copy), authenticated=auth_runs(catalogue))
            finally:
                with lock:
                    free.append(copy)
            outcome = Outcome(bug.name, failure is not None, failure, round(time.monotonic() - started, 1))
            outcomes[bug.name] = outcome
            progress(outcome)

        pending = list(bugs)
        threads: list[threading.Thread] = []
        while pending or threads:
            threads = [t for t in threads if t.is_alive()]
            while pending and len(threads) < len(copies):
                thread = threading.Thread(target=one, args=(pending.pop(0),), daemon=True)
                thread.start()
                threads.append(thread)
            time.sleep(0.05)
        return [outcomes[b.name] for b in bugs]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, choices=SUITES)
    parser.add_argument("--bug", dest="bugs", action="append", metavar="NAME",
                        help="only this catalogue entry (repeatable; default: the whole catalogue)")
    parser.add_argument("--smoke", action="store_true", help="only the catalogue's smoke entries")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2, help="bugs run side by side")
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not first run the suite against the unmodified copy")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def chosen(catalogue: Catalogue, names: Sequence[str], smoke: bool) -> list[Mutant]:
    wanted = set(names) | (set(catalogue.SMOKE) if smoke else set())
    unknown = wanted - {b.name for b in catalogue.BUGS}
    if unknown:
        raise SystemExit(f"unknown bugs: {', '.join(sorted(unknown))}")
    return [b for b in catalogue.BUGS if not wanted or b.name in wanted]


def main(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.suite)
    bugs = chosen(catalogue, args.bugs or (), args.smoke)
    if args.list:
        for bug in bugs:
            print(f"{bug.name:40} {bug.file:34} {bug.description}")
        return 0

    def show(outcome: Outcome) -> None:
        if not args.json:
            verdict = f"caught by {outcome.caught_by}" if outcome.caught else "MISSED"
            print(f"{outcome.bug:40} {outcome.seconds:6.1f}s  {verdict}", flush=True)

    try:
        outcomes = measure(args.suite, bugs, args.workers, not args.skip_baseline, show)
    except BaselineFails as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    equivalent = {b.name for b in bugs if b.equivalent}
    caught = sum(o.caught for o in outcomes)
    missed = [o.bug for o in outcomes if not o.caught and o.bug not in equivalent]
    argued = [o.bug for o in outcomes if not o.caught and o.bug in equivalent]
    refuted = [o.bug for o in outcomes if o.caught and o.bug in equivalent]
    real = [o for o in outcomes if o.bug not in equivalent]
    caught_real = sum(o.caught for o in real)
    if args.json:
        print(json.dumps({"suite": args.suite, "caught": caught, "planted": len(outcomes), "missed": missed,
                          "not_equivalent": len(real), "caught_not_equivalent": caught_real,
                          "equivalent": argued, "caught_though_argued_equivalent": refuted,
                          "bugs": [asdict(o) | {"description": b.description, "file": b.file,
                                                "equivalent": b.equivalent} for o, b in zip(outcomes, bugs)]},
                         indent=2))
    else:
        print(f"\n{args.suite}: caught {caught} of {len(outcomes)} planted bugs "
              f"({caught / len(outcomes):.0%}); of the {len(real)} not argued equivalent, "
              f"{caught_real} ({caught_real / max(1, len(real)):.0%}); "
              f"missed: {', '.join(missed) or 'none'}; argued equivalent (docs/conformance.md): "
              f"{', '.join(argued) or 'none'}"
              + (f"; caught though argued equivalent: {', '.join(refuted)}" if refuted else ""))
    return 0 if not missed else 1
