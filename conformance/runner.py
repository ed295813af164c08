"""``python -m conformance run``: execute a suite's cases against a target and report.

Exit codes: 0 when at least one case ran and no MUST case failed or timed out (and, with
``--strict``, no SHOULD case was violated); 1 otherwise; 3 when no case matched the filters or
every matching case was unsupported, so that a CI that tests nothing cannot pass by accident.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

from conformance.framework import (
    Case,
    CaseContext,
    CaseTimeout,
    Level,
    Outcome,
    RunOptions,
    Suite,
    Target,
    Verdict,
)

SUITES = ("shuffle", "cluster", "sync")
EXIT_OK, EXIT_FAILED, EXIT_NO_CASE = 0, 1, 3


@dataclass(frozen=True, slots=True)
class CaseReport:
    case: Case
    outcome: Outcome
    expected: str
    actual: str
    duration_ms: float
    wirelog: list[dict[str, object]]

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.case.id, "level": self.case.level.value, "role": self.case.role,
            "outcome": self.outcome.value, "requirement": self.case.requirement,
            "expected": self.expected, "actual": self.actual,
            "duration_ms": round(self.duration_ms, 3), "wirelog": self.wirelog,
        }


def load_suite(name: str) -> Suite:
    suite: Suite = importlib.import_module(f"conformance.suites.{name}").SUITE
    return suite


def select_cases(suite: Suite, options: RunOptions) -> list[Case]:
    return [
        case for case in suite.cases
        if (options.role is None or case.role == options.role)
        and (options.case_prefix is None or case.id.startswith(options.case_prefix))
    ]


def judge(case: Case, verdict: Verdict) -> Outcome:
    """Map what a check saw to an outcome according to the case's level."""
    if case.level is Level.INFO:
        return Outcome.INFO
    if verdict.passed:
        return Outcome.PASS
    return Outcome.NON_STRICT if case.level is Level.SHOULD else Outcome.FAIL


def run_case(case: Case, target: Target, options: RunOptions) -> CaseReport:
    """Run one check in a worker thread under the case deadline."""
    if not case.requires <= target.capabilities:
        missing = ", ".join(sorted(case.requires - target.capabilities))
        return CaseReport(case, Outcome.UNSUPPORTED, case.requirement,
                          f"target does not declare: {missing}", 0.0, [])
    ctx = CaseContext(options=options, deadline=time.monotonic() + options.timeout)
    result: list[Verdict | BaseException] = []

    def work() -> None:
        try:
            result.append(case.check(target, ctx))
        except BaseException as exc:  # reported as the case's outcome, never swallowed
            result.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=work, name=f"case {case.id}", daemon=True)
    worker.start()
    worker.join(options.timeout + 5.0)
    elapsed = (time.monotonic() - started) * 1000
    if not result:
        return CaseReport(case, Outcome.TIMEOUT, case.requirement,
                          f"no verdict within {options.timeout:g} s", elapsed, ctx.wirelog.entries())
    outcome_or_error = result[0]
    if isinstance(outcome_or_error, CaseTimeout):
        return CaseReport(case, Outcome.TIMEOUT, case.requirement, str(outcome_or_error),
                          elapsed, ctx.wirelog.entries())
    if isinstance(outcome_or_error, BaseException):
        text = "".join(traceback.format_exception_only(type(outcome_or_error), outcome_or_error)).strip()
        return CaseReport(case, Outcome.FAIL, case.requirement, f"check raised: {text}",
                          elapsed, ctx.wirelog.entries())
    verdict = outcome_or_error
    return CaseReport(case, judge(case, verdict), verdict.expected, verdict.actual,
                      elapsed, ctx.wirelog.entries())


def is_failure(report: CaseReport, strict: bool) -> bool:
    if report.outcome is Outcome.FAIL:
        return True
    if report.outcome is Outcome.TIMEOUT:
        return report.case.level is Level.MUST or strict
    return strict and report.outcome is Outcome.NON_STRICT


def write_junit(path: Path, suite: str, reports: Sequence[CaseReport]) -> None:
    """JUnit XML, one testsuite per topic."""
    root = ET.Element("testsuites", name=f"conformance-{suite}")
    by_topic: dict[str, list[CaseReport]] = defaultdict(list)
    for report in reports:
        by_topic[report.case.topic].append(report)
    for topic, members in by_topic.items():
        failures = sum(r.outcome in (Outcome.FAIL, Outcome.TIMEOUT) for r in members)
        skipped = sum(r.outcome is Outcome.UNSUPPORTED for r in members)
        node = ET.SubElement(root, "testsuite", name=topic, tests=str(len(members)),
                             failures=str(failures), skipped=str(skipped),
                             time=f"{sum(r.duration_ms for r in members) / 1000:.3f}")
        for r in members:
            case = ET.SubElement(node, "testcase", classname=topic, name=r.case.id,
                                 time=f"{r.duration_ms / 1000:.3f}")
            detail = f"[{r.case.level.value}] {r.case.requirement}\nexpected: {r.expected}\nactual: {r.actual}"
            if r.outcome in (Outcome.FAIL, Outcome.TIMEOUT):
                ET.SubElement(case, "failure", message=r.outcome.value).text = detail
            elif r.outcome is Outcome.UNSUPPORTED:
                ET.SubElement(case, "skipped", message=r.actual)
            else:
                ET.SubElement(case, "system-out").text = f"{r.outcome.value}\n{detail}"
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def summary_of(reports: Sequence[CaseReport]) -> dict[str, int]:
    counts = Counter(r.outcome.value for r in reports)
    return {outcome.value: counts.get(outcome.value, 0) for outcome in Outcome} | {"total": len(reports)}


def print_summary(out: TextIO, options: RunOptions, target: str, reports: Sequence[CaseReport]) -> None:
    """Human summary, printed last so it is what a terminal shows at the end."""
    out.write(f"\n== {options.suite} conformance against {target} ==\n")
    for r in reports:
        if r.outcome not in (Outcome.PASS, Outcome.INFO):
            out.write(f"{r.outcome.value:<11} {r.case.id} [{r.case.level.value}] {r.case.requirement}\n"
                      f"            expected: {r.expected}\n            actual:   {r.actual}\n")
    counts = summary_of(reports)
    out.write(" ".join(f"{k}={v}" for k, v in counts.items()) + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, choices=SUITES)
    parser.add_argument("--target", default="reference",
                        help="implementation under test (suite-specific; see --list)")
    parser.add_argument("--role", help="only cases for this role under test")
    parser.add_argument("--case", dest="case_prefix", help="only cases whose id starts with this")
    parser.add_argument("--strict", action="store_true", help="SHOULD violations fail the run")
    parser.add_argument("--list", action="store_true", help="list the matching cases and exit")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-case timeout in seconds")
    parser.add_argument("--junit", type=Path, help="write JUnit XML here")
    parser.add_argument("--json-report", type=Path, help="write the JSON report here")


def main(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    if args.role is not None and args.role not in suite.roles:
        print(f"error: --role must be one of {', '.join(suite.roles)}", file=sys.stderr)
        return 2
    options = RunOptions(suite=args.suite, target=args.target, role=args.role,
                         case_prefix=args.case_prefix, strict=args.strict, timeout=args.timeout)
    cases = select_cases(suite, options)
    if args.list:
        for case in cases:
            print(f"{case.id}\t{case.level.value}\t{case.role}\t{case.requirement}")
        print(f"targets: {suite.target_help}")
        return EXIT_OK if cases else EXIT_NO_CASE
    if not cases:
        print(f"error: no {args.suite} case matches role={args.role} case={args.case_prefix}",
              file=sys.stderr)
        return EXIT_NO_CASE
    reports: list[CaseReport] = []
    with suite.open_target(options) as target:
        for index, case in enumerate(cases, 1):
            report = run_case(case, target, options)
            reports.append(report)
            print(f"[{index}/{len(cases)}] {report.outcome.value:<11} {case.id} "
                  f"({report.duration_ms:.0f} ms)", flush=True)
        description = target.description
    if args.json_report:
        document = {"suite": args.suite, "target": description,
                    "cases": [r.to_json() for r in reports], "summary": summary_of(reports)}
        args.json_report.write_text(json.dumps(document, indent=2) + "\n")
    if args.junit:
        write_junit(args.junit, args.suite, reports)
    print_summary(sys.stdout, options, description, reports)
    if any(is_failure(r, args.strict) for r in reports):
        return EXIT_FAILED
    if all(r.outcome is Outcome.UNSUPPORTED for r in reports):
        print(f"error: every selected case is unsupported by {description}: nothing was tested",
              file=sys.stderr)
        return EXIT_NO_CASE
    return EXIT_OK
