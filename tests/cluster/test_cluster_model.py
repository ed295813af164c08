"""The semantic model's rules, stated as examples a backend author can read."""

from __future__ import annotations

import pytest

from spec.cluster.errors import InvalidBatch, NotAMember, RevisionMismatch, UnknownShard
from spec.cluster.model import (ClusterModel, GossipUpdate, MemberRecord, MembershipChange, MembershipUpdate,
                                MembershipView, ShardLogUpdate)
from spec.cluster.types import MetadataOp, NodeId, NodeState, Revision, Scope, ShardId

A, B, C = NodeId("a"), NodeId("b"), NodeId("c")


def two_in_one_shard() -> ClusterModel:
    model = ClusterModel()
    model.join_cluster(A, "h:1", ShardId("s1"))
    model.join_cluster(B, "h:2", ShardId("s2"))
    model.join_shard(B, ShardId("s1"))
    return model


def test_batch_commits_at_one_revision_and_is_one_notification_per_member() -> None:
    model = two_in_one_shard()
    revision, out = model.update_shard_log(A, [MetadataOp(key="x", value=b"1"), MetadataOp(key="y", value=b"2")])
    assert [r for r, _ in out] == [A, B]
    for _, note in out:
        assert isinstance(note, ShardLogUpdate)
        assert {e.revision for e in note.entries} == {revision}


def test_stale_revision_fails_whole_batch_and_reports_current_entry() -> None:
    model = two_in_one_shard()
    r1, _ = model.update_shard_log(A, [MetadataOp(key="x", value=b"1")])
    r2, _ = model.update_shard_log(A, [MetadataOp(key="x", value=b"2", expected=r1)])
    with pytest.raises(RevisionMismatch) as info:
        model.update_shard_log(B, [MetadataOp(key="new", value=b"n"), MetadataOp(key="x", value=b"3", expected=r1)])
    assert info.value.actual is not None and info.value.actual.revision == r2
    assert "new" not in model.shard_logs[ShardId("s1")]


def test_shard_destroyed_with_last_member_and_joiner_catches_up() -> None:
    model = two_in_one_shard()
    model.join_cluster(C, "h:3", ShardId("s3"))
    model.update_shard_log(C, [MetadataOp(key="k", value=b"v")])
    model.join_shard(C, ShardId("s1"))
    with pytest.raises(UnknownShard):
        model.join_shard(A, ShardId("s3"))
    _, out = model.update_shard_log(A, [MetadataOp(key="p", value=b"a")])
    model.join_cluster(NodeId("d"), "h:4", ShardId("s4"))
    joined = model.told(model.join_shard(NodeId("d"), ShardId("s1")))
    catch_up = [n for r, n in joined if r == "d" and isinstance(n, ShardLogUpdate)]
    assert [e.key for e in catch_up[0].entries] == ["p"]


def test_gossip_scope_is_the_minimum_audience() -> None:
    model = two_in_one_shard()
    model.join_cluster(C, "h:3", ShardId("s3"))
    _, shard_only = model.update_gossip(A, [MetadataOp(key="g", value=b"1")], Scope.SHARD)
    assert sorted(r for r, _ in shard_only) == [A, B]
    _, everyone = model.update_gossip(A, [MetadataOp(key="h", value=b"1")], Scope.GLOBAL)
    assert sorted(r for r, _ in everyone) == [A, B, C]
    late = model.told(model.join_cluster(NodeId("d"), "h:4", ShardId("s4")))
    learned = [n for r, n in late if r == "d" and isinstance(n, GossipUpdate)]
    assert [e.key for e in learned[0].entries] == ["h"]


def test_a_membership_change_is_owed_once_as_the_members_record_not_a_snapshot_per_member() -> None:
    model = two_in_one_shard()
    out = model.join_cluster(NodeId("d"), "h:4", ShardId("s4"))
    assert out == [MembershipChange(epoch=model.revision, node_id=NodeId("d"),
                                    record=MemberRecord(ShardId("s4"), "h:4", NodeState.OK))]
    view = MembershipView(two_in_one_shard().snapshot())
    view.apply(out[0])
    assert view.snapshot() == model.snapshot(), "the view built from changes is the model's snapshot"


def test_membership_changes_are_pushed_to_all_with_growing_epochs() -> None:
    model = two_in_one_shard()
    out = model.told(model.remove_from_cluster(A, B))
    assert [r for r, _ in out] == [A, B], "every member, then the removed node"
    snapshots = [n.snapshot for _, n in out if isinstance(n, MembershipUpdate)]
    assert {s.epoch for s in snapshots} == {model.revision}
    assert all(B not in s.nodes() for s in snapshots)
    snapshots[0].check_well_formed()


@pytest.mark.parametrize("ops", [[], [MetadataOp(key="d", value=b"1"), MetadataOp(key="d", value=b"2")],
                                 [MetadataOp(key="", value=b"")],
                                 [MetadataOp(key="k", value=b"v", expected=Revision(0))]])
def test_invalid_batches_rejected(ops: list[MetadataOp]) -> None:
    with pytest.raises(InvalidBatch):
        two_in_one_shard().update_shard_log(A, ops)


def test_non_member_cannot_write() -> None:
    with pytest.raises(NotAMember):
        ClusterModel().update_gossip(A, [MetadataOp(key="k", value=b"v")], Scope.GLOBAL)
