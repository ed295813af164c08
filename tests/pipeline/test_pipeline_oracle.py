"""The change stream, the routing argument and the oracle, against a naive row-by-row applier."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from reference.pipeline.changes import Op, StreamSpec
from reference.pipeline.oracle import Row, apply_change, compare, expected_state
from reference.pipeline.routing import owner, parts, route_key

SPECS = st.builds(
    StreamSpec,
    seed=st.integers(0, 2**32),
    changes=st.integers(0, 400),
    keys=st.integers(8, 60),
    origins=st.integers(1, 4),
)


def naive(spec: StreamSpec) -> dict[int, Row]:
    table: dict[int, Row] = {}
    for origin in range(spec.origins):
        for tx in spec.transactions(origin):
            for change in tx.changes:
                apply_change(table, change, spec.origin_name(origin), tx.seq)
    return table


@given(SPECS)
def test_oracle_equals_naive_row_by_row_application(spec: StreamSpec) -> None:
    assert expected_state(spec) == naive(spec)


@given(SPECS, st.integers(1, 4), st.randoms(use_true_random=False))
def test_routed_parts_in_any_cross_sink_interleaving_give_the_expected_table(
    spec: StreamSpec, readers: int, rnd: random.Random
) -> None:
    """Per-sink order is all the shuffle keeps; the strict applier must never see a conflict."""
    queues: list[list[tuple[str, int, object]]] = [[] for _ in range(readers)]
    for origin in range(spec.origins):
        for tx in spec.transactions(origin):
            for reader, changes in parts(tx, readers).items():
                assert all(owner(route_key(c), readers) == reader for c in changes)
                queues[reader] += [(spec.origin_name(origin), tx.seq, c) for c in changes]
    table: dict[int, Row] = {}
    while any(queues):
        queue = rnd.choice([q for q in queues if q])
        name, seq, change = queue.pop(0)
        apply_change(table, change, name, seq)  # type: ignore[arg-type]
    assert not compare(expected_state(spec), table.values())


@given(SPECS)
def test_stream_is_deterministic_sized_and_sequenced(spec: StreamSpec) -> None:
    total = 0
    for origin in range(spec.origins):
        txs = list(spec.transactions(origin))
        assert txs == list(spec.transactions(origin))
        assert [tx.seq for tx in txs] == list(range(1, len(txs) + 1))
        keys = {k for tx in txs for c in tx.changes for k in (c.old_id, c.new_id) if k is not None}
        assert all(k % spec.origins == origin and 0 <= k < spec.keys for k in keys)
        total += sum(len(tx.changes) for tx in txs)
    assert total == spec.changes


def test_stream_has_every_kind_of_change() -> None:
    spec = StreamSpec(seed=1, changes=2000, keys=100, origins=2)
    ops = [c for o in range(2) for tx in spec.transactions(o) for c in tx.changes]
    assert {c.op for c in ops} == set(Op)
    assert any(not c.note_changed and c.op is Op.UPDATE for c in ops)


def test_compare_reports_each_kind_of_difference() -> None:
    spec = StreamSpec(seed=3, changes=300, keys=50, origins=2)
    want = expected_state(spec)
    rows = [dict(r) for r in want.values()]
    first, second = rows[0]["id"], rows[1]["id"]
    rows[1]["value"] = -1
    rows = rows[1:] + [dict(rows[2]), {**rows[3], "id": 10_000}]
    diff = compare(want, rows)
    assert diff.missing == [first]
    assert [w["id"] for w, _ in diff.different] == [second]
    assert diff.duplicated == [rows[1]["id"]] and diff.unexpected == [10_000]
    assert "1 missing keys" in diff.describe()
    assert not compare(want, want.values())
