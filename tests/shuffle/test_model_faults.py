"""Fault model: the network may duplicate, drop, reorder or corrupt a message, close a connection
early, inject an undecodable frame, a message the receiver never accepts or one naming another
writer than its connection's, or let a second connection claim a reader that is already bound.

The network's oracle says, for every delivery, which side must fail and with which condition and
parameters (for example INCORRECT_SEQUENCE_NUMBER with the expected and actual seq); a failure
it did not predict, or a predicted one that does not happen, is a violation. The invariants keep
holding: a corrupted or out-of-order record is never surfaced. Teardown drains the network: no side
waits forever (the writer's ack wait is bounded here by the opt-in ack timeout, since Spark waits forever).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule, run_state_machine_as_test
from shuffle_netsim import Network
from test_model_shuffle import ShuffleModel, shuffle_configs


class FaultyShuffleModel(ShuffleModel):
    """Up to three faults; the writer's ack wait and its bind wait are bounded so nothing waits forever.

    Checksums are on: without them a flipped payload bit is undetectable by design (Spark's too).
    Up to 2x2, so that runs reach their data before a fault ends them (the BFS covers 2x2 fully).
    """

    @initialize(config=shuffle_configs(timeouts=(1000, 5000), checksums=(True,), max_peers=2))
    def setup(self, config: dict[str, Any]) -> None:
        self.net = Network(**config, faults=3, ack_timeout_ms=300)

    @rule(data=st.data())
    def fault(self, data: st.DataObject) -> None:
        """Any fault, drawn a quarter as often as the aimed ones (most of them end a run early)."""
        assert self.net is not None
        faults = list(self.net.fault_actions())
        if faults and data.draw(st.integers(0, 3), label="rarely") == 0:
            self.net.apply(data.draw(st.sampled_from(faults), label="fault"))

    @precondition(lambda self: self.net is not None and any(map(self.net.head_is_sequenced, self.net.fault_actions())))
    @rule(data=st.data())
    def fault_on_sequenced(self, data: st.DataObject) -> None:
        """A fault aimed at DATA, TERMINATION_CONTROL or TERMINATION_ACK (credits are advisory)."""
        assert self.net is not None
        faults = [f for f in self.net.fault_actions() if self.net.head_is_sequenced(f)]
        kind = data.draw(st.sampled_from(sorted({f[0] for f in faults}, key=str)), label="kind")
        self.net.apply(data.draw(st.sampled_from([f for f in faults if f[0] == kind]), label="fault"))

def test_faults_are_detected_with_sparks_condition_and_never_surfaced(table_coverage: None) -> None:
    run_state_machine_as_test(FaultyShuffleModel)
