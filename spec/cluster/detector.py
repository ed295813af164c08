"""Heartbeat failure detector (sans-IO): renewals and ``now`` in, health verdicts out.

A member is OK while its last renewal is at most ``pfail_after`` old, PFAIL up to ``fail_after``,
then FAIL; a renewal makes it OK again. Silence counts only where the detector could observe it: a
tick is told how long its backend has been unable to read renewals (``unread_for``: the renewals
waiting in a socket while a busy service served other work), and ages run to ``now - unread_for``,
so a busy backend slows its verdicts down instead of failing the members it did not read. The detector keeps only renewal times and judges the members
its caller holds: each tick returns the verdict on every one of them, and the model commits only
the verdicts that change a member's state (``ClusterModel.set_state``), so a state has one copy and
"does this verdict change anything" one home. The backend ticks at least every ``check_interval``
and commits a tick's verdicts under the lock it read the members under, so FAIL is decided within
``fail_after + check_interval`` of the last renewal and no verdict meets a member that changed since.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection

from spec.clock import after, elapsed
from spec.cluster.interface import FailureTiming
from spec.cluster.types import NodeId, NodeState

MAX_TIMING_MS = 2**32 - 1
"""Timings travel as whole milliseconds in u32 fields (the cluster service's WELCOME)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailurePolicy:
    """A detector-driven backend's failure timing, and everything derived from it: one home, so the
    in-process cluster, its TCP service and a Spark driver's cluster cannot disagree, and the only
    place a timing is checked (the detector takes its thresholds from here).

    A live node renews every ``heartbeat_interval``; silent for more than ``fail_after`` it is FAIL,
    for more than half of that PFAIL, counting only silence the detector could observe: time its
    backend could not read renewals (they were waiting unread) is not silence, and the bounds below
    hold from the moment the backend reads again. ``fail_after`` must cover at least two heartbeats, so one late
    renewal is never a FAIL. The backend ticks its detector every half heartbeat, so FAIL is decided
    within ``fail_after + check_interval`` and every member is told within ``fail_bound``; a Core may
    consider itself cluster-OK for ``fail_after`` after a renewal (its ``ttl``). Every duration is a
    whole number of milliseconds or more and fits the wire's u32 milliseconds.
    """

    heartbeat_interval: float
    fail_after: float

    def __post_init__(self) -> None:
        if not self.heartbeat_interval >= 0.001:  # written so that NaN is refused too
            raise ValueError(f"the heartbeat interval must be at least 1 ms, got {self.heartbeat_interval} s")
        if not self.fail_after >= 2 * self.heartbeat_interval:
            raise ValueError(f"fail_after ({self.fail_after} s) must be at least twice the heartbeat "
                             f"interval ({self.heartbeat_interval * 1000:.0f} ms)")
        if self.fail_bound * 1000 > MAX_TIMING_MS:
            raise ValueError(f"fail_after ({self.fail_after} s) plus a heartbeat exceeds the wire's bound "
                             f"({MAX_TIMING_MS} ms)")

    @property
    def pfail_after(self) -> float:
        return self.fail_after / 2

    @property
    def check_interval(self) -> float:
        """How often the backend ticks its detector."""
        return self.heartbeat_interval / 2

    @property
    def fail_bound(self) -> float:
        """From a node's last renewal until every member was told it is FAIL: the decision, one
        more tick to commit it."""
        return self.fail_after + 2 * self.check_interval

    def timing(self) -> FailureTiming:
        """What the backend declares to its Cores."""
        return FailureTiming(heartbeat_interval=self.heartbeat_interval, ttl=self.fail_after,
                             fail_bound=self.fail_bound)


@dataclass(slots=True)
class FailureDetector:
    policy: FailurePolicy
    last_renewal: dict[NodeId, float] = field(default_factory=dict)
    """The members being judged; a member without a renewal is not judged."""

    def renew(self, node_id: NodeId, now: float) -> None:
        self.last_renewal[node_id] = now

    def verdict(self, age: float) -> NodeState:
        """The state of a member whose last renewal is ``age`` old."""
        return (NodeState.OK if age <= self.policy.pfail_after
                else NodeState.PFAIL if age <= self.policy.fail_after else NodeState.FAIL)

    def tick(self, now: float, members: Collection[NodeId], unread_for: float = 0.0) -> dict[NodeId, NodeState]:
        """The verdict on every one of ``members`` that has a renewal, judged at ``now - unread_for``
        (``unread_for``: how long renewals may have been waiting unread, so not observable); the
        renewals of nodes that are no longer members are dropped (a node that joins again is renewed
        when it joins)."""
        observed = after(now, -max(0.0, unread_for))
        self.last_renewal = {n: last for n, last in self.last_renewal.items() if n in members}
        return {node_id: self.verdict(elapsed(last, observed)) for node_id, last in self.last_renewal.items()}
