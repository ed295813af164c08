"""The admission of strangers as a pure policy: the cap evicts the oldest, the deadline expires them in
order, and a peer the protocol found useful is neither (issue #36: the reactor only carries it out); and
the sync front's connections at its cap (issue #37): a newcomer evicts the connection that did nothing for
longest (handshaking or idle), then silent streams, never a request while another can go."""

from __future__ import annotations

import pytest

from spec.admission import Admission, ConnectionAdmission, ConnectionUse, StrangerAdmission


def test_the_newcomer_beyond_the_cap_evicts_the_oldest() -> None:
    admission: StrangerAdmission[str] = StrangerAdmission(max_pending=2, bind_timeout_s=10.0)
    assert admission.accepted("a", 0.0) == [] and admission.accepted("b", 1.0) == []
    assert admission.accepted("c", 2.0) == ["a"]
    assert "a" not in admission and len(admission) == 2


def test_strangers_expire_oldest_first_at_their_deadline_and_identified_peers_never() -> None:
    admission: StrangerAdmission[str] = StrangerAdmission(max_pending=8, bind_timeout_s=5.0)
    for i, peer in enumerate("abc"):
        admission.accepted(peer, float(i))
    admission.identified("b")
    assert admission.deadline() == 5.0
    assert admission.expired(4.999) == []
    assert admission.expired(5.0) == ["a"]
    assert admission.deadline() == 7.0
    assert admission.expired(100.0) == ["c"]
    assert admission.deadline() is None and len(admission) == 0


def test_a_closed_stranger_is_forgotten() -> None:
    admission: StrangerAdmission[str] = StrangerAdmission(max_pending=1, bind_timeout_s=1.0)
    admission.accepted("a", 0.0)
    admission.closed("a")
    assert admission.accepted("b", 0.5) == [] and admission.expired(10.0) == ["b"]


@pytest.mark.parametrize("cap, timeout", [(0, 1.0), (1, 0.0), (1, -1.0)])
def test_limits_that_admit_nobody_are_refused(cap: int, timeout: float) -> None:
    with pytest.raises(ValueError):
        StrangerAdmission(cap, timeout)


def test_strangers_without_the_secret_are_evicted_before_a_peer_that_proved_it() -> None:
    """A flood of strangers that cannot authenticate must not push out a reader whose handshake completed
    and whose first CREDIT is still on its way (it failed the job with CONNECTION_CLOSED_BEFORE_TERMINATION)."""
    admission: StrangerAdmission[str] = StrangerAdmission(max_pending=2, bind_timeout_s=10.0)
    admission.accepted("reader", 0.0)
    admission.proven("reader")
    assert admission.accepted("s1", 1.0) == []
    assert admission.accepted("s2", 2.0) == ["s1"]
    assert admission.accepted("s3", 3.0) == ["s2"]
    assert "reader" in admission
    admission.proven("s3")
    assert admission.accepted("s4", 4.0) == ["reader"]  # every other peer proved it: the oldest goes, the cap holds
    assert admission.expired(13.0) == ["s3"]  # a proven stranger keeps its deadline
    assert len(admission) == 1


# -- the sync front's connections at its cap (issue 37: no crowd can lock the clients out) ----------

def _held(*uses: ConnectionUse) -> ConnectionAdmission[str]:
    """A full admission whose connections c0, c1, ... do ``uses``, entered in that order."""
    admission: ConnectionAdmission[str] = ConnectionAdmission(max_connections=len(uses))
    for i, use in enumerate(uses):
        assert admission.accepted(f"c{i}") == Admission(admitted=True)
        admission.using(f"c{i}", use)
    return admission


def test_below_the_cap_nobody_is_evicted() -> None:
    admission: ConnectionAdmission[str] = ConnectionAdmission(max_connections=2)
    assert admission.accepted("a") == Admission(admitted=True) and admission.accepted("b") == Admission(admitted=True)
    assert len(admission) == 2


def test_the_connection_that_did_nothing_for_longest_goes_handshaking_or_idle() -> None:
    admission = _held(ConnectionUse.HANDSHAKE, ConnectionUse.IDLE, ConnectionUse.HANDSHAKE, ConnectionUse.WAITING)
    assert admission.accepted("new") == Admission(admitted=True, evicted="c0")  # a slow-loris older than the idle one
    assert admission.accepted("newer") == Admission(admitted=True, evicted="c1")
    assert admission.accepted("newest") == Admission(admitted=True, evicted="c2")
    assert "c3" in admission


def test_newcomers_evict_idle_connections_not_each_others_handshakes() -> None:
    """A crowd reconnecting as fast as it is evicted must not push out a client's handshake in progress."""
    admission = _held(ConnectionUse.IDLE, ConnectionUse.IDLE, ConnectionUse.IDLE)
    assert [admission.accepted(n).evicted for n in ("client", "a", "b")] == ["c0", "c1", "c2"]
    assert admission.accepted("d") == Admission(admitted=True, evicted="client")  # none idle left: the oldest


def test_a_connection_the_server_closed_goes_before_any_other() -> None:
    admission = _held(ConnectionUse.HANDSHAKE, ConnectionUse.IDLE, ConnectionUse.ENDING)
    assert admission.accepted("new") == Admission(admitted=True, evicted="c2")


def test_idleness_counts_from_the_end_of_the_last_stream() -> None:
    admission = _held(ConnectionUse.IDLE, ConnectionUse.IDLE, ConnectionUse.WAITING)
    admission.using("c0", ConnectionUse.BUSY)
    admission.using("c0", ConnectionUse.IDLE)  # its request ended after c1 went idle: c1 is idle longer
    assert admission.accepted("new") == Admission(admitted=True, evicted="c1")
    admission.using("new", ConnectionUse.IDLE)
    assert admission.accepted("newer") == Admission(admitted=True, evicted="c0")


def test_a_use_reported_again_keeps_the_connections_place() -> None:
    """The front reports a connection's use whenever it relays a frame: a PING on an idle connection is no new
    idleness."""
    admission = _held(ConnectionUse.IDLE, ConnectionUse.IDLE)
    admission.using("c0", ConnectionUse.IDLE)
    assert admission.accepted("new") == Admission(admitted=True, evicted="c0")


def test_an_ending_connection_stays_ending_whatever_is_reported_after() -> None:
    admission = _held(ConnectionUse.IDLE, ConnectionUse.BUSY)
    admission.using("c1", ConnectionUse.ENDING)
    admission.using("c1", ConnectionUse.BUSY)  # the client's last frames, read after the server closed its side
    assert admission.accepted("new") == Admission(admitted=True, evicted="c1")


def test_a_connection_carrying_a_request_is_never_evicted_while_another_is_not() -> None:
    admission = _held(ConnectionUse.BUSY, ConnectionUse.BUSY, ConnectionUse.WAITING, ConnectionUse.BUSY)
    assert admission.accepted("new") == Admission(admitted=True, evicted="c2")  # silent streams go before requests
    admission.using("new", ConnectionUse.BUSY)
    assert admission.accepted("newer") == Admission(admitted=False)
    assert "newer" not in admission and len(admission) == 4


def test_a_closed_connection_makes_room_and_a_refused_one_is_not_held() -> None:
    admission = _held(ConnectionUse.BUSY)
    assert admission.accepted("new") == Admission(admitted=False)
    admission.closed("c0")
    admission.closed("c0")  # closing twice (both sides of a relay end) is harmless
    assert admission.accepted("new") == Admission(admitted=True) and len(admission) == 1


def test_a_cap_that_admits_nobody_is_refused() -> None:
    with pytest.raises(ValueError):
        ConnectionAdmission(0)
