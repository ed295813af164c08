"""A sync target declares what it can do (``--capabilities``): cases needing anything else are
UNSUPPORTED, never run and never inferred from a failure."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.runner import EXIT_OK
from conformance.sync.suite import REFERENCE_CMD

ROOT = Path(__file__).resolve().parents[2]


DECLARING = (f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('sync_declares_capabilities.py')))}"
             " serve --store {store} --max-replication-lag-s 0")


@pytest.mark.parametrize("target, flags", [(f"exec:{REFERENCE_CMD}", ["--capabilities", "store"]),
                                           (f"exec:{DECLARING}", [])], ids=["--capabilities", "from-the-program"])
def test_a_sync_target_without_restart_declares_so(tmp_path: Path, target: str, flags: list[str]) -> None:
    report = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--suite", "sync", "--target", target, *flags,
         "--case", "restart/", "--case", "probe/empty", "--json-report", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    outcomes = {c["id"]: (c["outcome"], c["actual"]) for c in json.loads(report.read_text())["cases"]}
    assert outcomes["probe/empty-numbers"][0] == "PASS"
    restarts = {i: o for i, o in outcomes.items() if i.startswith("restart/")}
    assert restarts and all(o == ("UNSUPPORTED", "target does not declare: restart") for o in restarts.values())
