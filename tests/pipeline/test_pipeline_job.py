"""The pipeline end to end on a local Spark master: a small run, and a run with chaos."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reference.pipeline.__main__ import main
from reference.pipeline.changes import StreamSpec
from reference.pipeline.job import Options, Outcome, run
from reference.pipeline.progress import SourceDurability
from reference.pipeline.routing import parts

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"^pipeline OK: (\d+) rows, table matches, durable (src\d+=\d+ ?)+, [\d,]+ changes/s$")


def _run(options: Options) -> tuple[Outcome, str]:
    out, err = io.StringIO(), io.StringIO()
    outcome = run(options, out=out, err=err)
    assert out.getvalue().splitlines()[-1] == outcome.line  # the verdict is the last line of stdout
    return outcome, out.getvalue() + err.getvalue()


def test_small_pipeline_lands_the_expected_table_and_reports(tmp_path: Path) -> None:
    spec = StreamSpec(seed=7, changes=3000, keys=400, origins=3)
    environment = {key: os.environ.get(key) for key in ("PYTHONPATH", "PYSPARK_PYTHON")}
    outcome, text = _run(Options(changes=spec.changes, keys=spec.keys, origins=spec.origins, seed=spec.seed,
                                 writers=2, readers=2, store=str(tmp_path / "store"), report=str(tmp_path / "report")))
    assert outcome.ok, text
    assert SUMMARY.match(outcome.line), outcome.line
    figures = json.loads((tmp_path / "report" / "figures.json").read_text())
    assert figures["table_matches"] and figures["rows"] == figures["expected_rows"] > 0
    last = {spec.origin_name(o): max(tx.seq for tx in spec.transactions(o)) for o in range(spec.origins)}
    assert figures["durable"] == last
    assert set(figures["latency_ms"]["durable"]) == {"p50", "p90", "p99", "max"}
    assert (tmp_path / "report" / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "sink rows synced" in text  # progress lines
    assert "sync server restarts: 0" in text and "chaos" not in text
    # Spark's workers get the interpreter and the path from the context, not from os.environ.
    assert {key: os.environ.get(key) for key in environment} == environment


def _reap_sync_servers(store: Path) -> list[int]:
    """Kill the process group of every live sync server serving ``store``; return their pids.

    Only this test's run serves its own tmp store, so these are the servers the test started."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:  # ended meanwhile
            continue
        if b"reference.sync" in argv and b"serve" in argv and str(store).encode() in argv:
            pids.append(int(entry.name))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(entry.name), signal.SIGKILL)  # each server leads its own process group
    return pids


CONSOLE_KNOWN = re.compile(
    r"^WARNING: Using incubator modules|^Using Spark's default log4j profile|^Setting default log level|"
    r"^To adjust logging level|WARN Utils: (Your hostname|Set SPARK_LOCAL_IP)|WARN NativeCodeLoader|"
    r"^\[ *[\d.]+s\] \d+/\d+ sink rows synced |^sync server \S+ (has not accepted a put|answers origin)")
"""Spark's start-up lines, the progress lines and the sinks' clients' outage warnings (a restart slower
than 5 s on a loaded machine): what the console holds besides the driver's fault lines."""


def test_chaos_kills_server_and_a_task_and_says_each_in_one_line(tmp_path: Path) -> None:
    """As a user runs it: the table still matches, and the console holds one line per fault (no
    Spark ERROR trace, no 'unknown' root cause), the counters those that happened, and no temp dir is left."""
    store, report, temp = tmp_path / "store", tmp_path / "report", tmp_path / "tmp"
    temp.mkdir()
    try:
        done = subprocess.run([sys.executable, "-m", "reference.pipeline", "--chaos", "--changes", "12000", "--keys",
                               "1500", "--store", str(store), "--report", str(report)], cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(temp)), capture_output=True,
                              text=True, timeout=280)
    finally:
        leaked = _reap_sync_servers(store)
    assert leaked == [], "sync servers outlived the run"
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    said = [line.split("] ", 1)[1] for line in done.stderr.splitlines() if not CONSOLE_KNOWN.search(line)]
    assert sorted(line.split(" (")[0] for line in said) == [
        "chaos: killed sink 0", "chaos: killed the sync server", "job attempt 1 failed"], done.stderr[-3000:]
    assert "unknown" not in done.stderr
    assert "sync server restarts: 1" in done.stdout, done.stdout
    figures = json.loads((report / "figures.json").read_text())
    assert figures["sync_server_generations"] == 2 and figures["chaos_task_killed"]["reader"] == 0
    # The killed sink was re-run (by re-running the streaming job) and resumed.
    assert figures["job_attempts"] == 2
    # A passing run with --store leaves no work dir of its own (its server log went with it).
    assert not [p for p in temp.iterdir() if p.name.startswith("streamwire-pipeline-")]


def test_existing_table_is_refused_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cdc" / "_delta_log").mkdir(parents=True)
    (tmp_path / "cdc" / "_delta_log" / "00000000000000000000.json").write_text(
        '{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'
        '{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":'
        '"{\\"type\\":\\"struct\\",\\"fields\\":[]}","partitionColumns":[],"configuration":{},"createdTime":0}}\n')
    assert main(["--store", str(tmp_path), "--changes", "10"]) == 2
    assert "already holds a table" in capsys.readouterr().err


def test_source_durable_point_waits_for_every_sink_of_a_transaction() -> None:
    spec = StreamSpec(seed=5, changes=200, keys=40, origins=1)
    durability = SourceDurability(spec, 2, "t")
    assert durability.update({}) == {"src0": 0}
    final = {o: n for o, n in durability.final.items() if n is not None}
    assert durability.update(final) == {"src0": durability.last_seq[0]}
    # A sink lagging at 0 holds the source's durable point back to just before its first part.
    lagging = dict(final, **{"t/src0/sink1": 0})
    first_part = min(tx.seq for tx in spec.transactions(0) if 1 in parts(tx, 2))
    assert SourceDurability(spec, 2, "t").update(lagging) == {"src0": first_part - 1}


def test_a_transaction_split_over_two_sinks_is_durable_only_when_both_parts_are() -> None:
    spec = StreamSpec(seed=5, changes=200, keys=40, origins=1)
    durability = SourceDurability(spec, 2, "t")
    final = {o: n for o, n in durability.final.items() if n is not None}
    split = next(tx for tx in spec.transactions(0) if set(parts(tx, 2)) == {0, 1})
    one_part_short = dict(final, **{"t/src0/sink1": split.seq - 1})  # sink 0 holds everything durable
    assert durability.update(one_part_short)["src0"] < split.seq
