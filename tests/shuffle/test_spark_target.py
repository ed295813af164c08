"""The ``spark-jvm`` target runs every case in one JVM, so cases must stay apart inside it.

Each case gets fresh Spark handlers, servers and connections: a case that crashes with Spark mid-stream
(an error marked, a reader never bound under a connection timeout, a connection open) leaves nothing
behind, and the next case on the same ids passes. Peers open at the same time keep their events apart.
Without a JDK the module is skipped with that reason, except under CI.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Iterator

import pytest
from spark_jvm_support import expect_event, require_jdk

from conformance.framework import Case, CaseContext, Level, CaseOutcome, RunOptions, Verdict
from conformance.runner import run_case
from conformance.shuffle.peer import PeerReader
from conformance.shuffle.targets import WRITER, SparkTarget, Workload
from conformance.shuffle.suite import CASES
from conformance.shuffle.suite.helpers import MULTI_WRITER_ID, STREAM_S
from conformance.shuffle.spark_jvm import SparkJvm
from spec.shuffle import codec
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import CreditMessage, Message, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.settings import key_of

pytestmark = pytest.mark.jvm

DEADLINE_S = 30.0
OPTIONS = RunOptions(suite="shuffle", target="spark-jvm", timeout=DEADLINE_S)
NEXT_CASE = next(c for c in CASES if c.id == "shuffle/termination/writer-waits-for-every-ack")
"""Fails if anything of the crashed case leaks: it requires no error report and both readers' streams."""
CRASH_WORKLOAD = Workload(WRITER, writer_id=MULTI_WRITER_ID, num_readers=2, records={0: (b"a",), 1: (b"b",)},
                          settings={key_of("writer_connection_timeout_ms"): "5s"})
"""Same writer id and readers as NEXT_CASE; reader 1 never binds, so Spark's connection timer is pending at
the crash (long enough for reader 0 to bind even on a loaded machine)."""


def _receive(sock: socket.socket) -> Message:
    sock.settimeout(DEADLINE_S)
    decoder, received = FrameDecoder(), list[Message]()
    while not received:
        data = sock.recv(4096)
        assert data, "Spark closed the connection"
        received = decoder.feed(data)
    (message,) = received
    return message


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkJvm]:
    with SparkJvm(require_jdk()) as target:
        yield target


def test_a_case_after_a_crashed_case_passes(spark: SparkJvm) -> None:
    left_open: list[socket.socket] = []

    def crash(target: SparkTarget, ctx: CaseContext) -> Verdict:
        with target.writer(CRASH_WORKLOAD, ctx) as impl:
            peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
            assert peer.until_terminated(STREAM_S) and peer.held_ack is not None, impl.diagnostics()
            peer.send_held_ack(peer.held_ack.seq + 1)
            assert impl.wait_report(frozenset({"error"}), STREAM_S) is not None, impl.diagnostics()
            left_open.append(peer.link.sock)
            raise RuntimeError("the check crashed with Spark's writer mid-stream")

    target = SparkTarget(spark)
    crashed = run_case(Case("test/crash", Level.MUST, WRITER, "crashes", crash, frozenset({WRITER})), target, OPTIONS)
    assert crashed.outcome is CaseOutcome.FAIL and "crashed with Spark" in crashed.actual, crashed.actual
    assert spark.open_peers() == []
    (sock,) = left_open
    with sock:
        sock.settimeout(DEADLINE_S)
        assert sock.recv(1) == b""  # Spark's server closed the crashed case's connection
    after = run_case(NEXT_CASE, target, OPTIONS)
    assert after.outcome is CaseOutcome.PASS, f"{after.expected}\n{after.actual}"
    assert spark.open_peers() == []


def test_peers_open_together_keep_their_events_apart(spark: SparkJvm) -> None:
    first, second = spark.writer(3, 1), spark.writer(3, 1)
    try:
        assert sorted(spark.open_peers()) == sorted([first.peer_id, second.peer_id])
        with socket.create_connection(("127.0.0.1", first.port), timeout=DEADLINE_S) as sock:
            sock.sendall(codec.encode_frame(CreditMessage(writer_id=3, reader_id=0, num_messages=1)))
            expect_event(first, "bound", DEADLINE_S)
            first.terminate(0)
            assert _receive(sock) == TerminationControlMessage(seq=0, writer_id=3, reader_id=0)
            sock.sendall(codec.encode_frame(TerminationAckMessage(seq=7, writer_id=3, reader_id=0)))
            assert expect_event(first, "error", DEADLINE_S)["parameters"]["actSeqNum"] == "7"
        first.close()
        assert spark.open_peers() == [second.peer_id]
        assert [e["event"] for e in second.events.snapshot()] == ["ready"]  # nothing of the first's
        with socket.create_connection(("127.0.0.1", second.port), timeout=DEADLINE_S) as sock:
            sock.sendall(codec.encode_frame(CreditMessage(writer_id=3, reader_id=0, num_messages=1)))
            second.terminate(0)
            assert _receive(sock) == TerminationControlMessage(seq=0, writer_id=3, reader_id=0)
            sock.sendall(codec.encode_frame(TerminationAckMessage(seq=0, writer_id=3, reader_id=0)))
            expect_event(second, "all_acks", DEADLINE_S)
    finally:
        first.close()
        second.close()
    assert spark.open_peers() == []


def test_closing_the_jvm_ends_every_peer_without_a_thread_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shutdown order: the JVM exits, its stdout and event threads finish, and only then the log closes
    (reading the log's tail from a finishing thread used to raise on the closed file)."""
    thread_errors: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    spark = SparkJvm(require_jdk())
    writer = spark.writer(3, 1)
    spark.close()
    assert writer.events.ended and not thread_errors, thread_errors
    assert f"[adapter] peer {writer.peer_id}: " in writer.stderr_tail()  # the log outlives the process


def test_a_dead_jvm_ends_its_peers_and_the_next_peer_gets_a_new_one() -> None:
    """A case that kills the JVM (a crash, an OOM) fails alone: later cases get a fresh JVM."""
    with SparkJvm(require_jdk()) as spark:
        writer = spark.writer(3, 1)
        dead = spark.pid
        os.kill(dead, signal.SIGKILL)
        assert writer.events.wait_for(lambda e: False, DEADLINE_S) is None and writer.events.ended
        writer.close()  # nothing left to stop: no error
        again = spark.writer(3, 1)
        assert spark.pid != dead and spark.open_peers() == [again.peer_id]
