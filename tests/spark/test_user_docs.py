"""docs/pyspark.md runs as written: its sync server command, then its Python blocks, in order, as one
script outside the repository, and prints nothing on stderr but Spark's start-up lines."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from spark_session import console_beyond_start_up

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 900.0
DOC_LOCATION = "grpc://127.0.0.1:47470"
DOC_DIR = "/tmp/streamwire-doc"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def serve_command(markdown: str) -> list[str]:
    """The guide's ``sh`` command that starts the sync server, as arguments."""
    (block,) = [b for b in re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.S | re.M) if "reference.sync serve" in b]
    return shlex.split(block.replace("\\\n", " "))


def test_every_python_block_of_the_guide_runs_against_its_server_command(tmp_path: Path) -> None:
    guide = (REPO / "docs" / "pyspark.md").read_text()
    blocks = python_blocks(guide)
    assert len(blocks) >= 6
    script = "\n".join(blocks)
    assert DOC_LOCATION in script and DOC_DIR in script
    command = serve_command(guide)
    assert command[:4] == ["python", "-m", "reference.sync", "serve"] and "--port" in command
    command[command.index("--port") + 1] = "0"  # a free port, not 47470
    argv = [sys.executable] + [a.replace(DOC_DIR, str(tmp_path)) for a in command[1:]]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON",)}
    env["PYTHONPATH"] = str(REPO)  # as `pip install -e .` would make it importable
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert server.stdout is not None
        listening = server.stdout.readline().split()
        assert listening[:1] == ["LISTENING"], listening
        path = tmp_path / "guide.py"
        path.write_text(script.replace(DOC_LOCATION, f"grpc://127.0.0.1:{listening[1]}").replace(DOC_DIR, str(tmp_path)))
        done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)
        assert done.returncode == 0, done.stderr[-4000:]
        assert "Row(id=0, amount=" in done.stdout, done.stdout
        assert console_beyond_start_up(done.stderr) == [], done.stderr[-4000:]  # no INFO, WARN, ERROR, traceback
    finally:
        server.terminate()
        server.wait(30)
