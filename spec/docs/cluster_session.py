"""The "Sessions" section of ``docs/spec/cluster.md``: both ends of a service session
(:mod:`spec.cluster.session`) run on a fake clock, each row what the machine returned for one input,
so the table is the rules as the code applies them."""

from __future__ import annotations

import re
from typing import Callable

from spec.cluster import session as sessions
from spec.cluster import wire
from spec.cluster.errors import ERRORS_BY_CODE, ClusterError, NodeIdInUse
from spec.cluster.interface import FailureTiming
from spec.cluster.session import Answer, ClientSession, ClientStep, Hello, Request, ServiceInput, ServiceSession
from spec.cluster.types import Membership, NodeId
from spec.cluster.wire import ServiceKind
from spec.docs.markdown import anchor, table

TIMING = FailureTiming(heartbeat_interval=0.2, ttl=0.6, fail_bound=1.2)
"""The defaults' timing (heartbeat 200 ms, fail_after 1 s)."""
MS = 0.001


def _hello(secret: str = "s", resume_after: int | None = None, takeover: str = "") -> bytes:
    return wire.encode(ServiceKind.HELLO, 1, node_id="n1", secret=secret, takeover=takeover,
                       resume=resume_after is not None, resume_after=resume_after or 0)


def _frame(frame: bytes) -> str:
    message = wire.decode(frame[4:])
    if message.kind is ServiceKind.ERROR:
        return f"ERROR (request {message.request_id}) {ERRORS_BY_CODE.get(message.payload['code'], ClusterError).condition}"
    return f"{message.kind.name} (request {message.request_id})"


def _asked(asked: ServiceInput) -> str:
    if isinstance(asked, Answer):
        return _frame(asked.frame) + (", then close" if asked.close else "")
    if isinstance(asked, Hello):
        return f"open node {asked.node_id} (takeover {asked.takeover or 'none'}, resume after {asked.resume_after})"
    assert isinstance(asked, Request)
    return f"run {asked.message.kind.name}"


def service_end() -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def fresh(served: int, frame: bytes, what: str) -> ServiceSession:
        session = ServiceSession(secret="s", max_sessions=2, fail_bound=TIMING.fail_bound)
        rows.append((what, f"{served} of 2", "; ".join(_asked(a) for a in session.receive(frame, 0.0, served))))
        return session

    fresh(0, wire.encode(ServiceKind.RENEW, 5), "a stranger's RENEW")
    fresh(0, _hello(secret="wrong"), "HELLO with another secret")
    fresh(2, _hello(), "HELLO")
    session = ServiceSession(secret="s", max_sessions=2, fail_bound=TIMING.fail_bound)
    for asked in session.receive(_hello(resume_after=7, takeover="t1"), 0.0, served=1):
        assert isinstance(asked, Hello)
        welcome = session.welcome(asked, "t2", TIMING)
        rows.append(("HELLO resuming after 7 with token t1", "1 of 2",
                     f"{_asked(asked)}; once open: {_frame(welcome)}, the node's frames bounded by "
                     f"{wire.MAX_REQUEST_BYTES:,} bytes instead of {wire.MAX_HELLO_BYTES:,}"))
    for frame, what in ((wire.encode(ServiceKind.RENEW, 2), "RENEW"), (_hello(), "HELLO again"),
                        (wire.encode(ServiceKind.OK, 3), "OK (not a request)")):
        rows.append((what, "2 of 2", "; ".join(_asked(a) for a in session.receive(frame, 1.0, served=2))))
    for at in (1.0 + TIMING.fail_bound, 1.0 + TIMING.fail_bound + MS):
        rows.append((f"silence check at t = {at:.3f} s (last frame at 1.000 s)", "",
                     "silent: close" if session.silent(at) else "not silent"))
    for held in (1.0 + TIMING.fail_bound, 1.0 + TIMING.fail_bound + MS):
        at = held + 10.0
        rows.append((f"silence check at t = {at:.3f} s, its reads held since {held:.3f} s", "",
                     "silent: close" if session.silent(at, held_since=held) else "not silent (held time is unread)"))
    rows.append(("another connection opened n1 with token t2", "", _frame(session.taken_over()) + ", then close"))
    return rows


def _step(step: ClientStep) -> str:
    said = [f"request {rid} answered {reply.kind.name}" for rid, reply in step.replies.items()]
    said += [f"request {rid} fails {error.condition}" for rid, error in step.failed.items()]
    said += [f"tell the Core {type(n).__name__}" for n in step.notifications]
    said += ["welcomed"] if step.welcomed else []
    said += [f"close the connection ({step.close})"] if step.close else []
    said += ["dial"] if step.dial else []
    return "; ".join(said) or "nothing"


def client_end() -> list[tuple[str, str, str]]:
    client = ClientSession(NodeId("n1"), secret="s", timeout=0.5, backoff=sessions.Backoff(first=0.05, limit=2.0),
                           uniform=lambda low, high: high)
    rows: list[tuple[str, str, str]] = []

    def row(at: float, what: str, outcome: Callable[[], str]) -> None:
        try:
            said = outcome()
        except ClusterError as refused:
            said = f"raises {refused.condition}"
        rows.append((f"{at:.3f}", what, f"{said} (next deadline {_at(client.deadline)})"))

    def sent(frame: bytes) -> str:
        message = wire.decode(frame[4:])
        p = message.payload
        if message.kind is ServiceKind.HELLO:
            return f"send HELLO (takeover {p['takeover'] or 'none'}, resume {p['resume']}, after {p['resume_after']})"
        return f"send {message.kind.name} (request {message.request_id})"

    welcome = wire.encode(ServiceKind.WELCOME, 1, session="t1", **wire.timing_to_wire(TIMING))
    row(0.0, "connected", lambda: sent(client.hello(0.0)))
    row(0.001, "WELCOME (token t1, fail_bound 1.2 s)", lambda: _step(client.receive(welcome, 0.001)))
    snapshot = wire.encode(ServiceKind.MEMBERSHIP, 0, **wire.membership_to_wire(Membership(epoch=5, shards={})))
    row(0.002, "MEMBERSHIP of epoch 5", lambda: _step(client.receive(snapshot, 0.002)))
    row(1.0, "RENEW asked", lambda: sent(client.request(ServiceKind.RENEW, 1.0)[1]))
    row(2.2 - MS, "tick", lambda: _step(client.tick(2.2 - MS)))
    row(2.2, "tick", lambda: _step(client.tick(2.2)))
    row(2.2, "the connection ended", lambda: _step(client.connection_lost("abandoned", 2.2)))
    row(2.25, "tick", lambda: _step(client.tick(2.25)))
    row(2.25, "connected again", lambda: sent(client.hello(2.25)))
    refused = wire.encode(ServiceKind.ERROR, 1, code=NodeIdInUse.code, message="node n1 is held by another session")
    row(2.26, "NODE_ID_IN_USE", lambda: _step(client.receive(refused, 2.26)))
    row(2.3, "RENEW asked", lambda: sent(client.request(ServiceKind.RENEW, 2.3)[1]))
    return rows


def _at(deadline: float | None) -> str:
    return "none" if deadline is None else f"{deadline:.3f}"


def sessions_section() -> str:
    return (
        anchor("sessions") + "## Sessions (both ends)\n\n"
        + re.sub(r":\w+:`([^`]*)`", r"`\1`", " ".join(sessions.__doc__.split("\n\n")[1:]))
        .replace("\n", " ").replace("``", "`").rstrip() + "\n\n"
        + anchor("session-service") + "### The service's end (`ServiceSession`)\n\n"
        "Each row: a fresh stranger's connection, then one session through its life (fail_bound "
        f"{TIMING.fail_bound:g} s, at most 2 nodes served, secret `s`).\n\n"
        + table(("frame or event", "nodes served", "what the session returns"), service_end())
        + "\n" + anchor("session-client") + "### The client's end (`ClientSession`)\n\n"
        f"One session on a fake clock (timeout 0.5 s, so a request waits `max(0.5, {TIMING.fail_bound:g})` s; "
        "backoff from 50 ms, jitter at its top):\n\n"
        + table(("t (s)", "input", "what the session returns"), client_end())
    )
