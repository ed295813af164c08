"""The sensitivity command plants bugs in a copy and the unmodified suites catch them (full run: ``make sensitivity``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conformance.mutation import ROOT, check_catalogue
from conformance.sensitivity import load_catalogue

SUITES = ("shuffle", "sync", "cluster")


@pytest.mark.parametrize("suite", SUITES)
def test_every_planted_bug_applies_to_the_current_code(suite: str) -> None:
    """Fails when a snippet moved or changed: rewrite that catalogue entry against the new code."""
    catalogue = load_catalogue(suite)
    check_catalogue(ROOT, catalogue.BUGS)
    assert len({b.name for b in catalogue.BUGS}) == len(catalogue.BUGS), "names are unique"
    assert len(catalogue.BUGS) >= 25
    assert len(catalogue.SMOKE) >= 2


@pytest.mark.parametrize("suite", SUITES)
def test_the_smoke_bugs_are_caught_through_the_command_and_the_tree_is_left_alone(suite: str) -> None:
    catalogue = load_catalogue(suite)
    before = {b.file: (ROOT / b.file).read_bytes() for b in catalogue.BUGS}
    bugs = [arg for name in catalogue.SMOKE for arg in ("--bug", name)]
    done = subprocess.run([sys.executable, "-m", "conformance", "sensitivity", "--suite", suite, "--skip-baseline",
                           "--json", *bugs], cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    report = json.loads(done.stdout)
    assert sorted(b["bug"] for b in report["bugs"]) == sorted(catalogue.SMOKE)
    assert report["missed"] == [], report
    assert all(b["caught_by"] and not b["caught_by"].startswith("target-unreachable") for b in report["bugs"])
    assert done.returncode == 0, done.stderr
    assert {f: (ROOT / f).read_bytes() for f in before} == before
