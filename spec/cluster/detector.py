"""Heartbeat failure detector (sans-IO): renewals and ``now`` in, health verdicts out.

A node is OK while its last renewal is at most ``pfail_after`` old, PFAIL up to ``fail_after``,
then FAIL; a renewal makes it OK again. The backend calls :meth:`tick` at least every
``check_interval``, so FAIL is decided within ``fail_after + check_interval`` of the last renewal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spec.cluster.types import NodeId, NodeState


@dataclass(slots=True)
class FailureDetector:
    pfail_after: float
    fail_after: float
    last_renewal: dict[NodeId, float] = field(default_factory=dict)
    states: dict[NodeId, NodeState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.pfail_after <= self.fail_after:
            raise ValueError("need 0 < pfail_after <= fail_after")

    def renew(self, node_id: NodeId, now: float) -> None:
        self.last_renewal[node_id] = now

    def forget(self, node_id: NodeId) -> None:
        self.last_renewal.pop(node_id, None)
        self.states.pop(node_id, None)

    def tick(self, now: float) -> dict[NodeId, NodeState]:
        """Verdicts that changed since the previous tick."""
        changed: dict[NodeId, NodeState] = {}
        for node_id, last in self.last_renewal.items():
            age = now - last
            state = (NodeState.OK if age <= self.pfail_after
                     else NodeState.PFAIL if age <= self.fail_after else NodeState.FAIL)
            if self.states.get(node_id, NodeState.OK) is not state:
                changed[node_id] = state
            self.states[node_id] = state
        return changed
