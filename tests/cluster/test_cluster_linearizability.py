"""The CAS-register linearizability checker accepts valid histories and catches the classic bugs."""

from __future__ import annotations

from conformance.cluster.linearizability import CasOp, check


def test_concurrent_inserts_one_winner_is_linearizable() -> None:
    win = CasOp(0.0, 2.0, None, b"a", True, revision=5)
    lose = CasOp(0.5, 1.5, None, b"b", False, actual=(b"a", 5))
    assert check([win, lose])


def test_two_winners_from_one_revision_is_not_linearizable() -> None:
    first = CasOp(0.0, 1.0, None, b"a", True, revision=5)
    second = CasOp(0.0, 1.0, None, b"b", True, revision=6)
    assert not check([first, second])


def test_stale_read_after_completed_write_is_not_linearizable() -> None:
    write = CasOp(0.0, 1.0, None, b"a", True, revision=5)
    stale = CasOp(2.0, 3.0, 5, b"c", False, actual=None)  # reports "absent" after the insert completed
    assert not check([write, stale])


def test_real_time_order_is_respected() -> None:
    later = CasOp(2.0, 3.0, None, b"a", True, revision=5)
    earlier_cas = CasOp(0.0, 1.0, 5, b"b", True, revision=6)  # CAS on a revision that did not exist yet
    assert not check([later, earlier_cas])
    assert check([CasOp(0.0, 1.0, None, b"a", True, revision=5), CasOp(2.0, 3.0, 5, b"b", True, revision=6)])
