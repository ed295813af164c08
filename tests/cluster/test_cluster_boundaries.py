"""Boundaries of the cluster model's catch-up and of the service's frames."""

from __future__ import annotations

import pytest

from spec.cluster import wire
from spec.cluster.errors import FrameTooLarge, MalformedMessage
from spec.cluster.model import ClusterModel, ShardLogUpdate
from spec.cluster.types import MetadataOp, NodeId, ShardId

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


def test_a_frame_shorter_than_a_message_header_is_malformed() -> None:
    with pytest.raises(MalformedMessage):
        wire.body_length((wire.Header.sizeof() - 1).to_bytes(4, "big"))


def test_the_service_never_encodes_a_frame_its_peers_would_refuse() -> None:
    entries = [{"key": "k", "value": bytes(wire.MAX_FRAME_BYTES), "revision": 1}]
    with pytest.raises(FrameTooLarge):
        wire.encode(wire.ServiceKind.GOSSIP_UPDATE, 0, entries=entries)
