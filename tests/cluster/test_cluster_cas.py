"""Compare-and-swap and "no change, no revision": the model's rules as properties."""

from __future__ import annotations

from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.cluster.cas import write_with_cas
from reference.cluster.memory import InProcessCluster
from reference.pipeline.coordination import Member
from spec.cluster.cas import CasWrite, KeptChanging
from spec.cluster.errors import RevisionMismatch
from spec.cluster.model import ClusterModel
from spec.cluster.types import Entry, MetadataOp, NodeId, NodeState, Revision, Scope, ShardId

A = NodeId("a")
S1 = ShardId("s1")


def model_with_keys() -> tuple[ClusterModel, Revision, Revision]:
    """One member; shard-log keys ``k`` and ``other`` written at two revisions, ``k`` twice."""
    model = ClusterModel()
    model.join_cluster(A, "h:1", S1)
    first, _ = model.update_shard_log(A, [MetadataOp(key="k", value=b"1")])
    other, _ = model.update_shard_log(A, [MetadataOp(key="other", value=b"o")])
    current, _ = model.update_shard_log(A, [MetadataOp(key="k", value=b"2", expected=first)])
    return model, current, other


@given(st.one_of(st.none(), st.integers(1, 20)))
def test_shard_log_cas_succeeds_only_when_expected_is_current(expected: int | None) -> None:
    """Absent, stale, another key's, current and future revisions: only the current one wins."""
    model, current, _ = model_with_keys()
    before = (model.revision, dict(model.shard_logs[S1]))
    op = MetadataOp(key="k", value=b"new", expected=None if expected is None else Revision(expected))
    if expected == current:
        revision, _ = model.update_shard_log(A, [op])
        assert model.shard_logs[S1]["k"].revision == revision == before[0] + 1
    else:
        with pytest.raises(RevisionMismatch) as info:
            model.update_shard_log(A, [op])
        assert info.value.actual is not None and info.value.actual.revision == current
        assert (model.revision, model.shard_logs[S1]) == before, "a refused batch commits nothing"


@pytest.mark.parametrize("position", [0, 1, 2])
def test_any_stale_op_refuses_the_whole_batch(position: int) -> None:
    model, current, other = model_with_keys()
    ops = [MetadataOp(key="k", value=b"x", expected=current), MetadataOp(key="other", value=b"y", expected=other),
           MetadataOp(key="fresh", value=b"z")]
    ops[position] = MetadataOp(key=ops[position].key, value=b"stale", expected=Revision(current + 5))
    before = (model.revision, dict(model.shard_logs[S1]))
    with pytest.raises(RevisionMismatch):
        model.update_shard_log(A, ops)
    assert (model.revision, model.shard_logs[S1]) == before


def test_another_keys_revision_does_not_satisfy_cas() -> None:
    model, _, other = model_with_keys()
    with pytest.raises(RevisionMismatch):
        model.update_shard_log(A, [MetadataOp(key="k", value=b"x", expected=other)])


@given(st.one_of(st.none(), st.integers(1, 10)))
def test_gossip_cas_succeeds_only_when_expected_is_current(expected: int | None) -> None:
    model = ClusterModel()
    model.join_cluster(A, "h:1", S1)
    current, _ = model.update_gossip(A, [MetadataOp(key="g", value=b"1")], Scope.GLOBAL)
    op = MetadataOp(key="g", value=b"2", expected=None if expected is None else Revision(expected))
    if expected == current:
        model.update_gossip(A, [op], Scope.GLOBAL)
        assert model.gossip["g"].entry.value == b"2"
    else:
        with pytest.raises(RevisionMismatch):
            model.update_gossip(A, [op], Scope.GLOBAL)
        assert model.gossip["g"].entry.revision == current


@pytest.mark.parametrize("state", list(NodeState))
def test_a_state_change_commits_a_revision_only_when_something_changed(state: NodeState) -> None:
    model = ClusterModel()
    model.join_cluster(A, "h:1", S1)
    before = model.revision
    out = model.set_state(A, state)
    changed = state is not NodeState.OK
    assert model.revision == before + changed
    assert bool(out) == changed
    assert model.set_state(A, state) == [] and model.revision == before + changed


def test_joining_the_own_shard_commits_nothing() -> None:
    model = ClusterModel()
    model.join_cluster(A, "h:1", S1)
    before = model.revision
    assert model.join_shard(A, S1) == []
    assert model.revision == before


# -- the runtime writers' retry policy (spec/cluster/cas.py, reference/cluster/cas.py) ------------------

def _send_against(model: ClusterModel) -> Callable[[MetadataOp], Revision]:
    def send(op: MetadataOp) -> Revision:
        revision, _ = model.update_shard_log(A, [op])
        return revision
    return send


def test_a_cas_write_is_decided_again_on_the_entry_found() -> None:
    """Expecting a stale entry, the write conflicts once, then increments what it found."""
    model, current, _ = model_with_keys()
    stale = Entry(key="k", value=b"1", revision=Revision(current - 2))
    write = CasWrite("k", stale, lambda found: b"1" if found is None else str(int(found.value) + 1).encode())
    written = write_with_cas(write, _send_against(model))
    assert written is not None and written.value == b"3" and model.shard_logs[S1]["k"] == written


def test_a_cas_write_that_finds_nothing_to_change_sends_nothing() -> None:
    sent: list[MetadataOp] = []
    assert write_with_cas(CasWrite("k", None, lambda _found: None), lambda op: sent.append(op) or Revision(1)) is None
    assert sent == []


def test_a_cas_write_gives_up_after_its_attempts_each_a_conflict() -> None:
    """A key that changes under every attempt: exactly ``attempts`` ops, then KeptChanging."""
    sent: list[MetadataOp] = []

    def always_newer(op: MetadataOp) -> Revision:
        sent.append(op)
        found = Entry(key=op.key, value=b"x", revision=Revision(100 + len(sent)))
        raise RevisionMismatch(op.key, op.expected, found)

    with pytest.raises(KeptChanging, match="under 3 compare-and-swap attempts"):
        write_with_cas(CasWrite("k", None, lambda _found: b"v", attempts=3), always_newer)
    assert [op.expected for op in sent] == [None, 101, 102]


def test_the_pipeline_publishes_over_a_value_another_node_wrote() -> None:
    """The pipeline's gossip writer expects its own last write; another node's newer value is a conflict
    it retries on, not an error."""
    cluster = InProcessCluster()
    first, second = Member(cluster, "first", "h:1"), Member(cluster, "second", "h:2")
    try:
        first.publish("k", {"v": 1})
        second.publish("k", {"v": 2})  # second has not necessarily been notified of first's write
        first.publish("k", {"v": 3})  # first expects its own write; second's is newer
        first.core.wait(lambda: first.value("k") == {"v": 3} or None, 5.0, "its own write notified")
    finally:
        first.leave()
        second.leave()
        cluster.close()
