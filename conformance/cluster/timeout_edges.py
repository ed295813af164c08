"""Every detector and session timeout of the failure policy's settings table (``policy_settings`` in
spec/docs/cluster.py, the table docs/spec/cluster.md shows) at its exact edge, one tick (1 ms) before
and one after, from one generator (:func:`edge_instants`): a node silent since its last frame must be
OK, PFAIL, FAIL and its session open exactly as the spec's thresholds say at each instant; and a node
whose RENEW waits unread while its service holds its reads (capability ``pause``) is none of these
past any deadline, since unread time is not silence (spec/cluster/detector.py), and is judged from the
moment its renewal is read, at the same edges again.

Each instant is judged by an observer that renews before every step and then writes a GLOBAL gossip
key: the membership it holds when that key reaches it is the one committed at that instant (its
notifications come in commit order). After a resume the exact instant is left out: the deadline and
the clock are then two sums of decimal milliseconds, which floating point need not make equal (as in
``wire/derived-silence-at-its-deadline``); before it, both count from the stopped clock's whole second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from conformance.cluster.harness import ClusterTarget, Session, session, stopped_clock, verdict
from conformance.cluster.model_cases import Member
from conformance.cluster.service_wire import RawConnection, ServiceAddress
from conformance.framework import CaseContext, CaseTimeout, Verdict
from spec.cluster.detector import FailurePolicy
from spec.cluster.types import NodeState
from spec.cluster.wire import ServiceKind, ServiceMessage
from spec.docs.cluster import policy_settings

PERIODS = frozenset({"heartbeat_interval", "check_interval"})
"""Settings that are periods (how often a node renews, how often the detector ticks), not timeouts."""
ONE_SIDED = frozenset({"ttl"})
"""Timeouts that bound only from below what the others may do: a Core is cluster-OK for ``ttl`` after a
renewal, so no member may see it FAIL at ``ttl`` or before; past it the spec owes no change."""
TIMEOUTS = frozenset({"pfail_after", "fail_after", "fail_bound"}) | ONE_SIDED
"""The detector's (PFAIL, FAIL), the session's (closed for silence) and the Core's (``ttl``) timeouts."""
TICK_MS = 1
"""The detector clock's step as a harness moves it (``CLOCK STOP <ms>``)."""


def timeout_ms(policy: FailurePolicy) -> dict[str, int]:
    """Every timeout of ``policy``'s settings table in whole milliseconds (ValueError: the table holds a
    setting this module has not judged to be a period or a timeout)."""
    settings = policy_settings(policy)
    unjudged = sorted(set(settings) - PERIODS - TIMEOUTS)
    if unjudged:
        raise ValueError(f"the settings table holds {unjudged}: say whether each is a period or a timeout")
    return {name: round(seconds * 1000) for name, seconds in settings.items() if name in TIMEOUTS}


def edge_instants(timeouts: Mapping[str, int], exact: bool = True) -> dict[int, list[tuple[str, int]]]:
    """Each instant (ms after the last frame) at which a timeout is judged, with the ``(timeout, offset)``
    edges it is: one tick before each timeout, at it (``exact``) and one tick past (a one-sided one: not past)."""
    instants: dict[int, list[tuple[str, int]]] = {}
    for name, ms in sorted(timeouts.items(), key=lambda item: (item[1], item[0])):
        for offset in (-TICK_MS, 0, TICK_MS)[:2 if name in ONE_SIDED else 3]:
            if offset or exact:
                instants.setdefault(ms + offset, []).append((name, offset))
    return dict(sorted(instants.items()))


def edge_label(name: str, offset: int) -> str:
    return f"{name} {'-' if offset < 0 else '+'}{abs(offset)} ms" if offset else f"exactly {name}"


@dataclass(frozen=True, slots=True)
class Owed:
    state: NodeState
    open: bool


def owed(age_ms: int, pfail_ms: int, fail_ms: int, bound_ms: int) -> Owed:
    """What a node silent for ``age_ms`` of observable time is owed (``pfail_ms`` 0: never PFAIL)."""
    state = (NodeState.OK if age_ms <= (pfail_ms or fail_ms) else
             NodeState.PFAIL if age_ms <= fail_ms else NodeState.FAIL)
    return Owed(state, age_ms <= bound_ms)


class EdgeRun:
    """A watched node on a raw connection and an observer, on a stopped clock from the watched node's
    join (instant 0)."""

    def __init__(self, target: ClusterTarget, s: Session, limits: tuple[int, int],
                 advance: Callable[[int], None]) -> None:
        assert target.url is not None
        address = ServiceAddress.parse(target.url)
        self.s, self.now = s, 0
        self.problems: list[str] = []
        self._advance = advance
        self._barriers = 0
        self.observer = Member(address, s.id_of("observer"), s.tag)
        self.watched_id = s.id_of("watched")
        self.watched = RawConnection(address)
        self.observer.hello()
        self._ok(self.observer.call(ServiceKind.JOIN_CLUSTER, address="127.0.0.1:7301"), ServiceKind.SHARD)
        self.watched.send(self.watched.hello(self.watched_id))
        welcome, _ = self.watched.until(ServiceKind.WELCOME, ServiceKind.ERROR)
        self._ok(welcome, ServiceKind.WELCOME)
        assert welcome is not None
        self.watched.request(ServiceKind.JOIN_CLUSTER, 2, address="127.0.0.1:7302")
        self._ok(self.watched.until(ServiceKind.SHARD, ServiceKind.ERROR)[0], ServiceKind.SHARD)
        pfail_ms, fail_ms = limits
        policy = FailurePolicy(heartbeat_interval=welcome.payload["heartbeat_ms"] / 1000, fail_after=fail_ms / 1000)
        self.timeouts = timeout_ms(policy)  # the declared policy's table, so its timeouts are the target's
        self.pfail_ms, self.fail_ms, self.bound_ms = pfail_ms, fail_ms, self.timeouts["fail_bound"]
        if not pfail_ms:
            self.timeouts.pop("pfail_after")

    @staticmethod
    def _ok(reply: ServiceMessage | None, kind: ServiceKind) -> None:
        if reply is None or reply.kind is not kind:
            raise CaseTimeout(f"a request was answered {reply}, not {kind.name}")

    def move_to(self, instant: int) -> None:
        """The observer renews, the clock moves to ``instant`` and the detector ticks."""
        self._ok(self.observer.call(ServiceKind.RENEW), ServiceKind.RENEWED)
        self._advance(instant - self.now)
        self.now = instant

    def state(self) -> str | None:
        """The watched node's state in the membership the observer holds once every commit before now
        reached it (a GLOBAL gossip write of its own, notified after them)."""
        self._barriers += 1
        key = f"{self.s.tag}:edge-{self._barriers}"
        seen = len(self.observer.seen)
        self._ok(self.observer.call(ServiceKind.UPDATE_GOSSIP, scope="GLOBAL",
                                    ops=[{"key": key, "value": b"", "expected": 0}]), ServiceKind.REVISION)
        self.observer.until(f"its gossip write {key}", lambda: len(self.observer.seen) > seen)
        return next((state for node, _, _, state in self.observer.view() if node == self.watched_id), None)

    def judge(self, label: str, want: Owed, session_too: bool) -> None:
        """The watched node against ``want`` at this instant (``session_too``: whether it is open too)."""
        seen = self.state()
        if seen != want.state.value:
            self.problems.append(f"{label} ({self.now} ms): the watched node was {seen}, owed {want.state.value}")
        if session_too:
            closed = self.watched.closed_within(0.05 if want.open else 5.0)
            if closed == want.open:
                self.problems.append(f"{label} ({self.now} ms): its session was {'closed' if closed else 'open'}, "
                                     f"owed {'open' if want.open else 'closed'}")

    def walk(self, since: int, exact: bool, held_at: int | None = None) -> None:
        """Every edge instant counted from ``since`` (the watched node's last frame read), each judged as
        the spec owes it: silent since then, or silent only up to ``held_at``, when its reads were held
        (what follows is unread time, not silence)."""
        for at, edges in edge_instants(self.timeouts, exact).items():
            self.move_to(since + at)
            want = owed(at if held_at is None else held_at, self.pfail_ms, self.fail_ms, self.bound_ms)
            self.judge(", ".join(edge_label(*edge) for edge in edges), want,
                       held_at is not None or any(name == "fail_bound" for name, _ in edges))
            if not want.open:
                return

    def close(self) -> None:
        self.observer.raw.close()
        self.watched.close()


def _run(target: ClusterTarget, ctx: CaseContext, held: bool) -> list[str]:
    with session(target, ctx) as s, stopped_clock(target, s) as (limits, advance):
        run = EdgeRun(target, s, (limits.pfail_after_ms, limits.fail_after_ms), advance)
        try:
            if not held:
                run.walk(0, exact=True)
                return run.problems
            hold = target.hold_reads
            assert hold is not None
            first = min(run.timeouts.values()) - TICK_MS
            run.move_to(first)
            hold(run.watched_id, True)
            run.watched.request(ServiceKind.RENEW, 99)  # waits unread from here
            run.walk(0, exact=True, held_at=first)
            if run.problems:
                return run.problems  # a session closed while held has nothing left to resume
            hold(run.watched_id, False)
            renewed, _ = run.watched.until(ServiceKind.RENEWED, ServiceKind.ERROR)
            if renewed is None or renewed.kind is not ServiceKind.RENEWED:
                return run.problems + [f"the RENEW that waited unread was answered {renewed} once read"]
            run.walk(run.now, exact=False)
            return run.problems
        finally:
            run.close()


def every_timeout_at_its_edge(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A node silent from its join (instant 0 on a stopped clock): at each timeout of the settings table
    (pfail_after, fail_after, fail_bound, ttl), 1 ms before, exactly at and 1 ms past, it is OK, PFAIL or
    FAIL and its session open or closed exactly as the thresholds say."""
    return verdict("a silent node is OK, PFAIL, FAIL and its session open exactly as each timeout of the settings "
                   "table says, 1 ms before it, at it and 1 ms past it", _run(target, ctx, held=False)[:4])


def unread_is_not_silence(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A node's service holds its reads 1 ms before its first timeout and a RENEW waits unread: at every
    edge of every timeout (before, at, past) it stays OK and its session open; once read, the RENEW is
    answered and renews it then, and from that moment every timeout is judged again 1 ms either side."""
    return verdict("a RENEW that waits unread past every deadline is not silence (OK, its session open); once "
                   "read it renews the node, judged from then at every timeout 1 ms either side",
                   _run(target, ctx, held=True)[:4])
