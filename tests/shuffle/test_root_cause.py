"""Which failure a task of a failed attempt ends with (spec/shuffle/root_cause.py)."""

from __future__ import annotations

from spec.shuffle import errors
from spec.shuffle.coordination import AttemptFailure, AttemptState, Writers
from spec.shuffle.root_cause import ROOT_CAUSE_WAIT_S, RootCause, root_cause

CLOSED = errors.ConnectionClosedBeforeTermination.from_fault(errors.Fault(
    shuffle_id=0, writer_id=1, reader_id=2, peer_role="writer", handler="ShuffleClientHandler", sent="ack"))
NODE_FAILED = errors.ShuffleError("writer 1's node was declared FAIL")
REPORTED = Writers((), AttemptFailure("writer 1 failed: RuntimeError: boom"))
RETIRED = Writers((), AttemptState.RETIRED)
NOTHING = Writers(())


def test_a_node_failure_beats_a_report_which_beats_a_retirement() -> None:
    assert root_cause(CLOSED, NODE_FAILED, 0.0) is RootCause.NODE_FAILED
    assert root_cause(CLOSED, REPORTED, 0.0) is RootCause.PEER_FAILED  # the directory lets a report win over a retirement
    assert root_cause(CLOSED, RETIRED, 0.0) is RootCause.RETIRED


def test_a_symptom_waits_for_the_report_then_stands_as_its_own_cause() -> None:
    assert root_cause(CLOSED, NOTHING, ROOT_CAUSE_WAIT_S / 2) is RootCause.LOOK_AGAIN
    assert root_cause(CLOSED, NOTHING, ROOT_CAUSE_WAIT_S) is RootCause.OWN
    assert root_cause(ConnectionResetError(), REPORTED, 0.0) is RootCause.PEER_FAILED
    unreachable = errors.WriterUnreachable(0, 1, 2, 5000, "refused")
    assert root_cause(unreachable, REPORTED, 0.0) is RootCause.PEER_FAILED


def test_an_error_that_is_no_symptom_or_an_unreachable_directory_leaves_the_own_error() -> None:
    assert root_cause(errors.ChecksumVerificationFailed(1, 2, 3, 4), REPORTED, 0.0) is RootCause.OWN
    assert root_cause(ValueError("user code"), NODE_FAILED, 0.0) is RootCause.OWN
    assert root_cause(CLOSED, None, 0.0) is RootCause.OWN
