"""The ``streamwire`` command line as a shell user meets it: one line and exit 2 for bad arguments or
setup, quiet on a closed pipe, defaults in ``--help``, no temp dir left (the extras:
test_user_extras.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 600.0

def streamwire(tmp_path: Path, *args: str, shell_tail: str = "") -> subprocess.CompletedProcess[str]:
    """Run the console script's ``main`` with TMPDIR inside ``tmp_path`` (to see what it leaves)."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(temp), PYTHONPATH=str(REPO), COLUMNS="200")  # help on one line per option
    code = "import sys; from streamwire.__main__ import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, *args]
    if shell_tail:
        command = " ".join(f"'{a}'" for a in argv) + f" {shell_tail}"
        return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=HANG_GUARD_S)
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)


def assert_one_line_setup_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for text in expected:
        assert text in lines[0]


@pytest.mark.parametrize(("target", "expected"), [
    ("exec:./missing", "cannot start './missing'"),
    ("bogus", "unknown shuffle target 'bogus'"),
])
def test_a_conformance_target_that_cannot_run_is_one_line(tmp_path: Path, target: str, expected: str) -> None:
    done = streamwire(tmp_path, "conformance", "run", "--suite", "shuffle", "--target", target)
    assert_one_line_setup_error(done, expected)


def test_bad_arguments_exit_2_in_one_line(tmp_path: Path) -> None:
    assert_one_line_setup_error(streamwire(tmp_path, "codec", "decode", "--frame", "zz"), "INVALID_HEX")
    done = streamwire(tmp_path, "pipeline", "--writers", "many")
    assert done.returncode == 2 and "invalid int value: 'many'" in done.stderr and "Traceback" not in done.stderr


def test_a_closed_pipe_ends_a_listing_quietly(tmp_path: Path) -> None:
    done = streamwire(tmp_path, "conformance", "run", "--suite", "shuffle", "--list", shell_tail="| head -1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("shuffle/") and len(done.stdout.splitlines()) == 1
    assert done.stderr == ""


def test_help_shows_the_defaults(tmp_path: Path) -> None:
    pipeline = streamwire(tmp_path, "pipeline", "--help").stdout
    assert "(default: 40000)" in pipeline and "(default: memory)" in pipeline
    assert "--keep" in pipeline and "(default: None)" not in pipeline
    serve = streamwire(tmp_path, "sync", "serve", "--help").stdout
    assert "default: 127.0.0.1" in serve
    run = streamwire(tmp_path, "conformance", "run", "--help").stdout
    assert "(default: reference)" in run


def test_a_pipeline_that_cannot_start_says_why_in_one_line_and_leaves_no_temp_dir(tmp_path: Path) -> None:
    done = streamwire(tmp_path, "pipeline", "--provider", "zk://x", "--changes", "100")
    assert_one_line_setup_error(done, "pipeline: could not start: ValueError: spark.streamwire.cluster.provider",
                                "got scheme 'zk'")
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.spark
def test_a_pipeline_on_too_few_slots_says_the_numbers_in_one_line(tmp_path: Path) -> None:
    done = streamwire(tmp_path, "pipeline", "--master", "local[2]", "--changes", "100", "--readers", "3")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("pipeline:")]  # the JVM's start-up lines aside
    assert ours == [done.stderr.strip().splitlines()[-1]]
    assert "into 3 partitions needs 3 concurrent task slots" in ours[0] and "the cluster offers 2" in ours[0]
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("streamwire-pipeline-")]


def test_the_readmes_tool_examples_run(tmp_path: Path) -> None:
    """Every README line that needs no JVM, etcd or server of its own runs and exits 0."""
    import shlex

    lines = [line.split("#")[0].strip() for line in (REPO / "README.md").read_text().splitlines()]
    examples = [line for line in lines
                if line.startswith(".venv/bin/python -m conformance ")
                and any(f" {tool} " in line for tool in ("codec", "sync-trace"))
                or line == ".venv/bin/python -m conformance vectors --suite shuffle --target reference"]
    assert len(examples) >= 4
    for example in examples:
        argv = [sys.executable] + shlex.split(example)[1:]
        done = subprocess.run(argv, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                              text=True, timeout=HANG_GUARD_S)
        assert done.returncode == 0, f"{example}: {done.stderr}"
        assert done.stdout.strip(), example


def test_the_latency_plot_is_titled_with_the_runs_parameters() -> None:
    from reference.pipeline.report import run_title

    figures = {"run_id": "ab12", "shuffle": "streaming", "options": {
        "changes": 1000, "keys": 50, "origins": 2, "writers": 2, "readers": 3, "rate": 500.0, "chaos": True}}
    assert run_title(figures) == ("pipeline ab12: 1000 changes, 50 keys, 2 origins, 2 writers -> streaming shuffle "
                                  "-> 3 sinks, rate 500/s, chaos")


@pytest.mark.spark
def test_keep_keeps_a_passing_runs_table_and_says_where(tmp_path: Path) -> None:
    done = streamwire(tmp_path, "pipeline", "--changes", "300", "--keys", "50", "--keep")
    assert done.returncode == 0, done.stderr[-3000:]
    kept = [line for line in done.stdout.splitlines() if line.startswith("kept as asked: ")]
    assert len(kept) == 1, done.stdout
    table = Path(kept[0].split("; table ")[1])
    assert (table / "_delta_log").is_dir() and table.is_relative_to(tmp_path / "tmp")

