"""A short nemesis in the suite: the single-process pipeline (Postgres, the sync server, ``python -m
reference.cdc``, each in its own network namespace) under three fixed faults of seed 1 (kill -9 of the source,
SIGSTOP of the slot's walsender, the sync server's wall clock jumping), judged by the independent checker:
every committed change once and in order, nothing uncommitted, no durable number or slot position ahead of
the table, caught up after the last heal. Lab 9: a nemesis run on the machine (lab 0) is never disturbed. The
full run is ``python -m benchmarks nemesis`` (docs/assurance.md)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from benchmarks.nemesis import add_arguments, main
from benchmarks.nemesis_net import unavailable
from conformance.pgoutput.postgres_server import postgres_bin_dir

FAULTS = ("kill cdc", "stop walsender", "clock sync")


def test_the_pipeline_keeps_its_promises_under_three_faults(tmp_path: Path) -> None:
    reason = unavailable() or (None if postgres_bin_dir() else "needs Postgres (initdb, pg_ctl)")
    if reason:
        message = f"the nemesis lab cannot run here: {reason}"
        if os.environ.get("CI"):
            pytest.fail(message)  # as the etcd and Postgres fixtures: CI installs what the lab needs
        pytest.skip(message)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--lab", "9", "--seeds", "1", "--lasting", "1", "1.5", "--between", "0.5", "1", "--bound", "60", "--out", str(tmp_path),
                              *(f"--fault={fault}" for fault in FAULTS)])
    code = main(args)
    history = json.loads((tmp_path / "seed-1.json").read_text())
    verdict = history["verdict"]
    failed = {name: p["problems"][:2] for name, p in verdict["properties"].items() if not p["passed"]}
    assert [f["fault"] for f in history["faults"]] == list(FAULTS)
    assert not failed and code == 0, failed
    assert verdict["committed"] > 0 and history["caught_up_s"] is not None
