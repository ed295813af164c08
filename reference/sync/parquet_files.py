"""The store's data files: Parquet with Delta statistics, in row groups small enough to read a few rows back.

A flush by deletion vectors that needs the stored values of a few rows (a CHANGED=false
column, a key of several columns) reads only the row groups holding them, so its reads
follow the rows it changes rather than the size of the files they sit in.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction

from reference.sync.layout import file_stats

ROW_GROUP_ROWS = 4096
"""Rows per Parquet row group of the files the store writes (what reading one row back costs)."""


def write_data_file(files: DeltaStorageHandler, rows: pa.Table) -> AddAction:
    """Write ``rows`` as a new data file of the table ``files`` reaches; its add action."""
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    out = files.open_output_stream(name, None)
    # Parquet's writer hands the stream bytes; a Buffer (NativeFile.write) is refused by deltalake's stream.
    pq.write_table(rows, out, compression="snappy", row_group_size=ROW_GROUP_ROWS)
    size = out.tell()
    out.close()
    return AddAction(name, size, {}, int(time.time() * 1000), True, file_stats(rows))


def read_rows_at(path: Path, positions: np.ndarray[Any, np.dtype[np.int64]], schema: pa.Schema) -> pa.Table:
    """Rows ``positions`` (sorted) of a local data file, reading only the row groups that hold them."""
    parquet = pq.ParquetFile(path)
    counts = np.array([parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)], np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    group_of = np.searchsorted(starts, positions, "right") - 1
    groups = np.unique(group_of)
    base = np.zeros(len(counts), np.int64)
    base[groups] = np.concatenate([[0], np.cumsum(counts[groups])[:-1]])
    rows = parquet.read_row_groups(groups.tolist(), columns=[n for n in schema.names if n in parquet.schema_arrow.names])
    return conformed(rows.take(pa.array(positions - starts[group_of] + base[group_of])), schema)


def conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` of a data file in the table's ``schema``: a column added to the table after the file was
    written is null in it (Delta's rule for a file without a column of the table's schema)."""
    return pa.table([rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                     for f in schema], schema=schema)
