"""The Spark nemesis's seeded schedule reaches every host it promises to (docs/assurance.md): kill -9 and SIGSTOP
of every process, a clock jump on every host but etcd (Go reads the clock through the vDSO, past any preload)
and Postgres, and a driver's wall clock jumping past Spark's 120 s network timeout both ways. A fault in the
menu that no seed draws is a fault the 20 seeds never ran; a host whose clock fault does not reach its
processes' environment is a jump nobody sees."""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

import pytest

from benchmarks.nemesis import SPARK_HOSTS, SPARK_PROCESSES, WALL_CLOCKED, Run, add_arguments, schedule

SEEDS = range(1, 301)


def _drawn() -> list[dict[str, object]]:
    return [step for seed in SEEDS for step in schedule(random.Random(seed), 5, "spark")]


def test_every_process_is_killed_and_stopped_and_every_clock_but_etcd_and_postgres_jumps() -> None:
    drawn = {str(step["fault"]) for step in _drawn()}
    promised = {f"{kind} {p}" for kind in ("kill", "stop") for p in SPARK_PROCESSES} \
        | {f"clock {h}" for h in SPARK_HOSTS if h not in ("etcd", "pg")}
    assert promised <= drawn, sorted(promised - drawn)


def test_the_driver_clock_jumps_past_the_network_timeout_both_ways() -> None:
    jumps = [int(str(step["jump_s"])) for step in _drawn() if step["fault"] == "clock driver"]
    assert max(jumps) > 120 and min(jumps) < -120


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the wall-clock preload is built with gcc")
def test_a_workers_clock_fault_preloads_the_wall_clock_alone(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run = Run(1, parser.parse_args(["--pipeline", "spark"]), tmp_path, tmp_path)
    for host in ("worker1", "worker2"):
        assert host in WALL_CLOCKED
        env = run.clock_env(host)
        assert env["LD_PRELOAD"] == str(tmp_path / "wallclock.so") and "FAKETIME_TIMESTAMP_FILE" not in env
        assert Path(env["NEMESIS_WALL_OFFSET_FILE"]).read_text() == "+0s\n"
