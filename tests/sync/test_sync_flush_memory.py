"""What the server holds: a flush writes its rows a bounded row group at a time (the result is the same),
and a put that would pass the high-watermark is refused until a flush made room.

The row groups are the spec's decision (``spec.sync.writer.RowGroupLimits``): at most ``max_rows``
rows and ``max_bytes`` bytes each, a larger row alone.  Whatever the limits, a flush leaves the same
rows in the table (deltalake reads them back).  RSS is the benchmark's (``python -m benchmarks sync``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.sync.suite import DESCS, rows_batch
from reference.sync.client import SyncClient, SyncPut
from reference.sync.clock import MonotonicClock
from reference.sync.parquet_files import row_ends
from reference.sync.store import DeltaStore, StoreSettings, read_delta
from spec.sync.admission import MemoryBudget, flush_working_set
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange, apply_squashed
from spec.sync.writer import RowGroupLimits
from tests.sync.conftest import ServerFactory, flush_pending


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 7), st.integers(1, 120))
def test_row_groups_cover_the_rows_in_order_within_both_limits(sizes: list[int], max_rows: int, max_bytes: int) -> None:
    ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    groups = RowGroupLimits(max_rows, max_bytes).cut(ends)
    bounds = [0] + [end for _, end in groups]
    assert groups == list(zip(bounds, bounds[1:])) and bounds[-1] == len(sizes)
    for start, end in groups:
        assert 0 < end - start <= max_rows
        assert sum(sizes[start:end]) <= max_bytes or end - start == 1
        if end < len(sizes) and end - start < max_rows:  # a group ends early only when the next row would not fit
            assert sum(sizes[start:end + 1]) > max_bytes


def test_measuring_row_groups_copies_no_value() -> None:
    """The row group cut reads each string's length in key order, not the strings in key order (which
    copied every value a flush writes: as many bytes as the rows); Arrow's allocations are counted exactly."""
    rows = pa.table({"k": pa.array(range(2000), pa.int64()), "v": pa.array(["x" * 1000] * 2000, pa.string())})
    order = pa.array(range(1999, -1, -1), pa.int64())
    counted = pa.proxy_memory_pool(pa.system_memory_pool())
    default = pa.default_memory_pool()
    pa.set_memory_pool(counted)
    try:
        ends = row_ends(rows, order)
    finally:
        pa.set_memory_pool(default)
    assert ends[-1] == 2000 * (8 + 4 + 1000)
    assert counted.max_memory() < 2000 * 16  # the lengths and their order; the values are 2,000,000 bytes


def _change(rows: list[tuple[object, object, object]]) -> SquashedChange:
    batch = rows_batch(rows)
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


# Inserts with values of varied length, then a put updating, moving and deleting some, re-inserting others.
FIRST = [(None, k, "v" * (k % 37)) for k in range(3000)]
SECOND = ([(k, k, f"u{k}") for k in range(0, 3000, 7)] + [(k, k + 5000, "moved") for k in range(1, 3000, 11)]
          + [(k, None, None) for k in range(2, 3000, 13)] + [(None, k, f"again{k}") for k in range(3, 3000, 17)])


def _flushed(root: Path, limits: RowGroupLimits, deletion_vectors: bool) -> tuple[Path, dict[int, str]]:
    store = DeltaStore(str(root), settings=StoreSettings(target_file_rows=1000, row_groups=limits,
                                                         deletion_vectors=deletion_vectors))
    uri = store.table_uri("t")
    store.write(uri, [_change(FIRST)], {"o": 1}, {"o": 1})
    store.write(uri, [_change(SECOND[:500]), _change(SECOND[500:])], {"o": 3}, {"o": 3})
    return root / "t", {r["id"]: r["v"] for r in read_delta(uri).to_pylist()}


@pytest.mark.parametrize("deletion_vectors", [True, False], ids=["by-dvs", "by-copy"])
def test_a_flush_writes_row_groups_within_the_limits_and_the_same_rows(tmp_path: Path, deletion_vectors: bool) -> None:
    small = RowGroupLimits(max_rows=100, max_bytes=1500)
    table, rows = _flushed(tmp_path / "small", small, deletion_vectors)
    _, default = _flushed(tmp_path / "default", RowGroupLimits(), deletion_vectors)
    state = pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.string())})
    for change in (_change(FIRST), _change(SECOND[:500]), _change(SECOND[500:])):
        state = apply_squashed(state, change.batch, change.schema)
    assert rows == default == dict(zip(state["id"].to_pylist(), state["v"].to_pylist())) and len(rows) > 2500
    groups = 0
    for path in table.glob("*.parquet"):
        parquet = pq.ParquetFile(path)
        for i in range(parquet.num_row_groups):
            group = parquet.read_row_group(i)
            size = int(row_ends(group, pa.array(range(group.num_rows), pa.int64()))[-1])
            assert group.num_rows <= small.max_rows and size <= small.max_bytes
            groups += 1
    assert groups > 30  # the limits, not the file size, cut the files


def test_a_put_past_the_high_watermark_is_refused_and_lands_after_the_flush(server_factory: ServerFactory) -> None:
    """Pending bytes plus a put's may not pass the high-watermark: the put is answered accepted=false,
    nothing of it is kept, the client retries, and once a flush made room it lands; no durable number
    is told before the commit."""
    batch = rows_batch([(None, k, f"value {k}") for k in range(2000)])
    size = batch.nbytes
    server = server_factory(high_watermark_bytes=size * 3 // 2, max_in_memory_bytes=10 * size,
                            max_replication_lag_s=3600.0, max_syncs_per_url=1000)
    first = SyncClient(server.location, "first")
    assert first.send_transaction(1, [SyncPut("a", batch, DESCS)]).durable_sequence_number is None
    pending = server.stats()["in_memory_bytes"]
    assert pending > size // 2

    seen: list[int] = []

    class FlushWhenRefused(MonotonicClock):
        """The second client's clock: its backoff after a refusal flushes instead of sleeping."""

        def sleep(self, seconds: float) -> None:
            seen.append(server.stats()["in_memory_bytes"])
            assert first.probe().durable_sequence_number is None  # nothing is durable before its commit
            assert flush_pending(server)

    second = SyncClient(server.location, "second", clock=FlushWhenRefused())
    second.send_transaction(1, [SyncPut("b", batch, DESCS)])
    assert seen == [pending]  # refused once, with nothing of it kept; then accepted
    assert first.probe().durable_sequence_number == 1
    assert server.stats()["in_memory_bytes"] == pending  # the second put's, waiting for its own flush
    first.close()
    second.close()


def test_while_a_flush_runs_its_working_set_counts_against_the_high_watermark() -> None:
    budget = MemoryBudget(100)
    budget.set_pending(30)
    assert budget.reserve(10)
    budget.set_flushing(flush_working_set(30))
    assert budget.held == 30 + 10 + flush_working_set(30) and not budget.reserve(100 - budget.held + 1)
    budget.set_flushing(0)
    assert budget.reserve(60) and budget.peak == 100
