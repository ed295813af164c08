"""The pytest plugin: one test per case with its level as a marker, failures with their one-line
report and root causes, an unreachable target stopping pytest (exit 2), registered as a pytest11
entry point. Each run is a fresh pytest in an empty directory, the plugin loaded explicitly (entry
points off, so an installed copy cannot load twice)."""

from __future__ import annotations

import importlib
import os
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conformance.shuffle.suite import CASES

ROOT = Path(__file__).resolve().parents[2]
BROKEN = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('broken_shuffle_peers.py')))} crc32"


def pytest_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conformance.pytest_plugin", "-p", "no:cacheprovider",
                           "-q", "--rootdir", str(tmp_path), *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module = importlib.import_module(project["entry-points"]["pytest11"]["streamwire"])
    assert all(hasattr(module, hook) for hook in ("pytest_addoption", "pytest_collection_modifyitems"))


def test_one_test_per_case_marked_with_its_level(tmp_path: Path) -> None:
    done = pytest_run(tmp_path, "--streamwire-suite", "shuffle", "--collect-only")
    ids = [line for line in done.stdout.splitlines() if line.startswith("streamwire-shuffle::")]
    assert ids == [f"streamwire-shuffle::{case.id}" for case in CASES], done.stdout + done.stderr
    should = pytest_run(tmp_path, "--streamwire-suite", "shuffle", "--collect-only", "-m", "should")
    assert [line.split("::")[1] for line in should.stdout.splitlines() if line.startswith("streamwire-")] == [
        case.id for case in CASES if case.level.value == "SHOULD"]


def test_failures_carry_the_report_and_the_root_cause(tmp_path: Path) -> None:
    done = pytest_run(tmp_path, "--streamwire-suite", "shuffle", "--streamwire-target", BROKEN,
                      "--streamwire-case", "shuffle/checksum/writer-", "--streamwire-case",
                      "shuffle/data/writer-delivers", "-m", "must")
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "2 failed, 1 passed" in output
    assert "on the wire: r0: DATA seq=0 w=0 r=0 size=1500 checksum=704168938 (CRC32, not CRC32C)" in output
    assert "root cause: shuffle/checksum/writer-crc32c; 1 dependent case:" in output
    assert "    follows: shuffle/data/writer-delivers-in-order" in output


def test_an_unreachable_target_stops_pytest(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = pytest_run(tmp_path, "--streamwire-suite", "sync", "--streamwire-target", f"grpc://127.0.0.1:{port}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"streamwire: cannot connect to grpc://127.0.0.1:{port}" in done.stdout + done.stderr


def test_without_a_suite_the_plugin_adds_nothing(tmp_path: Path) -> None:
    done = pytest_run(tmp_path)
    assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, done.stdout + done.stderr
