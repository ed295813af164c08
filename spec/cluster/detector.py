"""Heartbeat failure detector (sans-IO): renewals and ``now`` in, health verdicts out.

A node is OK while its last renewal is at most ``pfail_after`` old, PFAIL up to ``fail_after``,
then FAIL; a renewal makes it OK again. The detector keeps only renewal times: each tick compares
its verdicts with the states the caller holds (the model's members) and returns those that
differ, so a node's state has one copy. The backend calls :meth:`tick` at least every
``check_interval``, so FAIL is decided within ``fail_after + check_interval`` of the last renewal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from spec.cluster.interface import FailureTiming
from spec.cluster.types import NodeId, NodeState


@dataclass(frozen=True, slots=True, kw_only=True)
class FailurePolicy:
    """A detector-driven backend's failure timing, and everything derived from it: one home, so the
    in-process cluster, its TCP service and a Spark driver's cluster cannot disagree.

    A live node renews every ``heartbeat_interval``; silent for more than ``fail_after`` it is FAIL,
    for more than half of that PFAIL. ``fail_after`` must cover at least two heartbeats, so one late
    renewal is never a FAIL. The backend ticks its detector every half heartbeat, so FAIL is decided
    within ``fail_after + check_interval`` and every member is told within ``fail_bound``; a Core may
    consider itself cluster-OK for ``fail_after`` after a renewal (its ``ttl``).
    """

    heartbeat_interval: float
    fail_after: float

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval:
            raise ValueError(f"the heartbeat interval must be positive, got {self.heartbeat_interval}")
        if self.fail_after < 2 * self.heartbeat_interval:
            raise ValueError(f"fail_after ({self.fail_after * 1000:.0f} ms) must be at least twice the heartbeat "
                             f"interval ({self.heartbeat_interval * 1000:.0f} ms)")

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

    def detector(self) -> FailureDetector:
        return FailureDetector(self.pfail_after, self.fail_after)


@dataclass(slots=True)
class FailureDetector:
    pfail_after: float
    fail_after: float
    last_renewal: dict[NodeId, float] = field(default_factory=dict)
    """The nodes being judged; a node without a renewal is not judged."""

    def __post_init__(self) -> None:
        if not 0 < self.pfail_after <= self.fail_after:
            raise ValueError("need 0 < pfail_after <= fail_after")

    def renew(self, node_id: NodeId, now: float) -> None:
        self.last_renewal[node_id] = now

    def forget(self, node_id: NodeId) -> None:
        self.last_renewal.pop(node_id, None)

    def tick(self, now: float, states: Mapping[NodeId, NodeState]) -> dict[NodeId, NodeState]:
        """The verdicts that differ from ``states`` (a node missing there counts as OK)."""
        changed: dict[NodeId, NodeState] = {}
        for node_id, last in self.last_renewal.items():
            age = now - last
            state = (NodeState.OK if age <= self.pfail_after
                     else NodeState.PFAIL if age <= self.fail_after else NodeState.FAIL)
            if states.get(node_id, NodeState.OK) is not state:
                changed[node_id] = state
        return changed
