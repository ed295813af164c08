"""A task cut off from the cluster provider (``cluster_down``): it keeps streaming until the other
tasks must have been told it is FAIL, then its lookups fail with ClusterUnreachable."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from reference.cluster.memory import InProcessCluster
from reference.cluster.service import ClusterService
from reference.shuffle.cluster_directory import ClusterDirectory
from reference.shuffle.directory_errors import ClusterUnreachable
from reference.shuffle.shard_view import ShardView
from spec.cluster.types import Entry, Membership, NodeId, NodeInfo, NodeState, Revision, ShardId
from spec.shuffle import coordination

DEADLINE_S = 30.0
"""Only to end a broken run; nothing here asserts on time."""


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(0.01)


def test_a_cut_off_task_fails_once_the_others_must_have_declared_it_failed() -> None:
    """The cluster service a task reaches goes away: ``cluster_down``, then, one failure bound after
    its last renewal, its lookups raise ClusterUnreachable (they keep working before that)."""
    cluster = InProcessCluster()
    service = ClusterService(cluster)
    holder = ClusterDirectory(cluster, "driver")
    task = ClusterDirectory.connect(service.url, holder.shard, "writer0")
    key = coordination.ShuffleKey(0, 0)
    try:
        assert task.lookup(key) == coordination.Writers(())
        service.close()
        _wait_until(lambda: task.view.cut_off_for() is not None, "cluster_down")
        deadline = time.monotonic() + DEADLINE_S
        with pytest.raises(ClusterUnreachable) as cut_off:
            while time.monotonic() < deadline:
                task.lookup(key)
                time.sleep(0.01)
        assert cut_off.value.condition == "STREAMING_SHUFFLE_CLUSTER_UNREACHABLE"
        assert task.node_id in str(cut_off.value)
    finally:
        task.close()
        holder.close()
        service.close()
        cluster.close()


def test_cut_off_time_counts_from_the_last_renewal_and_a_renewal_ends_it() -> None:
    now = [10.0]
    view = ShardView(clock=lambda: now[0])
    view.cluster_heartbeat(1.0)
    assert view.cut_off_for() is None
    now[0] = 10.5
    view.cluster_down()
    now[0] = 11.25
    assert view.cut_off_for() == 1.25
    view.cluster_heartbeat(1.0)
    assert view.cut_off_for() is None


def test_a_membership_delivered_late_does_not_replace_a_newer_one() -> None:
    """Snapshots may arrive out of order (a catch-up after a newer push): the highest epoch stands."""
    shard = ShardId("s1")

    def snapshot(epoch: int, state: NodeState) -> Membership:
        return Membership(epoch=epoch, shards={shard: (NodeInfo(node_id=NodeId("n1"), address="h:1", state=state),)})

    view = ShardView()
    view.update_membership(snapshot(2, NodeState.FAIL))
    view.update_membership(snapshot(1, NodeState.OK))
    assert view.failed_members(shard) == [NodeId("n1")]


def test_an_older_entry_heard_late_does_not_replace_the_newer_one() -> None:
    """A catch-up may repeat what a node already wrote or heard: only newer revisions are kept and passed on."""
    passed_on: list[Entry] = []
    view = ShardView(on_entry=passed_on.append)
    newer = Entry(key="w/0", value=b"second", revision=Revision(5))
    view.remember(newer)
    view.notify_shard_log_update(ShardId("s1"), [Entry(key="w/0", value=b"first", revision=Revision(3)), newer])
    assert view.entry("w/0") == newer and passed_on == []
