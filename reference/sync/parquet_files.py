"""The store's data files: Parquet with Delta statistics, written and read a row group at a time.

Row groups are cut by the spec's ``RowGroupLimits`` (rows and bytes): a flush copies one row group at
a time out of the rows it writes, in key order, so it never holds a sorted copy of them all.

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

from reference.sync.layout import FileStats
from spec.sync.writer import RowGroupLimits, row_ends


def write_data_file(files: DeltaStorageHandler, rows: pa.Table, order: pa.Array | None = None,
                    limits: RowGroupLimits = RowGroupLimits()) -> AddAction:
    """Write rows ``order`` of ``rows`` (all of them, in order, without it) as a new data file of the table
    ``files`` reaches, one row group at a time (``limits``); its add action.

    Only one row group of the file is ever copied out of ``rows`` at once."""
    if order is None:
        order = pa.array(range(rows.num_rows), pa.int64())
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    out = files.open_output_stream(name, None)
    stats = FileStats(rows.schema)
    # Parquet's writer hands the stream bytes; a Buffer (NativeFile.write) is refused by deltalake's stream.
    with pq.ParquetWriter(out, rows.schema, compression="snappy") as writer:
        for start, end in limits.cut(row_ends(rows, order)):
            group = rows.take(order.slice(start, end - start))
            writer.write_table(group, row_group_size=max(group.num_rows, 1))
            stats.add(group)
    size = out.tell()
    out.close()
    return AddAction(name, size, {}, int(time.time() * 1000), True, stats.json())


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
