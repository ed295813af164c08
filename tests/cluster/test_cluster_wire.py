"""The service's layouts round-trip and reject bad frames with typed errors before allocating."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.cluster.service import MembershipFrames
from spec.cluster import wire
from spec.cluster.errors import FrameTooLarge, MalformedMessage
from spec.cluster.model import ClusterModel, MembershipChange, MembershipView
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, NodeInfo, NodeState, Revision, ShardId

keys = st.text(min_size=1, max_size=20)
revisions = st.integers(min_value=1, max_value=2**64 - 1)


@given(st.lists(st.tuples(keys, st.binary(max_size=50), st.none() | revisions), min_size=1, max_size=5))
def test_ops_round_trip(raw: list[tuple[str, bytes, int | None]]) -> None:
    ops = [MetadataOp(key=k, value=v, expected=None if r is None else Revision(r)) for k, v, r in raw]
    frame = wire.encode(wire.ServiceKind.UPDATE_SHARD_LOG, 7, ops=wire.ops_to_wire(ops))
    assert wire.body_length(frame[:4]) == len(frame) - 4
    message = wire.decode(frame[4:])
    assert (message.kind, message.request_id) == (wire.ServiceKind.UPDATE_SHARD_LOG, 7)
    assert wire.ops_from_wire(message.payload["ops"]) == ops


def test_membership_and_cas_error_round_trip() -> None:
    snapshot = Membership(epoch=9, shards={ShardId("s"): (NodeInfo(node_id=NodeId("n"), address="h:1",
                                                                   state=NodeState.PFAIL),)})
    message = wire.decode(wire.encode(wire.ServiceKind.MEMBERSHIP, 0, **wire.membership_to_wire(snapshot))[4:])
    assert wire.membership_from_wire(message.payload) == snapshot
    entry = Entry(key="k", value=b"v", revision=Revision(3))
    cas = wire.decode(wire.encode(wire.ServiceKind.CAS_ERROR, 1, key="k", expected=2, found=True,
                                  actual=wire.entries_to_wire([entry])[0])[4:])
    assert wire.cas_actual_from_wire(cas.payload) == entry


def test_oversized_frame_rejected_from_header() -> None:
    with pytest.raises(FrameTooLarge):
        wire.body_length((wire.MAX_FRAME_BYTES + 1).to_bytes(4, "big"))


@pytest.mark.parametrize("body", [bytes([200]) + bytes(8),  # unknown kind
                                  bytes([wire.ServiceKind.OK]) + bytes(8) + b"x",  # trailing byte
                                  bytes([wire.ServiceKind.JOIN_SHARD]) + bytes(8) + b"\x00\x05ab"])  # short string
def test_malformed_bodies_are_typed_errors(body: bytes) -> None:
    with pytest.raises(MalformedMessage):
        wire.decode(body)


def test_undefined_node_state_is_malformed() -> None:
    frame = bytearray(wire.encode(wire.ServiceKind.MEMBERSHIP, 0, **wire.membership_to_wire(
        Membership(epoch=1, shards={ShardId("s"): (NodeInfo(node_id=NodeId("n"), address="a", state=NodeState.OK),)}))))
    frame[-1] = 9
    with pytest.raises(MalformedMessage):
        wire.membership_from_wire(wire.decode(bytes(frame[4:])).payload)


def test_an_update_too_large_for_one_frame_is_split_into_whole_batches_in_revision_order() -> None:
    entries = [Entry(key=f"k{i}", value=bytes(100), revision=Revision(r)) for i, r in enumerate((3, 1, 3, 2, 1))]
    whole = wire.update_frames(wire.ServiceKind.SHARD_LOG_UPDATE, entries, shard_id="s")
    assert len(whole) == 1 and wire.entries_from_wire(wire.decode(whole[0][4:]).payload["entries"]) == tuple(entries)
    frames = wire.update_frames(wire.ServiceKind.SHARD_LOG_UPDATE, entries, limit=300, shard_id="s")
    batches = [[(e.key, e.revision) for e in wire.entries_from_wire(wire.decode(f[4:]).payload["entries"])]
               for f in frames]
    assert batches == [[("k1", 1), ("k4", 1)], [("k3", 2)], [("k0", 3), ("k2", 3)]]
    assert all(len(f) - 4 <= 300 for f in frames)


def test_membership_frames_send_changes_to_the_told_and_the_whole_membership_to_newcomers() -> None:
    model = ClusterModel()
    view = MembershipView()
    frames = MembershipFrames()
    told = view.epoch
    for i in range(5):
        base = view.epoch
        run = [c for c in model.join_cluster(NodeId(f"n{i}"), f"h:{i}", ShardId(f"s{i % 2}"))
               if isinstance(c, MembershipChange)]
        if i % 2:
            run += [c for c in model.join_shard(NodeId(f"n{i}"), ShardId("s0")) if isinstance(c, MembershipChange)]
        for change in run:
            view.apply(change)
        delta = wire.decode(frames.frame(run, base, view, told)[4:])
        assert delta.kind is wire.ServiceKind.MEMBERSHIP_DELTA and delta.payload["base"] == told
        assert wire.membership_changes_from_wire(delta.payload)[1] == [
            MembershipChange(epoch=view.epoch, node_id=c.node_id, record=c.record) for c in run]
        whole = wire.decode(frames.frame(run, base, view, -1)[4:])
        assert whole.kind is wire.ServiceKind.MEMBERSHIP
        assert wire.membership_from_wire(whole.payload) == model.snapshot(), "the blocks are the snapshot"
        told = view.epoch
