"""Reading a synced table back keeps its Arrow types: timestamps, dates, decimals and doubles stay so."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark


def test_read_table_keeps_arrow_types(spark: Any, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from reference.spark.sync_sink import read_table

    when = dt.datetime(2026, 11, 23, 6, 30, 15, 123456, tzinfo=dt.timezone.utc)
    table = pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "at": pa.array([when, None], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2026, 11, 23), dt.date(2026, 1, 1)], pa.date32()),
        "price": pa.array([decimal.Decimal("12.34"), decimal.Decimal("0.01")], pa.decimal128(10, 2)),
        "ratio": pa.array([0.5, 1.5], pa.float64()),
        "name": pa.array(["a", None], pa.string()),
    })
    write_deltalake(str(tmp_path / "t"), table)
    df = read_table(spark, str(tmp_path / "t"))
    assert dict(df.dtypes) == {"id": "bigint", "at": "timestamp", "day": "date", "price": "decimal(10,2)",
                               "ratio": "double", "name": "string"}
    rows = {r["id"]: r for r in df.collect()}
    assert rows[1]["at"].astimezone(dt.timezone.utc) == when and rows[2]["at"] is None
    assert rows[1]["price"] == decimal.Decimal("12.34") and rows[2]["name"] is None
