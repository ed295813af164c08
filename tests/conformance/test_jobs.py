"""``run --jobs N``: independent cases run N at a time, their reports and progress lines in the catalogue's
order whatever order they end in; a target whose cases share a process or a server refuses it before any case."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from conformance import runner
from conformance.framework import Case, CaseContext, Level, Verdict
from fake_suite import RunFake, fake_suite  # noqa: F401 - fake_suite is a fixture

ROOT = Path(__file__).resolve().parents[2]


def paired_cases() -> list[Case]:
    """Four cases, each passing only while another runs (a barrier of two); the first of each pair ends after the
    second, so they end out of the catalogue's order."""
    barrier = threading.Barrier(2)
    second_ended = [threading.Event(), threading.Event()]

    def check(pair: int, first: bool) -> Callable[[Any, CaseContext], Verdict]:
        def met(target: Any, ctx: CaseContext) -> Verdict:
            try:
                barrier.wait(ctx.remaining())
            except threading.BrokenBarrierError:
                return Verdict(False, "another case running at once", "ran alone")
            if first:
                second_ended[pair].wait(ctx.remaining())
            else:
                second_ended[pair].set()
            return Verdict(True, "another case running at once", "met one")
        return met

    return [Case(f"fake/pair{pair}/{name}", Level.MUST, "writer", "meets another case", check(pair, name == "first"))
            for pair in (0, 1) for name in ("first", "second")]


def test_independent_cases_run_two_at_a_time_and_report_in_catalogue_order(
        fake_suite: Callable[..., RunFake], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = paired_cases()
    run = fake_suite(cases, independent=True)
    assert run("--jobs", "2", "--timeout", "60", "--json-report", str(tmp_path / "r.json")) == runner.EXIT_OK
    ids = [case.id for case in cases]
    assert [(c["id"], c["outcome"]) for c in json.loads((tmp_path / "r.json").read_text())["cases"]] == [
        (i, "PASS") for i in ids]
    progress = [line.split()[2] for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert progress == ids


def test_one_at_a_time_is_the_default(fake_suite: Callable[..., RunFake], tmp_path: Path) -> None:
    """A pair one after another: the first waits for a partner that never comes (its deadline ends the wait)."""
    run = fake_suite(paired_cases()[:2], independent=True)
    assert run("--timeout", "0.5", "--json-report", str(tmp_path / "r.json")) == runner.EXIT_FAILED
    first = json.loads((tmp_path / "r.json").read_text())["cases"][0]
    assert (first["id"], first["outcome"], first["actual"]) == ("fake/pair0/first", "FAIL", "ran alone")


def test_jobs_against_a_target_whose_cases_share_a_process_is_refused(
        fake_suite: Callable[..., RunFake], capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_suite(paired_cases())
    assert run("--jobs", "2") == 2
    assert capsys.readouterr().err == ("error: --jobs: reference runs one fake case at a time (its cases share a "
                                       "process or a server)\n")


@pytest.mark.parametrize("target", ["spark-jvm", "tcp://127.0.0.1:9"])
def test_the_shuffle_suite_runs_one_case_at_a_time_against_one_jvm_or_one_writer(target: str) -> None:
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--suite", "shuffle", "--target", target,
                           "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.startswith(f"error: --jobs: {target} runs one shuffle case at a time")

