"""A pytest plugin, so an implementation's own CI runs the conformance suite as pytest tests.

``pytest --streamwire-suite shuffle --streamwire-target exec:./impl`` collects one test per case
(named by the case id), marked with its level (``must``, ``should``, ``info``), so ``-m must``
selects the MUST cases. A MUST case that fails or times out fails its test with the one-line
report (what was awaited, expected vs actual); a violated SHOULD is an expected failure (xfail)
unless ``--streamwire-strict``; an UNSUPPORTED case is skipped with the capability it lacks. The
target is opened once for the session; one that cannot be reached stops pytest before any case
runs. The terminal summary groups failures under their root cause, as ``python -m conformance
run`` does. Registered through the ``pytest11`` entry point; without ``--streamwire-suite`` it does
nothing (the heavy imports happen only then).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conformance.framework import Case, RunOptions, Suite, Target
    from conformance.report.cases import CaseReport

LEVEL_MARKERS = {"MUST": "must", "SHOULD": "should", "INFO": "info"}
REPORTS_KEY = pytest.StashKey[list["CaseReport"]]()
RUN_KEY = pytest.StashKey["_Run"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamwire", "streamwire conformance suite")
    group.addoption("--streamwire-suite", choices=("shuffle", "sync", "cluster"),
                    help="run this conformance suite's cases as tests")
    group.addoption("--streamwire-target", default="reference", help="implementation under test (as for run)")
    group.addoption("--streamwire-role", help="only cases for this role under test")
    group.addoption("--streamwire-case", action="append", default=[], metavar="PREFIX",
                    help="only cases whose id starts with this (repeatable)")
    group.addoption("--streamwire-timeout", type=float, default=30.0, help="per-case timeout in seconds")
    group.addoption("--streamwire-strict", action="store_true", help="a violated SHOULD fails its test")


def pytest_configure(config: pytest.Config) -> None:
    for level, marker in LEVEL_MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: a streamwire conformance case of level {level}")


class _Run:
    """The suite, the options and the target, opened on first use and closed at the session's end."""

    def __init__(self, suite: Suite, options: RunOptions) -> None:
        self.suite, self.options = suite, options
        self._opened: AbstractContextManager[Target] | None = None
        self._target: Target | None = None

    def target(self) -> Target:
        if self._target is None:
            from conformance.framework import TargetUnreachable
            from conformance.runner import probe

            try:
                probe(self.suite.name, self.options.target)
                self._opened = self.suite.open_target(self.options)
                self._target = self._opened.__enter__()
            except TargetUnreachable as exc:
                pytest.exit(f"streamwire: {exc}", returncode=2)
            except Exception as exc:  # whatever stops the target from starting ends the session in one line
                pytest.exit(f"streamwire: cannot open target {self.options.target}: {exc}", returncode=2)
        return self._target

    def close(self) -> None:
        if self._opened is not None:
            self._opened.__exit__(None, None, None)


class SuiteCollector(pytest.Collector):
    """The parent of a suite's case items, so their ids read ``streamwire-<suite>::<case id>``."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        return []  # the items are made by pytest_collection_modifyitems, from the options


class CaseItem(pytest.Item):
    """One conformance case as a pytest test."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.add_marker(LEVEL_MARKERS[case.level.value])

    def runtest(self) -> None:
        from conformance.framework import CaseOutcome
        from conformance.report.wirelog import codec_for
        from conformance.runner import run_case

        run = self.config.stash[RUN_KEY]
        report = run_case(self.case, run.target(), run.options, codec_for(run.suite.name))
        self.config.stash[REPORTS_KEY].append(report)
        if report.outcome is CaseOutcome.UNSUPPORTED:
            pytest.skip(report.actual)
        if report.outcome is CaseOutcome.NON_STRICT and not run.options.strict:
            pytest.xfail(f"SHOULD not met: {report.headline()}")
        if report.outcome in (CaseOutcome.FAIL, CaseOutcome.TIMEOUT, CaseOutcome.NON_STRICT):
            raise CaseFailed(report)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.describe()
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return f"streamwire {self.case.id}", None, f"[{self.case.level.value}] {self.case.requirement}"


class CaseFailed(Exception):
    """A case's requirement was not met; carries its report."""

    def __init__(self, report: CaseReport) -> None:
        super().__init__(report.headline())
        self.report = report

    def describe(self) -> str:
        r = self.report
        lines = [f"{r.outcome.value} [{r.case.level.value}] {r.case.requirement}", f"expected: {r.expected}",
                 f"actual:   {r.actual}", *map(str, r.waits), *(f"on the wire: {p}" for p in r.wire_problems()[:3])]
        return "\n".join(lines)


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m and -k deselect, so they apply to the cases too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    suite_name = config.getoption("--streamwire-suite")
    if not suite_name:
        return
    from conformance.framework import RunOptions
    from conformance.runner import load_suite, select_cases

    options = RunOptions(suite=suite_name, target=config.getoption("--streamwire-target"),
                         role=config.getoption("--streamwire-role"),
                         case_prefixes=tuple(config.getoption("--streamwire-case")),
                         strict=config.getoption("--streamwire-strict"),
                         timeout=config.getoption("--streamwire-timeout"))
    suite = load_suite(suite_name)
    config.stash[RUN_KEY] = _Run(suite, options)
    config.stash[REPORTS_KEY] = []
    collector = SuiteCollector.from_parent(session, name=f"streamwire-{suite_name}", nodeid=f"streamwire-{suite_name}")
    cases: list[pytest.Item | pytest.Collector] = [
        CaseItem.from_parent(collector, name=case.id, case=case) for case in select_cases(suite, options)]
    if not cases:
        raise pytest.UsageError(f"no {suite_name} case matches role={options.role} case={list(options.case_prefixes)}")
    items.extend(item for item in cases if isinstance(item, pytest.Item))
    session.testscollected += len(cases)
    config.hook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, cases))


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(RUN_KEY, None)
    if run is not None:
        run.close()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    reports = config.stash.get(REPORTS_KEY, None)
    if not reports:
        return
    from conformance.report.causes import root_causes

    root_of = root_causes(reports)
    roots = [r for r in reports if r.failed and r.case.id not in root_of]
    if not roots:
        return
    terminalreporter.section("streamwire root causes")
    for root in roots:
        dependents = [case_id for case_id, of in root_of.items() if of == root.case.id]
        terminalreporter.write_line(f"root cause: {root.case.id}; {len(dependents)} dependent case"
                                    f"{'' if len(dependents) == 1 else 's'}: {root.headline()}")
        for case_id in dependents:
            terminalreporter.write_line(f"    follows: {case_id}")
