"""The runner's contract, on a small in-memory suite: outcomes, exit codes and reports."""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

import pytest

from conformance import runner
from fake_suite import RunFake, fake_suite  # noqa: F401 - fake_suite is a fixture
from conformance.framework import Case, CaseContext, Level, CaseOutcome, Verdict



def passes(target: Any, ctx: CaseContext) -> Verdict:
    ctx.wirelog.record("peer->impl", b"\x00\x01")
    return Verdict(True, "x", "x")


def fails(target: Any, ctx: CaseContext) -> Verdict:
    return Verdict(False, "credit", "nothing")


def hangs(target: Any, ctx: CaseContext) -> Verdict:
    while True:
        ctx.remaining()
        time.sleep(0.01)


def raises(target: Any, ctx: CaseContext) -> Verdict:
    raise RuntimeError("boom")


CASES = [
    Case("fake/a/pass", Level.MUST, "writer", "passes", passes),
    Case("fake/a/should", Level.SHOULD, "writer", "a SHOULD that is violated", fails),
    Case("fake/b/info", Level.INFO, "reader", "describes", fails),
    Case("fake/b/must-fail", Level.MUST, "reader", "a MUST that is violated", fails),
    Case("fake/c/hang", Level.MUST, "reader", "hangs", hangs),
    Case("fake/c/raise", Level.MUST, "writer", "raises", raises),
    Case("fake/d/needs", Level.MUST, "writer", "needs a capability", passes, frozenset({"reader"})),
]


def test_outcomes_follow_levels_and_reports_are_written(fake_suite: Callable[..., RunFake], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_suite(CASES)
    code = run("--timeout", "0.3", "--json-report", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"))
    assert code == runner.EXIT_FAILED
    report = json.loads((tmp_path / "r.json").read_text())
    outcomes = {c["id"]: c["outcome"] for c in report["cases"]}
    assert outcomes == {
        "fake/a/pass": "PASS", "fake/a/should": "NON_STRICT", "fake/b/info": "INFO",
        "fake/b/must-fail": "FAIL", "fake/c/hang": "TIMEOUT", "fake/c/raise": "FAIL",
        "fake/d/needs": "UNSUPPORTED",
    }
    assert set(report) == {"suite", "target", "cases", "root_causes", "summary"}
    first = report["cases"][0]
    assert set(first) == {"id", "level", "role", "outcome", "requirement", "spec_ref", "expected", "actual",
                          "awaited", "root_cause", "dependents", "duration_ms", "wirelog"}
    assert first["wirelog"][0]["hex"] == "0001" and first["wirelog"][0]["dir"] == "peer->impl"
    assert first["wirelog"][0]["summary"] == "bytes (not decoded)"  # no frame codec for this suite
    assert report["summary"]["FAIL"] == 2 and report["summary"]["total"] == 7
    suites = {s.get("name"): s for s in ET.parse(tmp_path / "r.xml").getroot()}
    assert set(suites) == {"fake/a", "fake/b", "fake/c", "fake/d"}
    assert suites["fake/c"].get("failures") == "2" and suites["fake/d"].get("skipped") == "1"
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("PASS=1 NON_STRICT=1 FAIL=2")


def test_should_violation_passes_unless_strict(fake_suite: Callable[..., RunFake]) -> None:
    run = fake_suite(CASES)
    assert run("--case", "fake/a/") == runner.EXIT_OK
    assert run("--case", "fake/a/", "--strict") == runner.EXIT_FAILED


def test_nothing_matched_or_nothing_supported_is_a_distinct_exit(fake_suite: Callable[..., RunFake]) -> None:
    run = fake_suite(CASES)
    assert run("--case", "nosuch") == runner.EXIT_NO_CASE
    assert run("--case", "fake/d/") == runner.EXIT_NO_CASE
    assert run("--role", "reader", "--case", "fake/b/info") == runner.EXIT_OK


def test_unknown_role_is_a_usage_error(fake_suite: Callable[..., RunFake]) -> None:
    run = fake_suite(CASES)
    assert run("--role", "observer") == 2


def test_judge_maps_levels() -> None:
    case = CASES[0]
    assert runner.judge(case, Verdict(True, "", "")) is CaseOutcome.PASS
    assert runner.judge(CASES[1], Verdict(False, "", "")) is CaseOutcome.NON_STRICT
    assert runner.judge(CASES[2], Verdict(True, "", "")) is CaseOutcome.INFO
