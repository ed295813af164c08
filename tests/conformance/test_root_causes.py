"""Two deliberately broken implementations, each with one fault that fails many cases: the run names
that fault as the one root cause and groups every other failure under it (console, JSON, JUnit).

Broken peers: ``broken_shuffle_peers.py`` beside this file (a writer computing CRC32 instead of
CRC32C; a reader that never credits DATA).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from conformance.shuffle import peer
from conformance.runner import EXIT_FAILED
from conformance.framework import CaseOutcome
from conformance.report.causes import root_causes
from conformance.report.cases import CaseReport, RunReport
from conformance.shuffle.suite import CASES

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(__file__).with_name("broken_shuffle_peers.py")
RUN_DEADLINE_S = 300
READER_SILENT_CASE_TIMEOUT_S = 4.0
"""A reader that never credits is judged when a case's deadline ends its wait: a short deadline keeps
that test cheap; the case that passes (acks echoed) needs a small fraction of it (0.4-0.6 s at load 10-13, where
the failing cases began their wait 0.3-0.9 s after their start)."""
JOBS = 4
"""Cases a run takes at once (``--jobs``): each starts its own broken peer, and the no-credit reader's failing cases
wait out their whole deadline side by side instead of one after another."""


def run(tmp_path: Path, fault: str, *cases: str, case_timeout_s: float = 30.0
        ) -> tuple[int, dict[str, Any], ET.Element, str]:
    target = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(PEERS))} {fault}"
    selection = [arg for case in cases for arg in ("--case", case)]
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--suite", "shuffle", "--target", target, *selection, "--timeout", str(case_timeout_s),
         "--jobs", str(JOBS),
         "--json-report", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml")],
        cwd=ROOT, capture_output=True, text=True, timeout=RUN_DEADLINE_S,
    )
    return (done.returncode, json.loads((tmp_path / "r.json").read_text()),
            ET.parse(tmp_path / "r.xml").getroot(), done.stdout + done.stderr)


def test_every_requirement_the_peer_blames_is_a_case_of_the_catalogue() -> None:
    blamed = {*peer.WRITER_REQUIREMENTS.values(), peer.WRITER_DELIVERY,
              peer.READER_CREDIT_FIRST, peer.READER_CREDITS, peer.READER_ACKS}
    assert blamed <= {case.id for case in CASES}, "a renamed case leaves the peer's blame pointing nowhere"


def failure_messages(junit: ET.Element) -> dict[str, str]:
    return {str(t.get("name")): str(f.get("message")) for t in junit.iter("testcase")
            if (f := t.find("failure")) is not None}


def test_a_crc32_writer_has_one_root_cause(tmp_path: Path) -> None:
    code, document, junit, output = run(
        tmp_path, "crc32", "shuffle/checksum/writer-", "shuffle/data/writer-", "shuffle/termination/writer-terminates")
    assert code == EXIT_FAILED, output
    (root,) = document["root_causes"]
    assert root["case"] == "shuffle/checksum/writer-crc32c", output
    assert set(root["dependents"]) == {"shuffle/data/writer-delivers-in-order", "shuffle/data/writer-whole-records",
                                       "shuffle/termination/writer-terminates-once"}, output
    outcomes = {c["id"]: c["outcome"] for c in document["cases"]}
    assert outcomes["shuffle/checksum/writer-zero-when-disabled"] == "PASS"  # no checksum, nothing wrong
    assert outcomes["shuffle/data/writer-empty-stream"] == "PASS"  # no DATA, nothing to check
    crc = next(c for c in document["cases"] if c["id"] == root["case"])
    problems = [f["problem"] for f in crc["wirelog"] if f["dir"] == "impl->peer" and f["problem"]]
    assert problems and "is the payload's CRC32; its CRC32C is" in problems[0]
    messages = failure_messages(junit)
    assert messages["shuffle/data/writer-delivers-in-order"].startswith(
        "follows from shuffle/checksum/writer-crc32c (root cause);")
    assert messages[root["case"]].endswith("[root cause of 3 dependent cases]")
    assert "root cause: shuffle/checksum/writer-crc32c; 3 dependent cases" in output.splitlines()


def test_a_reader_without_credits_has_one_root_cause(tmp_path: Path) -> None:
    code, document, junit, output = run(
        tmp_path, "no-credits", "shuffle/data/reader-credits-each-data", "shuffle/sequence/reader-rejects-gap",
        "shuffle/framing/reader-frames", "shuffle/termination/reader-acks-echo",
        case_timeout_s=READER_SILENT_CASE_TIMEOUT_S)
    assert code == EXIT_FAILED, output
    (root,) = document["root_causes"]
    assert root["case"] == "shuffle/data/reader-credits-each-data", output
    assert root["dependents"] == ["shuffle/sequence/reader-rejects-gap", "shuffle/framing/reader-frames"], output
    gap = next(c for c in document["cases"] if c["id"] == "shuffle/sequence/reader-rejects-gap")
    assert gap["awaited"][0].startswith("awaited a CREDIT for DATA seq=0 for ")
    assert gap["awaited"][0].endswith(" s; came instead: nothing (connection open)")
    message = failure_messages(junit)["shuffle/sequence/reader-rejects-gap"]
    assert message.startswith("follows from shuffle/data/reader-credits-each-data (root cause); awaited a CREDIT")
    assert {c["id"]: c["outcome"] for c in document["cases"]}["shuffle/termination/reader-acks-echo"] == "PASS"


def test_failures_with_the_identical_cause_are_one_root_with_its_dependents() -> None:
    writer_cases = [case for case in CASES if case.role == "writer"][:4]
    refused = "check raised: ConnectionRefusedError: [Errno 111] Connection refused"
    reports = [CaseReport(case, CaseOutcome.FAIL, case.requirement, refused if i < 3 else "a different actual", 1.0)
               for i, case in enumerate(writer_cases)]
    run = RunReport("shuffle", "t", reports, root_causes(reports))
    assert [r.case.id for r in run.roots()] == [writer_cases[0].id, writer_cases[3].id]
    assert [d.case.id for d in run.dependents(writer_cases[0].id)] == [c.id for c in writer_cases[1:3]]
