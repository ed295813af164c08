"""Model check: M writers x R readers over a modelled network, every invariant after every action.

Hypothesis picks the configuration (sizes chosen so buffers flush by size and by age, producers
block on permits and readers pause on their quota), then any interleaving of connects, writes,
socket writes, deliveries, consumer releases and time. Teardown drains the network fairly: both
sides must always complete (liveness), with every record delivered once and in order, and every
permit and quota back to full.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from shuffle_netsim import Network

from spec.shuffle.settings import ShuffleSettings


@st.composite
def shuffle_configs(
    draw: st.DrawFn, timeouts: tuple[int, ...] = (1000, 5000, -1), checksums: tuple[bool, ...] = (True, False),
    max_peers: int = 3,
) -> dict[str, Any]:
    """A small shuffle whose sizes make every flow-control path reachable."""
    m = draw(st.integers(1, max_peers))
    r = draw(st.integers(1, max_peers))
    record = st.binary(min_size=0, max_size=24)
    script = {(w, rd): draw(st.lists(record, max_size=4)) for w in range(m) for rd in range(r)}
    settings = ShuffleSettings(
        checksum_enabled=draw(st.sampled_from(checksums)),
        network_buffer_size=draw(st.sampled_from([8, 16, 48])),
        network_buffer_max_wait_time_ms=draw(st.sampled_from([1, 5, 50])),
        writer_max_memory=1,
        reader_max_memory=m * draw(st.sampled_from([40, 80, 400])),
        writer_connection_timeout_ms=draw(st.sampled_from(timeouts)),
    )
    return dict(script=script, num_writers=m, num_readers=r, settings=settings,
                wire_capacity=draw(st.integers(1, 3)))


class ShuffleModel(RuleBasedStateMachine):
    """The fault-free network: nothing may fail except a writer whose reader never connected in time."""

    def __init__(self) -> None:
        super().__init__()
        self.net: Network | None = None

    @initialize(config=shuffle_configs())
    def setup(self, config: dict[str, Any]) -> None:
        self.net = Network(**config)

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        assert self.net is not None
        actions = [a for a in self.net.actions() if a != ("tick",)]  # time passes through wait()
        assume(actions)
        self.net.apply(data.draw(st.sampled_from(actions), label="action"))

    @rule(ms=st.integers(0, 20))
    def wait(self, ms: int) -> None:
        assert self.net is not None
        self.net.advance(ms / 1000.0)

    @invariant()
    def holds(self) -> None:
        if self.net is not None:
            self.net.check_invariants()

    def teardown(self) -> None:
        if self.net is not None:
            self.net.drain()


def test_model_delivers_everything_once_in_order(table_coverage: None) -> None:
    run_state_machine_as_test(ShuffleModel)
