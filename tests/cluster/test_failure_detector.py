"""The failure detector's rules at their exact boundaries, driven by a fake clock (``now`` is a number)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.cluster.detector import FailureDetector, FailurePolicy
from spec.cluster.interface import FailureTiming
from spec.cluster.types import NodeId, NodeState

N, M = NodeId("n"), NodeId("m")
PFAIL_AFTER, FAIL_AFTER = 2.0, 5.0


class Judged:
    """A detector with the states its verdicts were applied to, as a backend's model holds them
    (the detector itself keeps only renewal times)."""

    def __init__(self, pfail_after: float = PFAIL_AFTER, fail_after: float = FAIL_AFTER) -> None:
        self.detector = FailureDetector(pfail_after, fail_after)
        self.states: dict[NodeId, NodeState] = {}

    def renew(self, node_id: NodeId, now: float) -> None:
        self.detector.renew(node_id, now)

    def forget(self, node_id: NodeId) -> None:
        self.detector.forget(node_id)
        self.states.pop(node_id, None)

    def tick(self, now: float) -> dict[NodeId, NodeState]:
        changed = self.detector.tick(now, self.states)
        self.states.update(changed)
        return changed


def detector_renewed_at(t: float) -> Judged:
    detector = Judged()
    detector.renew(N, t)
    return detector


def test_ok_up_to_and_including_pfail_after() -> None:
    detector = detector_renewed_at(10.0)
    assert detector.tick(10.0 + PFAIL_AFTER) == {}
    assert detector.states.get(N, NodeState.OK) is NodeState.OK


def test_pfail_just_after_pfail_after_and_up_to_fail_after() -> None:
    detector = detector_renewed_at(10.0)
    assert detector.tick(10.0 + PFAIL_AFTER + 0.25) == {N: NodeState.PFAIL}
    assert detector.tick(10.0 + FAIL_AFTER) == {}, "still PFAIL at exactly fail_after"


def test_fail_just_after_fail_after() -> None:
    detector = detector_renewed_at(10.0)
    assert detector.tick(10.0 + FAIL_AFTER + 0.25) == {N: NodeState.FAIL}


@pytest.mark.parametrize("silent_for", [PFAIL_AFTER + 0.5, FAIL_AFTER + 0.5])
def test_a_renewal_makes_a_suspected_or_failed_node_ok_at_the_next_tick(silent_for: float) -> None:
    detector = detector_renewed_at(0.0)
    assert detector.tick(silent_for) != {}
    detector.renew(N, silent_for + 1.0)
    assert detector.tick(silent_for + 1.0) == {N: NodeState.OK}


def test_every_renewal_counts_not_only_the_first() -> None:
    detector = detector_renewed_at(0.0)
    detector.renew(N, 4.0)
    assert detector.tick(4.0 + PFAIL_AFTER) == {}, "the second renewal restarts the clock"


def test_a_tick_reports_only_verdicts_that_changed() -> None:
    detector = detector_renewed_at(0.0)
    detector.renew(M, 0.0)
    assert detector.tick(1.0) == {}
    detector.renew(M, 2.5)
    assert detector.tick(3.0) == {N: NodeState.PFAIL}
    assert detector.tick(3.5) == {}


def test_a_forgotten_node_starts_afresh() -> None:
    detector = detector_renewed_at(0.0)
    assert detector.tick(FAIL_AFTER + 1.0) == {N: NodeState.FAIL}
    detector.forget(N)
    assert detector.tick(FAIL_AFTER + 2.0) == {}, "a forgotten node gets no verdict"
    detector.renew(N, FAIL_AFTER + 3.0)
    assert detector.tick(FAIL_AFTER + 3.0) == {}, "a fresh node is OK from the start: no change to report"


def test_verdicts_are_judged_against_the_callers_states_not_a_copy() -> None:
    """The states a tick compares with are the caller's (the model's): a node the caller holds as
    FAIL -- journaled before a restart, say -- that renews is reported OK."""
    detector = FailureDetector(PFAIL_AFTER, FAIL_AFTER)
    detector.renew(N, 10.0)
    assert detector.tick(10.0, {N: NodeState.FAIL}) == {N: NodeState.OK}
    assert detector.tick(10.0, {N: NodeState.OK}) == {}
    assert detector.tick(10.0, {}) == {}, "a node the caller does not hold counts as OK"


@pytest.mark.parametrize("pfail_after, fail_after", [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_windows_must_be_positive_and_ordered(pfail_after: float, fail_after: float) -> None:
    with pytest.raises(ValueError):
        FailureDetector(pfail_after, fail_after)


def test_equal_windows_skip_pfail() -> None:
    detector = Judged(1.0, 1.0)
    detector.renew(N, 0.0)
    assert detector.tick(1.5) == {N: NodeState.FAIL}


@given(st.lists(st.integers(0, 100), min_size=1, max_size=8), st.integers(0, 120))
def test_verdict_is_the_age_of_the_last_renewal(renewals: list[int], now_offset: int) -> None:
    """Ages in quarter seconds, so every boundary is hit exactly."""
    detector = Judged()
    times = sorted(r / 4 for r in renewals)
    for t in times:
        detector.renew(N, t)
    now = times[-1] + now_offset / 4
    detector.tick(now)
    age = now - times[-1]
    expected = NodeState.OK if age <= PFAIL_AFTER else NodeState.PFAIL if age <= FAIL_AFTER else NodeState.FAIL
    assert detector.states.get(N, NodeState.OK) is expected


def test_the_policy_derives_pfail_ticks_bound_and_ttl_from_heartbeat_and_fail_after() -> None:
    policy = FailurePolicy(heartbeat_interval=0.5, fail_after=5.0)
    assert (policy.pfail_after, policy.check_interval, policy.fail_bound) == (2.5, 0.25, 5.5)
    assert policy.timing() == FailureTiming(heartbeat_interval=0.5, ttl=5.0, fail_bound=5.5)
    detector = policy.detector()
    assert (detector.pfail_after, detector.fail_after) == (2.5, 5.0)


@pytest.mark.parametrize("heartbeat, fail_after", [(0.0, 1.0), (1.0, 1.5)])
def test_a_policy_where_one_late_heartbeat_could_fail_a_node_is_refused(heartbeat: float, fail_after: float) -> None:
    with pytest.raises(ValueError):
        FailurePolicy(heartbeat_interval=heartbeat, fail_after=fail_after)
