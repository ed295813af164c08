"""docs/pyspark.md runs as written: its Python blocks, in order, as one script outside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 900.0
DOC_LOCATION = "grpc://127.0.0.1:47470"
DOC_DIR = "/tmp/streamwire-doc"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def test_every_python_block_of_the_guide_runs(tmp_path: Path) -> None:
    from reference.pipeline.syncserver import FlushSettings, SyncServerProcess

    blocks = python_blocks((REPO / "docs" / "pyspark.md").read_text())
    assert len(blocks) >= 4
    script = "\n".join(blocks)
    assert DOC_LOCATION in script and DOC_DIR in script
    server = SyncServerProcess(str(tmp_path / "store"), tmp_path / "server.log", FlushSettings(0.2))
    location = server.start()
    try:
        path = tmp_path / "guide.py"
        path.write_text(script.replace(DOC_LOCATION, location).replace(DOC_DIR, str(tmp_path)))
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON",)}
        env["PYTHONPATH"] = str(REPO)  # as `pip install -e .` would make it importable
        done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)
        assert done.returncode == 0, done.stderr[-4000:]
        assert "Row(id=0, amount=" in done.stdout, done.stdout
    finally:
        server.stop()
