"""The truncate extension: a put that empties its table at its place in the stream, in the store (by
deletion vectors and by rewriting files), through the flush's merging, and end to end through a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conformance.sync.suite import DESCS, rows_batch
from reference.sync.clock import MonotonicClock
from reference.sync.client import SyncClient, SyncPut
from reference.sync.store import DeltaStore, StoreSettings, read_delta
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange, merge_changes
from tests.sync.conftest import ServerFactory


def change(rows: list[tuple[Any, ...]], truncate: bool = False) -> SquashedChange:
    batch = rows_batch(rows)
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch] if rows else [], truncate)


def rows_of(table: Path) -> dict[int, str]:
    return {r["id"]: r["v"] for r in read_delta(str(table)).to_pylist()}


@pytest.mark.parametrize("deletion_vectors", [True, False])
def test_a_truncating_change_empties_the_table_at_its_place(tmp_path: Path, deletion_vectors: bool) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path), settings=StoreSettings(target_file_rows=4, deletion_vectors=deletion_vectors))
    store.write(str(table), [change([(None, k, "a") for k in range(10)])], {"o": 1}, {"o": 1})
    store.write(str(table), [change([(1, 1, "b"), (None, 20, "b")]), change([], truncate=True),
                             change([(None, 30, "c"), (None, 31, "c")]), change([(30, 32, "d")])], {"o": 2}, {"o": 2})
    assert rows_of(table) == {31: "c", 32: "d"}
    store.write(str(table), [change([(None, 40, "e")], truncate=True)], {"o": 3}, {"o": 3})
    assert rows_of(table) == {40: "e"}
    store.write(str(table), [change([(40, 41, "f")])], {"o": 4}, {"o": 4})
    assert rows_of(table) == {41: "f"}
    assert DeltaStore(str(tmp_path)).read_state(str(table)).marks == {"o": 4}


def test_a_first_flush_may_be_a_truncation(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path))
    store.write(str(tmp_path / "t"), [change([], truncate=True)], {"o": 1}, {"o": 1})
    assert rows_of(tmp_path / "t") == {}


def test_merging_never_crosses_a_truncation() -> None:
    merged = merge_changes([change([(None, 1, "a")]), change([(None, 2, "b")]), change([], truncate=True),
                            change([(None, 3, "c")])])
    assert [(m.truncate, m.batch.num_rows) for m in merged] == [(False, 2), (True, 1)]


def test_a_truncating_put_through_a_server(server_factory: ServerFactory, tmp_path: Path) -> None:
    server = server_factory(tmp_path / "store", max_replication_lag_s=0.1, clock=MonotonicClock())
    client = SyncClient(server.location, "A", deadline_s=30.0)
    try:
        client.send_transaction(1, [SyncPut("t", rows_batch([(None, k, "a") for k in range(5)]), DESCS)])
        empty = rows_batch([]).slice(0, 0)
        client.send_transaction(2, [SyncPut("t", empty, DESCS, truncate=True)])
        client.send_transaction(3, [SyncPut("t", rows_batch([(None, 9, "z")]), DESCS),
                                    SyncPut("t", rows_batch([(None, 7, "y")]), DESCS, truncate=True)])
        client.wait_durable(3)
    finally:
        client.close()
    assert rows_of(tmp_path / "store" / "t") == {7: "y"}
