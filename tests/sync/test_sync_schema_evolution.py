"""A put may bring value columns its table lacks: the table gains them in order with the rows (the
rows it held have none), by deletion vectors and by rewriting files, and through a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from conformance.sync.clock import ManualClock
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


def test_a_column_of_a_dropped_put_does_not_hold_up_the_columns_added_after_it(
        server_factory: ServerFactory, tmp_path: Path) -> None:
    """A flush orders the columns it adds by the spec's fit of the changes it writes: a put bringing ``w`` that a
    replay dropped before any flush leaves the table without ``w``, so ``x`` added next comes first, and a later
    put bringing ``w`` adds it after ``x`` (a shape kept from the dropped put, w before x, would fail that flush)."""
    from conformance.sync.suite import _cmd, _vw, do_put

    clock = ManualClock()
    server = server_factory(tmp_path / "store", max_replication_lag_s=10.0, clock=clock)

    def put(seq: int | None, key: int, *names: str) -> int | None:
        descs = (*DESCS, *(ColumnDescriptor(role=int(ColumnRole.VALUE), name=n) for n in names))
        batch = _vw([(None, key, "a", *("b" for _ in names))] if key else [], "v", *names)
        out = do_put(server.location, _cmd("t", "A", seq, descs).to_descriptor_cmd(), [batch], timeout=30)
        assert out.response is not None, out.error_text
        return out.response.durable_sequence_number

    put(1, 1)
    clock.advance(10.0)  # flushed
    put(None, 2, "w")  # an open transaction, held back
    put(1, 3)  # a replay at durable closes it and drops its put
    put(2, 4, "x")
    clock.advance(10.0)
    put(3, 5, "w")
    clock.advance(10.0)
    assert put(None, 0) == 3
    assert DeltaTable(str(tmp_path / "store" / "t")).schema().to_arrow().names == ["id", "v", "x", "w"]
    assert rows_of(tmp_path / "store" / "t") == {1: ("a", None, None), 4: ("a", "b", None), 5: ("a", None, "b")}
