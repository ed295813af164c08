"""``python -m benchmarks rtm --quick --step-s 1 --json``: Spark's real-time mode and the Python runtime side by side.

Run as a user runs it (its own process, so its Spark driver and JVM are its own). Checks the figures' shape
and that both sides delivered every row they were offered; never their speed. One second per offered rate
(quick's default is 2): each step still carries hundreds to thousands of rows, and its (up to 8) steps take 1 s less each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STEP_FIELDS = {"offered_rows_s", "sent", "delivered", "p50_ms", "p99_ms", "delivered_rows_s", "sustained"}


def run_quick() -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "benchmarks", "rtm", "--quick", "--step-s", "1", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def test_rtm_quick_reports_every_side_with_every_row_delivered() -> None:
    figures = run_quick()
    assert figures["rates"] == [500, 5000]
    for side in ("spark", "spark_without_shuffle", "python", "python_idle_flush"):
        summary = figures[side]
        assert summary["available"], f"{side}: {summary['reason']}"
        assert summary["every_row_delivered"], summary
        steps = summary["steps"]
        windows = [rate for rate in figures["rates"] for _ in range(figures["windows"])]
        assert [step["offered_rows_s"] for step in steps] == windows[:len(steps)]
        assert steps, summary
        for step in steps:
            assert set(step) == STEP_FIELDS
            assert step["sent"] > 0 and step["delivered"] == step["sent"]
            assert 0 < step["p50_ms"] <= step["p99_ms"]
        assert summary["sustainable_rows_s"] == max(
            (step["offered_rows_s"] for step in steps if step["sustained"]), default=0)
        assert set(figures["rate_p99_ms"][side]) == {str(step["offered_rows_s"]) for step in steps if step["sustained"]}
