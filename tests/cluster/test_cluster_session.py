"""Both ends of a cluster session as machines, with time as plain numbers: HELLO first, takeover,
silence, fencing of a stale session, resume after a reconnect, and every deadline at its instant
(one tick before it nothing happens, at it the rule applies)."""

from __future__ import annotations

from typing import Any

import pytest

from spec.cluster import wire
from spec.cluster.errors import (
    ClusterError,
    FrameTooLarge,
    InvalidIdentifier,
    MalformedMessage,
    NodeIdInUse,
    ProviderClosed,
    ProviderUnavailable,
    RevisionMismatch,
    Unauthenticated,
)
from spec.cluster.interface import FailureTiming
from spec.cluster.model import GossipUpdate, MembershipUpdate
from spec.cluster.session import (
    Answer,
    Backoff,
    ClientSession,
    ClusterDown,
    Hello,
    Phase,
    Request,
    ServiceSession,
    error_frame,
    error_from,
)
from spec.cluster.types import Entry, Membership, NodeId, NodeInfo, NodeState, Revision, ShardId
from spec.cluster.wire import ServiceKind

TICK = 0.001
TIMING = FailureTiming(heartbeat_interval=0.2, ttl=0.6, fail_bound=1.2)
N1 = NodeId("n1")


def hello(node_id: str = "n1", secret: str = "s", takeover: str = "", resume_after: int | None = None) -> bytes:
    return wire.encode(ServiceKind.HELLO, 1, node_id=node_id, secret=secret, takeover=takeover,
                       resume=resume_after is not None, resume_after=resume_after or 0)


def service(**kwargs: Any) -> ServiceSession:
    settings: dict[str, Any] = {"secret": "s", "max_sessions": 2, "fail_bound": TIMING.fail_bound, **kwargs}
    return ServiceSession(**settings)


def decoded(frame: bytes) -> wire.ServiceMessage:
    return wire.decode(frame[4:])


# -- the service's end ---------------------------------------------------------------------------

def test_hello_comes_first_anything_else_is_refused_and_closes() -> None:
    session = service()
    [asked] = session.receive(wire.encode(ServiceKind.RENEW, 5), 0.0, served=0)
    assert isinstance(asked, Answer) and asked.close and session.closed
    reply = decoded(asked.frame)
    assert (reply.kind, reply.request_id, reply.payload["code"]) == (ServiceKind.ERROR, 5, MalformedMessage.code)
    assert not list(session.receive(hello(), 0.0, served=0)), "a closed session reads nothing more"


@pytest.mark.parametrize("frame,error", [(hello(secret="wrong"), Unauthenticated),
                                         (hello(node_id="bad id"), InvalidIdentifier)], ids=["secret", "id"])
def test_a_hello_without_the_secret_or_with_a_bad_id_is_refused(frame: bytes, error: type[ClusterError]) -> None:
    [asked] = service().receive(frame, 0.0, served=0)
    assert isinstance(asked, Answer) and asked.close
    assert decoded(asked.frame).payload["code"] == error.code


def test_a_hello_is_refused_when_the_sessions_are_full_and_served_one_below() -> None:
    [full] = service(max_sessions=2).receive(hello(), 0.0, served=2)
    assert isinstance(full, Answer) and decoded(full.frame).payload["code"] == ProviderUnavailable.code
    [room] = service(max_sessions=2).receive(hello(), 0.0, served=1)
    assert room == Hello(1, N1, None, None)


def test_hello_is_bounded_until_welcome_then_a_node_may_send_a_full_batch() -> None:
    session = service()
    with pytest.raises(FrameTooLarge):
        list(session.receive((wire.MAX_HELLO_BYTES + 1).to_bytes(4, "big"), 0.0, served=0))
    session = service()
    large = (wire.MAX_HELLO_BYTES + 1).to_bytes(4, "big")
    for asked in session.receive(hello(takeover="t", resume_after=7) + large, 0.0, served=0):
        assert asked == Hello(1, N1, "t", 7)
        welcome = decoded(session.welcome(asked, "token", TIMING))
        assert (welcome.kind, welcome.payload["session"]) == (ServiceKind.WELCOME, "token")
        assert wire.timing_from_wire(welcome.payload) == TIMING
    assert session.frames.held_bytes == 4, "the large frame's header passed the node's bound"


def test_after_hello_requests_are_handed_on_and_anything_else_is_answered_malformed() -> None:
    session = service()
    for asked in session.receive(hello(), 0.0, served=0):
        assert isinstance(asked, Hello)
        session.welcome(asked, "token", TIMING)
    out = list(session.receive(wire.encode(ServiceKind.RENEW, 2) + hello() + wire.encode(ServiceKind.OK, 3), 0.0, 1))
    assert isinstance(out[0], Request) and out[0].message.kind is ServiceKind.RENEW
    assert [(decoded(a.frame).request_id, a.close) for a in out[1:] if isinstance(a, Answer)] == [(1, False), (3, False)]


def test_a_session_is_silent_only_past_fail_bound_after_its_last_frame() -> None:
    session = service()
    for asked in session.receive(hello(), 10.0, served=0):
        session.welcome(asked, "token", TIMING)  # type: ignore[arg-type]
    assert not session.silent(10.0 + TIMING.fail_bound)
    assert session.silent(10.0 + TIMING.fail_bound + TICK)
    list(session.receive(wire.encode(ServiceKind.RENEW, 2), 11.0, served=1))  # any frame is a sign of life
    assert not session.silent(10.0 + TIMING.fail_bound + TICK)
    assert not service().silent(1e9), "a stranger is bounded by the bind deadline, not by silence"


def test_a_session_whose_reads_are_held_is_judged_only_up_to_the_hold() -> None:
    """Held reads are unread time: a session held before its deadline is never silent while held, one held past
    it is (it was silent before the hold), and at the hold's exact instant the deadline rule is the same."""
    session = service()
    for asked in session.receive(hello(), 10.0, served=0):
        session.welcome(asked, "token", TIMING)  # type: ignore[arg-type]
    deadline = 10.0 + TIMING.fail_bound
    assert not session.silent(deadline + 100.0, held_since=deadline - TICK)
    assert not session.silent(deadline + 100.0, held_since=deadline)
    assert session.silent(deadline + 100.0, held_since=deadline + TICK)
    assert not session.silent(deadline, held_since=deadline + 100.0), "read through its deadline: not past it"
    assert session.silent(deadline + TICK, held_since=deadline + 100.0)


def test_a_session_taken_over_is_told_provider_closed_on_request_id_zero() -> None:
    session = service()
    for asked in session.receive(hello(), 0.0, served=0):
        session.welcome(asked, "token", TIMING)  # type: ignore[arg-type]
    told = decoded(session.taken_over())
    assert (told.kind, told.request_id, told.payload["code"]) == (ServiceKind.ERROR, 0, ProviderClosed.code)
    assert session.closed


# -- the client's end ----------------------------------------------------------------------------

def welcome(token: str = "tok") -> bytes:
    return wire.encode(ServiceKind.WELCOME, 1, session=token, **wire.timing_to_wire(TIMING))


def opened(timeout: float = 0.5, now: float = 0.0) -> ClientSession:
    client = ClientSession(N1, secret="s", timeout=timeout, backoff=Backoff(first=0.1, limit=0.4),
                           uniform=lambda low, high: high)
    client.hello(now)
    assert client.receive(welcome(), now).welcomed
    return client


def snapshot(epoch: int) -> bytes:
    members = Membership(epoch=epoch, shards={ShardId("s"): (NodeInfo(node_id=N1, address="a", state=NodeState.OK),)})
    return wire.encode(ServiceKind.MEMBERSHIP, 0, **wire.membership_to_wire(members))


def test_the_first_hello_resumes_nothing_and_events_before_welcome_come_after_it() -> None:
    client = ClientSession(N1, secret="s", timeout=0.5, takeover="given")
    sent = decoded(client.hello(0.0))
    assert (sent.payload["takeover"], sent.payload["resume"]) == ("given", False)
    step = client.receive(snapshot(3), 0.0)
    assert not step.welcomed and not step.notifications
    step = client.receive(welcome("tok"), 0.0)
    assert step.welcomed and [type(n) for n in step.notifications] == [MembershipUpdate]
    assert client.takeover == "tok" and client.phase is Phase.OPEN


def test_a_refused_first_hello_raises_its_error() -> None:
    client = ClientSession(N1, secret="s", timeout=0.5)
    client.hello(0.0)
    with pytest.raises(NodeIdInUse):
        client.receive(error_frame(1, NodeIdInUse("held")), 0.0)


def test_a_request_fails_at_max_timeout_fail_bound_exactly_and_ends_the_connection() -> None:
    client = opened(timeout=0.5, now=0.0)
    assert client.patience == TIMING.fail_bound  # max(0.5, 1.2)
    rid, _ = client.request(ServiceKind.RENEW, 1.0)
    assert client.deadline == 1.0 + TIMING.fail_bound
    assert not client.tick(1.0 + TIMING.fail_bound - TICK).failed
    step = client.tick(1.0 + TIMING.fail_bound)
    assert isinstance(step.failed[rid], ProviderUnavailable) and step.close is not None
    late_reply = client.receive(wire.encode(ServiceKind.RENEWED, rid, ttl_ms=600), 2.3)
    assert not late_reply.replies, "a reply after the deadline answers nobody"


def test_the_timeout_wins_when_it_is_longer_than_the_fail_bound() -> None:
    client = opened(timeout=3.0)
    rid, _ = client.request(ServiceKind.RENEW, 0.0)
    assert not client.tick(3.0 - TICK).failed and rid in client.tick(3.0).failed


def test_replies_and_errors_reach_their_requests() -> None:
    client = opened()
    ok, _ = client.request(ServiceKind.RENEW, 0.0)
    bad, _ = client.request(ServiceKind.JOIN_SHARD, 0.0, shard_id="s")
    step = client.receive(wire.encode(ServiceKind.RENEWED, ok, ttl_ms=600) + error_frame(bad, NodeIdInUse("x")), 0.1)
    assert step.replies[ok].payload == {"ttl_ms": 600} and isinstance(step.failed[bad], NodeIdInUse)


def test_a_broken_connection_fails_what_waits_tells_the_core_once_and_dials_after_a_backoff() -> None:
    client = opened()
    rid, _ = client.request(ServiceKind.RENEW, 1.0)
    step = client.connection_lost("reset", 1.0)
    assert isinstance(step.failed[rid], ProviderUnavailable) and step.notifications == [ClusterDown()]
    with pytest.raises(ProviderUnavailable, match="reset; reconnecting"):
        client.request(ServiceKind.RENEW, 1.0)
    assert client.deadline == pytest.approx(1.1)
    assert not client.tick(1.1 - TICK).dial and client.tick(1.1).dial
    client.dial_failed(1.1)
    client.dial_failed(1.3)
    client.dial_failed(1.7)
    assert client.deadline == pytest.approx(2.1), "0.1, 0.2, 0.4, then at the 0.4 limit"


def test_a_reconnect_resumes_after_the_last_revision_it_was_told_of() -> None:
    client = opened()
    entries = wire.entries_to_wire([Entry(key="k", value=b"v", revision=Revision(9))])
    step = client.receive(snapshot(4) + wire.encode(ServiceKind.GOSSIP_UPDATE, 0, entries=entries), 0.0)
    assert [type(n) for n in step.notifications] == [MembershipUpdate, GossipUpdate]
    client.connection_lost("reset", 0.0)
    sent = decoded(client.hello(0.1))
    assert (sent.payload["takeover"], sent.payload["resume"], sent.payload["resume_after"]) == ("tok", True, 9)
    assert client.receive(welcome("tok2"), 0.1).welcomed and client.welcomes == 2 and client.takeover == "tok2"


@pytest.mark.parametrize("refusal", [NodeIdInUse("held"), Unauthenticated("secret changed")])
def test_a_reconnect_refused_for_the_id_or_the_secret_fences_the_session(refusal: Exception) -> None:
    client = opened()
    client.connection_lost("reset", 0.0)
    client.hello(0.1)
    with pytest.raises(type(refusal)):
        client.receive(error_frame(1, refusal), 0.1)  # type: ignore[arg-type]
    assert client.phase is Phase.CLOSED and client.deadline is None
    with pytest.raises(ProviderClosed, match="is closed"):
        client.request(ServiceKind.RENEW, 0.2)
    assert not client.connection_lost("refused", 0.2).notifications


def test_a_reconnect_refused_for_another_reason_is_tried_again() -> None:
    client = opened()
    client.connection_lost("reset", 0.0)
    client.hello(0.1)
    with pytest.raises(ProviderUnavailable):
        client.receive(error_frame(1, ProviderUnavailable("full")), 0.1)
    assert not client.connection_lost("refused", 0.1).notifications, "the Core was told once already"
    assert client.phase is Phase.DIALLING and client.deadline is not None


def test_a_session_taken_over_is_fenced_and_a_stale_session_never_acts() -> None:
    client = opened()
    step = client.receive(error_frame(0, ProviderClosed("taken over")), 1.0)
    assert step.close is not None and step.notifications == [ClusterDown()]
    assert client.phase is Phase.CLOSED and isinstance(client.fenced, ProviderClosed)
    with pytest.raises(ProviderClosed):
        client.request(ServiceKind.RENEW, 1.0)
    assert not client.connection_lost("closed", 1.0).notifications and client.deadline is None


def test_an_unanswered_hello_ends_the_connection_at_the_timeout() -> None:
    client = ClientSession(N1, secret="s", timeout=0.5)
    client.hello(2.0)
    assert client.tick(2.5 - TICK).close is None
    assert client.tick(2.5).close is not None


def test_a_membership_delta_on_another_epoch_is_malformed() -> None:
    client = opened()
    client.receive(snapshot(4), 0.0)
    delta = wire.encode(ServiceKind.MEMBERSHIP_DELTA, 0, base=3, epoch=5, changes=[])
    with pytest.raises(MalformedMessage):
        client.receive(delta, 0.0)


def test_a_session_closed_while_a_dial_is_under_way_sends_no_hello() -> None:
    client = opened()
    client.connection_lost("reset", 0.0)
    client.close()
    client.dial_failed(0.1)
    assert client.deadline is None
    with pytest.raises(ProviderClosed):
        client.hello(0.1)


def _error_tree(cls: type[ClusterError] = ClusterError) -> list[type[ClusterError]]:
    """Every class of the tree that defines a code of its own (a runtime's subclass inherits its parent's)."""
    own = [cls] if "code" in vars(cls) else []
    return own + [sub for child in cls.__subclasses__() for sub in _error_tree(child)]


def test_every_error_of_the_spec_s_tree_comes_off_the_wire_as_itself() -> None:
    """Each class's own code, decoded off the wire, is that class again with its message (a class left out of the
    registry the client rebuilds errors from shows here: a remote Core must see the errors a local one does),
    INVALID_IDENTIFIER too, whose constructor takes structured fields; a CAS failure by its own layout."""
    tree = _error_tree()
    assert len({cls.code for cls in tree}) == len(tree), "two errors share a wire code"
    for cls in tree:
        error: ClusterError
        if cls is RevisionMismatch:
            error = RevisionMismatch("k", 3, Entry(key="k", value=b"v", revision=Revision(4)))
        elif cls is InvalidIdentifier:
            error = InvalidIdentifier("node", "a b")
        else:
            error = cls("refused")
        came = error_from(decoded(error_frame(9, error)))
        assert type(came) is cls and came.condition == error.condition, cls.__name__
        assert came.message == error.message
