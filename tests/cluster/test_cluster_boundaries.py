"""Boundaries of the cluster model's catch-up and membership, and of the service's frames."""

from __future__ import annotations

import pytest

from spec.cluster import wire
from spec.cluster.errors import ClusterFull, FrameTooLarge, InvalidAddress, MalformedMessage
from spec.cluster.model import ClusterModel, Member, ShardLogUpdate
from spec.cluster.types import (
    MAX_ADDRESS_BYTES,
    MAX_ID_BYTES,
    MAX_MEMBERS,
    Membership,
    MetadataOp,
    NodeId,
    NodeInfo,
    NodeState,
    ShardId,
)

A, B = NodeId("a"), NodeId("b")
S1, S2 = ShardId("s1"), ShardId("s2")


def test_a_node_that_saw_its_move_is_not_replayed_the_shards_older_log() -> None:
    model = ClusterModel()
    model.join_cluster(A, "h:1", S1)
    model.update_shard_log(A, [MetadataOp(key="k", value=b"old")])
    model.join_cluster(B, "h:2", S2)
    model.join_shard(B, S1)  # B is sent the whole log with its move
    moved_at = model.revision
    assert not any(isinstance(n, ShardLogUpdate) for n in model.catch_up(B, after=moved_at))
    replay = [n for n in model.catch_up(B, after=moved_at - 1) if isinstance(n, ShardLogUpdate)]
    assert [e.key for n in replay for e in n.entries] == ["k"], "one that missed the move gets the whole log"


def test_a_frame_of_exactly_the_bound_is_accepted_and_one_byte_more_is_not() -> None:
    assert wire.body_length(wire.MAX_FRAME_BYTES.to_bytes(4, "big")) == wire.MAX_FRAME_BYTES
    with pytest.raises(FrameTooLarge):
        wire.body_length((wire.MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
    assert wire.body_length(wire.MAX_HELLO_BYTES.to_bytes(4, "big"), wire.MAX_HELLO_BYTES) == wire.MAX_HELLO_BYTES
    with pytest.raises(FrameTooLarge):
        wire.body_length((wire.MAX_HELLO_BYTES + 1).to_bytes(4, "big"), wire.MAX_HELLO_BYTES)


def test_a_frame_shorter_than_a_message_header_is_malformed() -> None:
    with pytest.raises(MalformedMessage):
        wire.body_length((wire.Header.sizeof() - 1).to_bytes(4, "big"))


def test_an_address_of_exactly_the_bound_joins_and_one_byte_more_is_refused_changing_nothing() -> None:
    model = ClusterModel()
    model.join_cluster(A, "a" * MAX_ADDRESS_BYTES, S1)
    with pytest.raises(InvalidAddress):
        model.join_cluster(B, "é" * (MAX_ADDRESS_BYTES // 2) + "b", S2)  # bytes of UTF-8, not characters
    assert model.revision == 1 and B not in model.members and S2 not in model.shard_logs


def test_a_new_node_is_refused_by_a_full_cluster_while_a_member_may_rejoin() -> None:
    model = ClusterModel(members={NodeId(f"n{i}"): Member("h:1", ShardId(f"p{i}")) for i in range(MAX_MEMBERS)})
    model.shard_logs = {ShardId(f"p{i}"): {} for i in range(MAX_MEMBERS)}
    with pytest.raises(ClusterFull):
        model.join_cluster(A, "h:1", S1)
    model.join_cluster(NodeId("n0"), "h:2", S1)
    assert len(model.members) == MAX_MEMBERS and model.members[NodeId("n0")].shard == S1


def test_the_largest_membership_snapshot_fits_a_frame() -> None:
    """MAX_MEMBERSHIP_BYTES is what a snapshot of members at every bound encodes to (docs/cluster.md)."""
    def worst(i: int) -> tuple[ShardId, tuple[NodeInfo, ...]]:
        node = NodeInfo(node_id=NodeId(f"{i}".ljust(MAX_ID_BYTES, "n")), address="a" * MAX_ADDRESS_BYTES,
                        state=NodeState.FAIL)
        return ShardId(f"{i}".ljust(MAX_ID_BYTES, "s")), (node,)
    members = 3
    snapshot = Membership(epoch=2**64 - 1, shards=dict(worst(i) for i in range(members)))
    body = len(wire.encode(wire.ServiceKind.MEMBERSHIP, 0, **wire.membership_to_wire(snapshot))) - 4
    per_member = (body - 21) // members
    assert body == 21 + members * per_member
    assert wire.MAX_MEMBERSHIP_BYTES == 21 + MAX_MEMBERS * per_member <= wire.MAX_FRAME_BYTES
