"""A put may bring value columns its table lacks: the table gains them in order with the rows (the
rows it held have none), by deletion vectors and by rewriting files, and through a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from conformance.sync.suite import DESCS, rows_batch
from reference.sync.clock import MonotonicClock
from reference.sync.client import SyncClient, SyncPut
from reference.sync.store import DeltaStore, StoreSettings, read_delta
from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange
from tests.sync.conftest import ServerFactory

WIDER = (*DESCS, ColumnDescriptor(role=int(ColumnRole.VALUE), name="w"))


def wider_batch(rows: list[tuple[Any, ...]]) -> pa.Table:
    return rows_batch([r[:3] for r in rows]).append_column("w", pa.array([r[3] for r in rows], pa.int32()))


def change(batch: pa.Table, descriptors: tuple[ColumnDescriptor, ...]) -> SquashedChange:
    return SquashedChange.of_put(SyncSchema.validate(descriptors, batch.schema), [batch])


def rows_of(table: Path) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: tuple(v for k, v in r.items() if k != "id") for r in read_delta(str(table)).to_pylist()}


@pytest.mark.parametrize("deletion_vectors", [True, False])
def test_a_change_with_a_new_column_adds_it_in_order(tmp_path: Path, deletion_vectors: bool) -> None:
    table = tmp_path / "t"
    store = DeltaStore(str(tmp_path), settings=StoreSettings(target_file_rows=4, deletion_vectors=deletion_vectors))
    store.write(str(table), [change(rows_batch([(None, k, "a") for k in range(6)]), DESCS)], {"o": 1}, {"o": 1})
    store.write(str(table), [change(rows_batch([(1, 1, "b")]), DESCS),
                             change(wider_batch([(2, 2, "c", 7), (None, 10, "d", 8)]), WIDER),
                             change(rows_batch([(3, 3, "e")]), DESCS)], {"o": 2}, {"o": 2})
    assert rows_of(table) == {0: ("a", None), 1: ("b", None), 2: ("c", 7), 3: ("e", None), 4: ("a", None),
                              5: ("a", None), 10: ("d", 8)}
    assert DeltaTable(str(table)).schema().to_arrow().names == ["id", "v", "w"]
    assert DeltaStore(str(tmp_path)).read_state(str(table)).marks == {"o": 2}


def test_a_new_column_through_a_server(server_factory: ServerFactory, tmp_path: Path) -> None:
    server = server_factory(tmp_path / "store", max_replication_lag_s=0.1, clock=MonotonicClock())
    client = SyncClient(server.location, "A", deadline_s=30.0)
    try:
        client.send_transaction(1, [SyncPut("t", rows_batch([(None, k, "a") for k in range(3)]), DESCS)])
        client.wait_durable(1)
        client.send_transaction(2, [SyncPut("t", wider_batch([(None, 5, "b", 9)]), WIDER)])
        client.send_transaction(3, [SyncPut("t", rows_batch([(0, 0, "c")]), DESCS)])
        client.wait_durable(3)
    finally:
        client.close()
    assert rows_of(tmp_path / "store" / "t") == {0: ("c", None), 1: ("a", None), 2: ("a", None), 5: ("b", 9)}


def test_a_table_created_by_changes_of_two_shapes_has_every_column(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path))
    store.write(str(tmp_path / "t"), [change(rows_batch([(None, 1, "a")]), DESCS),
                                      change(wider_batch([(None, 2, "b", 3)]), WIDER)], {"o": 1}, {"o": 1})
    assert rows_of(tmp_path / "t") == {1: ("a", None), 2: ("b", 3)}


def test_a_column_named_as_the_tables_in_another_case_is_refused_not_taken_for_ever(
        server_factory: ServerFactory, tmp_path: Path) -> None:
    """Delta names columns case-insensitively: a put bringing ``V`` to a table with ``v`` could never be added, so it
    is refused (it was acknowledged, and its flush failed for ever); the table is as it was, and takes the next put."""
    from conformance.sync.suite import _cmd, do_put

    server = server_factory(tmp_path / "store", max_replication_lag_s=0.0)
    upper = (*DESCS[:2], ColumnDescriptor(role=int(ColumnRole.VALUE), name="V"))
    first = do_put(server.location, _cmd("t", "A", 1).to_descriptor_cmd(), [rows_batch([(None, 1, "a")])], timeout=30)
    renamed = do_put(server.location, _cmd("t", "A", 2, upper).to_descriptor_cmd(),
                     [rows_batch([(None, 2, "b")]).rename_columns(["old_id", "new_id", "V"])], timeout=30)
    after = do_put(server.location, _cmd("t", "A", 3).to_descriptor_cmd(), [rows_batch([(None, 3, "c")])], timeout=30)
    assert first.response is not None and after.response is not None and after.response.durable_sequence_number == 3
    assert renamed.response is None and "TABLE_SCHEMA_MISMATCH" in renamed.error_text
    assert "column V is the table's v in another case" in renamed.error_text
    assert rows_of(tmp_path / "store" / "t") == {1: ("a",), 3: ("c",)}
