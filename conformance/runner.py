"""``python -m conformance run``: execute a suite's cases against a target and report.

Exit codes: 0 when at least one case ran and no MUST case failed or timed out (and, with
``--strict``, no SHOULD case was violated); 1 otherwise; 2 when the target cannot be reached (said
in one line, before any case runs); 3 when no case matched the filters or every matching case was
unsupported, so that a CI that tests nothing cannot pass by accident.
"""

from __future__ import annotations

import argparse
import importlib
import socket
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, Mapping, Sequence
from urllib.parse import urlsplit

from conformance.framework import (
    Case,
    CaseContext,
    CaseTimeout,
    Level,
    CaseOutcome,
    RunOptions,
    Suite,
    Target,
    TargetUnreachable,
    Verdict,
)
from conformance.report.cases import CaseReport, RunReport
from conformance.report.causes import root_causes
from conformance.report.html import write_html
from conformance.report.wirelog import FrameCodec, codec_for, frames
from conformance.report.writers import print_summary, write_json, write_junit
from conformance.spec_links import spec_ref
from spec.auth import AuthConfig, CipherName
from streamwire.cli import SetupRefused, one_line, read_secret

SUITES = ("shuffle", "cluster", "sync")
CONFORMANCE_APP_ID: Final = "streamwire-conformance"
"""The application id both ends of an authenticated run present."""
EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE, EXIT_NO_CASE = 0, 1, 2, 3
PROBED_SCHEMES: Final[Mapping[str, frozenset[str]]] = {
    "sync": frozenset({"grpc", "grpc+tls"}),
    "cluster": frozenset({"etcd", "tcp"}),
    "shuffle": frozenset({"tcp"}),
}
"""Per suite, targets named by a server address that is connected to before any case runs. The
probe closes before sending a byte: a shuffle writer binds a connection only by its first CREDIT,
so a conforming writer (even a one-shot one) does not count it as a reader."""
PROBE_TIMEOUT_S: Final = 5.0


def load_suite(name: str) -> Suite:
    suite: Suite = importlib.import_module(f"conformance.{name}.suite").SUITE
    return suite


def select_cases(suite: Suite, options: RunOptions) -> list[Case]:
    prefixes = options.case_prefixes
    return [
        case for case in suite.cases
        if (options.role is None or case.role == options.role)
        and (not prefixes or any(case.id.startswith(p) for p in prefixes))
    ]


def judge(case: Case, verdict: Verdict) -> CaseOutcome:
    """Map what a check saw to an outcome according to the case's level."""
    if case.level is Level.INFO:
        return CaseOutcome.INFO
    if verdict.passed:
        return CaseOutcome.PASS
    return CaseOutcome.NON_STRICT if case.level is Level.SHOULD else CaseOutcome.FAIL


def run_case(case: Case, target: Target, options: RunOptions, codec: FrameCodec | None = None) -> CaseReport:
    """Run one check in a worker thread under the case deadline."""
    if not case.requires <= target.capabilities:
        missing = ", ".join(sorted(case.requires - target.capabilities))
        return CaseReport(case, CaseOutcome.UNSUPPORTED, case.requirement, f"target does not declare: {missing}", 0.0)
    ctx = CaseContext(options=options, deadline=time.monotonic() + options.timeout, level=case.level)
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

    def report(outcome: CaseOutcome, expected: str, actual: str) -> CaseReport:
        return CaseReport(case, outcome, expected, actual, elapsed, frames(ctx.wirelog.entries(), codec),
                          tuple(ctx.waits), tuple(ctx.blames))

    if not result:
        return report(CaseOutcome.TIMEOUT, case.requirement, f"no verdict within {options.timeout:g} s")
    outcome_or_error = result[0]
    if isinstance(outcome_or_error, CaseTimeout):
        return report(CaseOutcome.TIMEOUT, case.requirement, f"{outcome_or_error} ({options.timeout:g} s)")
    if isinstance(outcome_or_error, BaseException):
        text = "".join(traceback.format_exception_only(type(outcome_or_error), outcome_or_error)).strip()
        return report(CaseOutcome.FAIL, case.requirement, f"check raised: {text}")
    verdict = outcome_or_error
    return report(judge(case, verdict), verdict.expected, verdict.actual)


def is_failure(report: CaseReport, strict: bool) -> bool:
    if report.outcome is CaseOutcome.FAIL:
        return True
    if report.outcome is CaseOutcome.TIMEOUT:
        return report.case.level is Level.MUST or strict
    return strict and report.outcome is CaseOutcome.NON_STRICT


def probe(suite: str, target: str) -> None:
    """Raise :class:`TargetUnreachable` if ``target`` names a server address nothing listens on."""
    parts = urlsplit(target)
    if parts.scheme not in PROBED_SCHEMES.get(suite, frozenset()):
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise TargetUnreachable(f"bad address {target!r}: {exc}") from None
    if host is None or port is None:
        raise TargetUnreachable(f"{target!r} names no host:port")
    try:
        socket.create_connection((host, port), PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise TargetUnreachable(f"cannot connect to {target}: {exc.strerror or exc}") from None


def check_jobs(suite: Suite, options: RunOptions) -> None:
    """Raise ValueError when ``options.jobs`` asks for cases at once against a target whose cases are not independent."""
    if options.jobs > 1 and not suite.independent_cases(options.target):
        raise ValueError(f"{options.target} runs one {suite.name} case at a time (its cases share a process or a server)")


def run_cases(suite: Suite, cases: Sequence[Case], options: RunOptions, verbose: bool = True) -> RunReport:
    """Open the target, run ``cases`` (``options.jobs`` at once) and group their failures by root cause.

    Raises :class:`TargetUnreachable` (before any case) when the target cannot be reached, ValueError when
    ``options.jobs`` asks for cases at once against a target whose cases are not independent.
    """
    probe(suite.name, options.target)
    check_jobs(suite, options)
    codec = codec_for(suite.name)
    try:
        opened = suite.open_target(options)
        target = opened.__enter__()
    except TargetUnreachable:
        raise
    except Exception as exc:  # whatever stops the target from starting is the one-line reason
        raise TargetUnreachable(f"cannot open target {options.target}: {one_line(exc, whole=True)}") from None
    try:
        reports = run_each(cases, target, options, codec, verbose)
        description = target.description
    finally:
        opened.__exit__(None, None, None)
    return RunReport(suite.name, description, reports, root_causes(reports))


def run_each(cases: Sequence[Case], target: Target, options: RunOptions, codec: FrameCodec | None,
             verbose: bool) -> list[CaseReport]:
    """Each case's report, in the order of ``cases``: ``options.jobs`` of them run at once, started in that order
    (each case's deadline counts from its own start), and the progress lines come in that order too."""
    pool = ThreadPoolExecutor(options.jobs, thread_name_prefix="cases")
    try:
        started = [pool.submit(run_case, case, target, options, codec) for case in cases]
        reports: list[CaseReport] = []
        for index, (case, future) in enumerate(zip(cases, started), 1):
            report = future.result()
            reports.append(report)
            if verbose:
                print(f"[{index}/{len(cases)}] {report.outcome.value:<11} {case.id} "
                      f"({report.duration_ms:.0f} ms)", flush=True)
        return reports
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # an interrupted run starts no further case


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _capabilities(text: str) -> frozenset[str]:
    return frozenset(c.strip() for c in text.split(",") if c.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, choices=SUITES)
    parser.add_argument("--target", default="reference",
                        help="implementation under test (suite-specific; see --list)")
    parser.add_argument("--role", help="only cases for this role under test")
    parser.add_argument("--case", dest="case_prefixes", action="append", metavar="PREFIX",
                        help="only cases whose id starts with this (repeatable: any of them)")
    parser.add_argument("--capabilities", type=_capabilities, metavar="CAP,CAP",
                        help="what the target can do, declared instead of inferred (sync: store,restart)")
    parser.add_argument("--strict", action="store_true", help="SHOULD violations fail the run")
    parser.add_argument("--list", action="store_true", help="list the matching cases and exit")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-case timeout in seconds")
    parser.add_argument("--jobs", type=_positive, default=1, metavar="N",
                        help="run N cases at once, where the target's cases are independent (shuffle: reference "
                        "and exec:, a program per case); reports keep the catalogue's order")
    parser.add_argument("--junit", type=Path, help="write JUnit XML here")
    parser.add_argument("--json-report", type=Path, help="write the JSON report here")
    parser.add_argument("--html", type=Path, help="write the self-contained HTML report here")
    parser.add_argument("--secret-file", type=Path, help="shuffle: authenticate every connection with Spark's "
                        "AuthEngine and this file's secret (spark.authenticate), then encrypt it")
    parser.add_argument("--cipher", choices=("ctr", "gcm"), default="ctr",
                        help="with --secret-file: AES-CTR (Spark's default) or AES-GCM")
    parser.add_argument("--auth-engine-version", type=int, choices=(1, 2), default=1,
                        help="with --secret-file: spark.network.crypto.authEngineVersion")


def main(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    if args.role is not None and args.role not in suite.roles:
        print(f"error: --role must be one of {', '.join(suite.roles)}", file=sys.stderr)
        return 2
    auth = None
    if args.secret_file is not None:
        try:
            secret = read_secret(args.secret_file, "--secret-file")
        except SetupRefused as refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
        auth = AuthConfig(secret.encode(), CONFORMANCE_APP_ID, CipherName.parse(args.cipher), args.auth_engine_version)
    options = RunOptions(suite=args.suite, target=args.target, role=args.role,
                         case_prefixes=tuple(args.case_prefixes or ()), strict=args.strict, timeout=args.timeout,
                         capabilities=args.capabilities, auth=auth, jobs=args.jobs)
    try:
        check_jobs(suite, options)
    except ValueError as refused:
        print(f"error: --jobs: {refused}", file=sys.stderr)
        return 2
    cases = select_cases(suite, options)
    if args.list:
        for case in cases:
            print(f"{case.id}\t{case.level.value}\t{case.role}\t{case.requirement}\t{spec_ref(suite.name, case) or '-'}")
        print(f"targets: {suite.target_help}")
        return EXIT_OK if cases else EXIT_NO_CASE
    if not cases:
        print(f"error: no {args.suite} case matches role={args.role} case={args.case_prefixes}", file=sys.stderr)
        return EXIT_NO_CASE
    try:
        run = run_cases(suite, cases, options)
    except TargetUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json_report:
        write_json(args.json_report, run)
    if args.junit:
        write_junit(args.junit, run)
    if args.html:
        write_html(args.html, run)
    print_summary(sys.stdout, run)
    if any(is_failure(r, args.strict) for r in run.cases):
        return EXIT_FAILED
    if all(r.outcome is CaseOutcome.UNSUPPORTED for r in run.cases):
        print(f"error: every selected case is unsupported by {run.target}: nothing was tested", file=sys.stderr)
        return EXIT_NO_CASE
    return EXIT_OK
