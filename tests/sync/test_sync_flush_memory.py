"""What the server holds: a flush writes its rows a bounded row group at a time (the result is the same),
and a put that would pass the high-watermark is refused until a flush made room.

The row groups are the spec's decision (``spec.sync.writer.RowGroupLimits``): at most ``max_rows``
rows and ``max_bytes`` bytes each, a larger row alone.  Whatever the limits, a flush leaves the same
rows in the table (deltalake reads them back).  RSS is the benchmark's (``python -m benchmarks sync``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.flight as flight
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.sync.clock import ManualClock
from conformance.sync.suite import DESCS, _cmd, rows_batch
from reference.sync.client import SyncClient, SyncPut
from reference.sync.clock import MonotonicClock
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore, StoreSettings, read_delta
from spec.sync.admission import MemoryBudget, flush_working_set
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange, apply_squashed
from spec.sync.messages import decode_response
from spec.sync.writer import RowGroupLimits, SyncSettings, row_ends
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


def _narrow_change(keys: range) -> SquashedChange:
    batch = pa.table({"old_id": pa.nulls(len(keys), pa.int64()), "id": pa.array(keys, pa.int64()),
                      "v": pa.array(keys, pa.int64())})
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


def test_a_flush_allocates_no_more_than_its_reserved_working_set(tmp_path: Path) -> None:
    """The reservation (``flush_working_set``) covers what a flush allocates from Arrow (counted exactly)
    beyond its pending data, on the narrowest rows where per-row costs weigh most: a second flush whose
    two changes update half the stored keys and half of each other's."""
    store = DeltaStore(str(tmp_path))
    uri = store.table_uri("t")
    store.write(uri, [_narrow_change(range(0, 40_000))], {"o": 1}, {"o": 1})
    changes = [_narrow_change(range(20_000, 60_000)), _narrow_change(range(40_000, 80_000))]
    counted = pa.proxy_memory_pool(pa.system_memory_pool())
    default = pa.default_memory_pool()
    pa.set_memory_pool(counted)
    try:
        store.write(uri, changes, {"o": 3}, {"o": 3})
    finally:
        pa.set_memory_pool(default)
    pending = sum(c.batch.nbytes for c in changes)
    assert 2 * pending < counted.max_memory() <= flush_working_set(pending)  # the former reservation, 2x, fell short
    assert len(read_delta(uri)) == 80_000


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
    budget.set_pending(20)
    assert budget.reserve(10)
    budget.set_flushing(flush_working_set(20))
    assert budget.held == 20 + 10 + flush_working_set(20) and not budget.reserve(100 - budget.held + 1)
    budget.set_flushing(0)
    assert budget.reserve(70) and budget.peak == 100


def test_a_flush_comes_first_and_puts_in_flight_get_nothing_more_past_the_high_watermark() -> None:
    """How a flush and the puts in flight share W (``MemoryBudget``): the flush takes its working set
    whatever is held; past W a put's next message is refused, and a put that finished reading drops
    its batches (busy) while a probe, holding nothing, goes on."""
    budget = MemoryBudget(100)
    budget.set_pending(40)
    assert budget.reserve(30)  # a put in flight
    budget.set_flushing(flush_working_set(40))
    assert budget.held == 40 + 30 + flush_working_set(40)
    assert not budget.reserve(1)
    assert budget.yields_to_flush(30) and not budget.yields_to_flush(0)
    budget.release(30)
    budget.set_pending(0)
    budget.set_flushing(0)
    assert not budget.yields_to_flush(30) and budget.reserve(100)


class _HeldStore(DeltaStore):
    """A store whose writes wait until the test lets them go (the flush then holds its reservation)."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.writing = threading.Event()
        self.go = threading.Event()

    def write(self, *args: Any, **kwargs: Any) -> Any:
        self.writing.set()
        assert self.go.wait(60)
        return super().write(*args, **kwargs)


def test_a_put_that_finished_reading_during_a_flush_past_the_watermark_is_busy_without_waiting(tmp_path: Path) -> None:
    """Read before the flush started, ended while it runs past W: answered accepted=false at once, not
    after the write lock (which the flush holds until it is let go)."""
    small = rows_batch([(None, k, f"value {k}") for k in range(500)])
    batch = rows_batch([(None, k, f"value {k}") for k in range(2000)])
    store = _HeldStore(str(tmp_path / "store"))
    # Room for the small put pending and the large one read, not for the flush's working set besides.
    server = SyncServer(store, settings=SyncSettings(
        high_watermark_bytes=small.nbytes * 3 // 2 + batch.nbytes, max_in_memory_bytes=10 * batch.nbytes,
        max_replication_lag_s=3600.0,
        max_syncs_per_url=1000, write_lock_timeout_s=120.0), clock=ManualClock(), put_timeout_s=7200.0)
    # (The put stays open while the clock jumps the lag: its timeout, on the same clock, is longer.)
    threading.Thread(target=server.serve, daemon=True).start()
    first = SyncClient(server.location, "first")
    client = flight.FlightClient(server.location)
    try:
        first.send_transaction(1, [SyncPut("a", small, DESCS)])
        pending = server.stats()["in_memory_bytes"]
        descriptor = flight.FlightDescriptor.for_command(_cmd("b", "second", 1).to_descriptor_cmd())
        # Waiting for the write lock, the answer would come after this (the flush is let go only after it).
        writer, reader = client.do_put(descriptor, batch.schema, options=flight.FlightCallOptions(timeout=20))
        writer.write_table(batch)
        for _ in range(6000):  # until the server reserved the put's batch (it then waits for its end)
            if server.stats()["peak_held_bytes"] > pending + batch.nbytes // 2:
                break
            threading.Event().wait(0.01)
        assert server.stats()["peak_held_bytes"] > pending + batch.nbytes // 2
        with ThreadPoolExecutor(1) as pool:
            flushing = pool.submit(flush_pending, server)
            assert store.writing.wait(60)
            writer.done_writing()
            answer = decode_response(reader.read().to_pybytes())
            store.go.set()
            assert flushing.result(60)
        assert not answer.accepted
        writer.close()
    finally:
        store.go.set()
        client.close()
        first.close()
        server.shutdown()
