"""The failure detector's rules at their exact boundaries, driven by a fake clock (``now`` is a number),
and the failure policy, the one place a timing is checked."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.cluster.detector import FailureDetector, FailurePolicy
from spec.cluster.interface import FailureTiming
from spec.cluster.types import NodeId, NodeState

N, M = NodeId("n"), NodeId("m")
POLICY = FailurePolicy(heartbeat_interval=1.0, fail_after=4.0)
PFAIL_AFTER, FAIL_AFTER = POLICY.pfail_after, POLICY.fail_after
MEMBERS = {N, M}


def detector_renewed_at(t: float) -> FailureDetector:
    detector = FailureDetector(POLICY)
    detector.renew(N, t)
    return detector


def test_ok_up_to_and_including_pfail_after() -> None:
    assert detector_renewed_at(10.0).tick(10.0 + PFAIL_AFTER, MEMBERS) == {N: NodeState.OK}


def test_pfail_just_after_pfail_after_and_up_to_fail_after() -> None:
    detector = detector_renewed_at(10.0)
    assert detector.tick(10.0 + PFAIL_AFTER + 0.25, MEMBERS) == {N: NodeState.PFAIL}
    assert detector.tick(10.0 + FAIL_AFTER, MEMBERS) == {N: NodeState.PFAIL}, "still PFAIL at exactly fail_after"


def test_fail_just_after_fail_after() -> None:
    assert detector_renewed_at(10.0).tick(10.0 + FAIL_AFTER + 0.25, MEMBERS) == {N: NodeState.FAIL}


@pytest.mark.parametrize("silent_for", [PFAIL_AFTER + 0.5, FAIL_AFTER + 0.5])
def test_a_renewal_makes_a_suspected_or_failed_node_ok_at_the_next_tick(silent_for: float) -> None:
    detector = detector_renewed_at(0.0)
    assert detector.tick(silent_for, MEMBERS) != {N: NodeState.OK}
    detector.renew(N, silent_for + 1.0)
    assert detector.tick(silent_for + 1.0, MEMBERS) == {N: NodeState.OK}


def test_every_renewal_counts_not_only_the_first() -> None:
    detector = detector_renewed_at(0.0)
    detector.renew(N, 4.0)
    assert detector.tick(4.0 + PFAIL_AFTER, MEMBERS) == {N: NodeState.OK}, "the second renewal restarts the clock"


def test_a_tick_judges_every_member_with_a_renewal_each_on_its_own() -> None:
    detector = detector_renewed_at(0.0)
    detector.renew(M, 2.5)
    assert detector.tick(3.0, MEMBERS) == {N: NodeState.PFAIL, M: NodeState.OK}
    assert detector.tick(3.0, {M}) == {M: NodeState.OK}, "a node that is not a member is not judged"


def test_a_node_that_left_starts_afresh_when_it_joins_again() -> None:
    detector = detector_renewed_at(0.0)
    detector.tick(1.0, set())
    assert N not in detector.last_renewal, "a node that is no longer a member is not kept"
    assert detector.tick(FAIL_AFTER + 1.0, MEMBERS) == {}, "and not judged when it is a member again unrenewed"
    detector.renew(N, FAIL_AFTER + 3.0)
    assert detector.tick(FAIL_AFTER + 3.0, MEMBERS) == {N: NodeState.OK}


@given(st.lists(st.integers(0, 100), min_size=1, max_size=8), st.integers(0, 120))
def test_verdict_is_the_age_of_the_last_renewal(renewals: list[int], now_offset: int) -> None:
    """Ages in quarter seconds, so every boundary is hit exactly."""
    detector = FailureDetector(POLICY)
    times = sorted(r / 4 for r in renewals)
    for t in times:
        detector.renew(N, t)
    now = times[-1] + now_offset / 4
    age = now - times[-1]
    expected = NodeState.OK if age <= PFAIL_AFTER else NodeState.PFAIL if age <= FAIL_AFTER else NodeState.FAIL
    assert detector.tick(now, MEMBERS) == {N: expected}


def test_the_policy_derives_pfail_ticks_bound_and_ttl_from_heartbeat_and_fail_after() -> None:
    policy = FailurePolicy(heartbeat_interval=0.5, fail_after=5.0)
    assert (policy.pfail_after, policy.check_interval, policy.fail_bound) == (2.5, 0.25, 5.5)
    assert policy.timing() == FailureTiming(heartbeat_interval=0.5, ttl=5.0, fail_bound=5.5)


@pytest.mark.parametrize("heartbeat, fail_after", [
    (0.0, 1.0), (-1.0, 1.0), (0.0009, 1.0),  # no heartbeat, or one finer than the wire's milliseconds
    (1.0, 1.5), (1.0, 0.0),  # one late heartbeat could fail a node; no PFAIL window
    (math.nan, 1.0), (1.0, math.nan), (1.0, math.inf),  # nothing a comparison can order
    (1.0, 2**32 / 1000),  # a fail bound the wire's u32 milliseconds cannot carry
])
def test_a_policy_that_cannot_be_run_or_declared_is_refused(heartbeat: float, fail_after: float) -> None:
    with pytest.raises(ValueError):
        FailurePolicy(heartbeat_interval=heartbeat, fail_after=fail_after)


def test_the_largest_policy_the_wire_carries_is_accepted() -> None:
    policy = FailurePolicy(heartbeat_interval=1.0, fail_after=(2**32 - 1) / 1000 - 1.0)
    assert round(policy.fail_bound * 1000) <= 2**32 - 1


def test_silence_the_backend_could_not_read_is_not_silence() -> None:
    detector = detector_renewed_at(0.0)
    late = FAIL_AFTER + 2.0
    assert detector.tick(late, MEMBERS, unread_for=late - PFAIL_AFTER) == {N: NodeState.OK}, \
        "renewals waiting unread counted as silence"
    assert detector.tick(late, MEMBERS, unread_for=late - PFAIL_AFTER - 0.25) == {N: NodeState.PFAIL}
    assert detector.tick(late, MEMBERS, unread_for=0.0) == {N: NodeState.FAIL}, "observed silence still fails"
