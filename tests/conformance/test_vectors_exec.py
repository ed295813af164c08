"""``vectors --target exec:`` for the shuffle: the machine traces driven through the exec trace
contract, with the roles and ``traces`` capability the program declares."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from conformance.shuffle.vector_traces import VECTOR_FILE

ROOT = Path(__file__).resolve().parents[2]
BROKEN = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('broken_trace_driver.py')))}"


def vectors(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", "vectors", "--suite", "shuffle", "--target", target],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def summary(stdout: str) -> dict[str, tuple[int, int, int]]:
    """Per group: (passed, failed, unsupported), from the summary the command prints."""
    out = {}
    for match in re.finditer(r"^(\S+) +(\d+) passed +(\d+) failed(?: +(\d+) unsupported)?$", stdout, re.M):
        out[match[1]] = (int(match[2]), int(match[3]), int(match[4] or 0))
    return out


def traces_by_role() -> dict[str, int]:
    tests = json.loads(VECTOR_FILE.read_text())["tests"]
    return {role: sum(t["role"] == role for t in tests) for role in ("writer", "reader")}


def test_the_spec_machines_pass_every_trace_through_exec() -> None:
    done = vectors(f"exec:{sys.executable} -m conformance.shuffle.machines_target")
    assert done.returncode == 0, done.stdout + done.stderr
    counts, groups = traces_by_role(), summary(done.stdout)
    assert groups["traces/reader"] == (counts["reader"], 0, 0) and groups["traces/writer"] == (counts["writer"], 0, 0)
    wire = [g for name, g in groups.items() if not name.startswith("traces/")]
    assert wire and all(passed == failed == 0 and unsupported > 0 for passed, failed, unsupported in wire)


def test_a_driver_without_credits_fails_reader_traces_and_skips_undeclared_writer_ones() -> None:
    done = vectors(BROKEN)
    assert done.returncode == 1, done.stdout + done.stderr
    counts, groups = traces_by_role(), summary(done.stdout)
    assert groups["traces/writer"] == (0, 0, counts["writer"])
    assert groups["traces/reader"][1] > 0
    failures = [line for line in done.stdout.splitlines() if line.startswith("FAIL traces/reader")]
    assert failures and all("CREDIT_CONTROL_MESSAGE" in line for line in failures)
