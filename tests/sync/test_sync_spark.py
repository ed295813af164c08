"""PySpark: the sink pushes changes from executors, the reader returns the synced table."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore
from spec.sync.messages import ColumnDescriptor, ColumnRole
from spec.sync.writer import SyncSettings



@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    # Workers must run this venv's Python with the repository importable.
    root = str(Path(__file__).resolve().parents[2])
    monkey = pytest.MonkeyPatch()
    monkey.setenv("PYSPARK_PYTHON", sys.executable)
    monkey.setenv("PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    session = SparkSession.builder.master("local[2]").appName("sync-sink-test").config(
        "spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    yield session
    session.stop()
    monkey.undo()


@pytest.mark.spark
def test_sink_then_reader_round_trip(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from reference.spark.sync_sink import read_table, write_changes

    server = SyncServer(DeltaStore(str(tmp_path)), settings=SyncSettings(max_replication_lag_s=0))
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        rows = [
            ("pg-a", 1, None, 1, "a1"), ("pg-a", 1, None, 2, "a2"),
            ("pg-a", 2, 1, 10, "a1-moved"), ("pg-a", 3, 2, None, None),
            ("pg-b", 5, None, 100, "b"), ("pg-b", 6, 100, 100, "b2"),
        ]
        df = spark.createDataFrame(rows, "origin string, sequence long, old_id long, new_id long, v string")
        descs = [ColumnDescriptor(role=int(ColumnRole.OLD_PK), name="id"),
                 ColumnDescriptor(role=int(ColumnRole.NEW_PK), name="id"),
                 ColumnDescriptor(role=int(ColumnRole.VALUE), name="v")]
        durable = write_changes(df, f"grpc://127.0.0.1:{server.port}", "t", descs)
        assert durable == {"pg-a": 3, "pg-b": 6}
        got = sorted((r["id"], r["v"]) for r in read_table(spark, str(tmp_path / "t")).collect())
        assert got == [(10, "a1-moved"), (100, "b2")]
    finally:
        server.shutdown()
