"""Reports that pinpoint: waits and root causes in the console, JSON and JUnit; decoded wire logs;
a target that cannot be reached stops the run in one line (exit 2) before any case."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conformance import runner
from fake_suite import FakeTarget, RunFake, fake_suite  # noqa: F401 - fake_suite is a fixture
from conformance.framework import Case, CaseContext, Level, RunOptions, TargetUnreachable, Verdict
from conformance.report.wirelog import codec_for, frames
from conformance.shuffle.wirelog import CODEC
from spec.shuffle.codec import encode_frame
from spec.shuffle.messages import CreditMessage, DataMessage
from spec.shuffle.checksum import payload_checksum
from spec.sync.messages import ColumnDescriptor, SyncCommand, SyncResponse

ROOT = Path(__file__).resolve().parents[2]



def root_fault(target: Any, ctx: CaseContext) -> Verdict:
    ctx.awaited("a CREDIT for DATA seq=0", 10.0, "nothing (connection open)")
    ctx.blame("fake/a/root", "no credit")
    return Verdict(False, "one CREDIT per DATA", "no CREDIT")


def dependent(target: Any, ctx: CaseContext) -> Verdict:
    ctx.awaited("a CREDIT for DATA seq=0", 10.0, "nothing (connection open)")
    ctx.blame("fake/a/root", "no credit")
    return Verdict(False, "the stream up to the fault", "no CREDIT")


def second_order(target: Any, ctx: CaseContext) -> Verdict:
    ctx.blame("fake/b/dependent", "stream not reached")
    return Verdict(False, "x", "y")


def blames_a_passing_case(target: Any, ctx: CaseContext) -> Verdict:
    ctx.blame("fake/c/pass", "not actually broken")
    return Verdict(False, "own fault", "seen")


def passes(target: Any, ctx: CaseContext) -> Verdict:
    ctx.blame("fake/a/root", "a passing case may see a blame too")
    return Verdict(True, "x", "x")


CASES = [
    Case("fake/a/root", Level.MUST, "writer", "credits each DATA", root_fault),
    Case("fake/b/dependent", Level.MUST, "writer", "rejects a gap", dependent),
    Case("fake/b/second-order", Level.SHOULD, "writer", "follows a follower", second_order),
    Case("fake/c/pass", Level.MUST, "writer", "passes", passes),
    Case("fake/c/independent", Level.MUST, "writer", "its own fault", blames_a_passing_case),
]


@contextmanager
def open_fake(options: RunOptions) -> Iterator[FakeTarget]:
    if options.target == "unreachable":
        raise TargetUnreachable("cannot connect to the fake")
    if options.target == "crashes":
        raise RuntimeError("the program exited with 127\nbefore printing anything")
    yield FakeTarget()


def test_failures_are_grouped_under_their_root_cause(fake_suite: Callable[..., RunFake], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_suite(CASES, open_fake)
    assert run("--json-report", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml")) == runner.EXIT_FAILED
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["root_causes"] == [
        {"case": "fake/a/root", "outcome": "FAIL", "dependents": ["fake/b/dependent", "fake/b/second-order"],
         "message": "awaited a CREDIT for DATA seq=0 for 10.0 s; came instead: nothing (connection open) "
                    "(expected one CREDIT per DATA)"},
        {"case": "fake/c/independent", "outcome": "FAIL", "dependents": [],
         "message": "expected own fault; actual seen"},
    ]
    by_id = {c["id"]: c for c in report["cases"]}
    assert by_id["fake/b/second-order"]["root_cause"] == "fake/a/root"  # chains end at the root
    assert by_id["fake/c/pass"]["root_cause"] is None and by_id["fake/c/pass"]["outcome"] == "PASS"
    assert by_id["fake/b/dependent"]["awaited"] == [
        "awaited a CREDIT for DATA seq=0 for 10.0 s; came instead: nothing (connection open)"]

    messages = {t.get("name"): t.find("failure").get("message")  # type: ignore[union-attr]
                for t in ET.parse(tmp_path / "r.xml").getroot().iter("testcase") if t.find("failure") is not None}
    assert messages["fake/a/root"].endswith("[root cause of 2 dependent cases]")
    assert messages["fake/b/dependent"].startswith("follows from fake/a/root (root cause); awaited a CREDIT")
    assert all("\n" not in m and m != "FAIL" for m in messages.values())

    out = capsys.readouterr().out.splitlines()
    assert out[-3:-1] == ["root cause: fake/a/root; 2 dependent cases",
                          "root cause: fake/c/independent; 0 dependent cases"]
    assert any(line.startswith("    follows: FAIL        fake/b/dependent: awaited a CREDIT") for line in out)


def test_an_unreachable_target_stops_the_run_in_one_line(fake_suite: Callable[..., RunFake], capsys: pytest.CaptureFixture[str]) -> None:
    run = fake_suite(CASES, open_fake)
    assert run("--target", "unreachable") == runner.EXIT_UNREACHABLE
    captured = capsys.readouterr()
    assert captured.err == "error: cannot connect to the fake\n" and "fake/a/root" not in captured.out
    assert run("--target", "crashes") == runner.EXIT_UNREACHABLE
    err = capsys.readouterr().err
    assert err == "error: cannot open target crashes: RuntimeError: the program exited with 127 before printing anything\n"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_dead_grpc_sync_target_fails_before_any_case() -> None:
    done = subprocess.run([sys.executable, "-m", "conformance", "run", "--suite", "sync", "--target",
                           f"grpc://127.0.0.1:{_closed_port()}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == runner.EXIT_UNREACHABLE, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.startswith("error: cannot connect to grpc://127.0.0.1:")
    assert done.stderr.count("\n") == 1


def test_a_dead_cluster_service_and_a_missing_program_fail_before_any_case() -> None:
    for suite, target, reason in (("cluster", f"tcp://127.0.0.1:{_closed_port()}", "cannot connect to tcp://127.0.0.1:"),
                                  ("shuffle", "exec:/nonexistent/impl", "cannot open target exec:/nonexistent/impl: "
                                                                       "LaunchError: cannot start")):
        done = subprocess.run([sys.executable, "-m", "conformance", "run", "--suite", suite, "--target", target],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == runner.EXIT_UNREACHABLE, done.stdout + done.stderr
        assert done.stdout == "" and done.stderr.startswith(f"error: {reason}") and done.stderr.count("\n") == 1


def test_the_wire_log_is_decoded_frame_by_frame() -> None:
    good = DataMessage(seq=0, writer_id=3, reader_id=1, checksum=payload_checksum(b"abc"), payload=b"abc")
    crc32 = DataMessage(seq=1, writer_id=3, reader_id=1, checksum=891568578, payload=b"abc")  # zlib.crc32(b"abc")
    stream = encode_frame(good) + encode_frame(crc32)
    credit = encode_frame(CreditMessage(writer_id=3, reader_id=1, num_messages=1, seq=0))
    entries = [  # the DATA frames split across chunks, the credit whole
        {"t_ms": 1.0, "dir": "peer->impl w3", "hex": stream[:5].hex()},
        {"t_ms": 2.0, "dir": "impl->peer w3", "hex": credit.hex()},
        {"t_ms": 3.0, "dir": "peer->impl w3", "hex": stream[5:50].hex()},
        {"t_ms": 4.0, "dir": "peer->impl w3", "hex": (stream[50:] + b"\x00\x00").hex()},
    ]
    got = frames(entries, CODEC)
    assert [(f.t_ms, f.direction, f.connection, f.summary) for f in got] == [
        (2.0, "impl->peer", "w3", "CREDIT_CONTROL seq=0 w=3 r=1 num=1"),
        (3.0, "peer->impl", "w3", f"DATA seq=0 w=3 r=1 size=3 checksum={good.checksum} (CRC32C ok)"),
        (4.0, "peer->impl", "w3", "DATA seq=1 w=3 r=1 size=3 checksum=891568578 (CRC32, not CRC32C)"),
        (4.0, "peer->impl", "w3", "incomplete frame (2 bytes, the stream ended)"),
    ]
    assert got[1].hex == encode_frame(good).hex() and got[2].fields["checksum_verdict"] == "CRC32, not CRC32C"
    assert got[2].problem == f"checksum 891568578 is the payload's CRC32; its CRC32C is {good.checksum}"
    garbage = frames([{"t_ms": 0.0, "dir": "peer->impl r0", "hex": b"GET / HTTP/1.1\r\n\r\n".hex()}], CODEC)
    assert [f.summary for f in garbage] == ["undecodable bytes"] and "FRAME_LENGTH_OUT_OF_RANGE" in garbage[0].problem


def test_sync_puts_and_responses_are_decoded_one_per_entry() -> None:
    command = SyncCommand(path="orders", origin="pg", sequence_number=7,
                          column_descriptors=(ColumnDescriptor(role=0, name="id"), ColumnDescriptor(role=1, name="id")))
    entries = [{"t_ms": 1.0, "dir": "peer->impl", "hex": command.to_descriptor_cmd().hex()},
               {"t_ms": 2.0, "dir": "impl->peer", "hex": SyncResponse(accepted=True, memory_sequence_number=7,
                                                                      durable_sequence_number=None, first=True).encode().hex()},
               {"t_ms": 3.0, "dir": "peer->impl", "hex": "ff"}]
    got = frames(entries, codec_for("sync"))
    assert [f.summary for f in got] == [
        "DataSyncCommand path='orders' origin='pg' sequence_number=7 columns=[OLD_PK id, NEW_PK id]",
        "DataSyncResponse accepted=True memory=7 durable=None first=True",
        "undecodable (COMMAND_DECODE_ERROR)",
    ]
    assert got[2].problem.startswith("Couldn't decode command")
