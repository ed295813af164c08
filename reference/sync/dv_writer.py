"""The store's write path by deletion vectors (local tables with ``delta.enableDeletionVectors``).

A flush finds the file and position of every row under a changed key in the row index,
reads stored values only where the spec's ``needs_stored_values`` says the changes use them
(and then only the row groups holding those rows), applies the changes with the spec's
``apply_squashed``, and commits: the old positions go into their files' DVs, the new rows
into one new file.  Its cost follows the changed keys and the files holding them, not the
table.  Compaction rewrites what DVs leave behind (``layout.purge_groups``); vacuum deletes
DV files that neither a live file nor an unexpired tombstone references.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction

from reference.sync.delta_log import local_dir, log_entry, replay
from reference.sync.dv_commit import DvChanges, DvCommit, descriptor_json, live_file_info
from reference.sync.layout import DataFile, balanced_slices, data_files, key_order, purge_groups
from reference.sync.parquet_files import read_rows_at, write_data_file
from reference.sync.row_index import Positions, RowIndex
from spec.delta.deletion_vectors import (
    DeletionVectorDescriptor,
    decode_positions,
    read_dv_entry,
)
from spec.sync.squash import SquashedChange, apply_squashed, merge_changes, needs_stored_values
from spec.sync.writer import RowGroupLimits

DV_FILE_PREFIX = "deletion_vector_"


def dv_positions(table_dir: Path, dv: DeletionVectorDescriptor) -> Positions:
    """The row positions a DV deletes, read from the log (inline) or its DV file."""
    if dv.storage_type == "i":
        return decode_positions(dv.inline_data())
    path = table_dir / dv.relative_path() if dv.storage_type == "u" else local_dir(dv.path_or_inline_dv)
    if path is None:
        raise ValueError(f"a DV outside the local filesystem: {dv.path_or_inline_dv}")
    with open(path, "rb") as fh:
        fh.seek(dv.offset or 0)
        return decode_positions(read_dv_entry(fh.read(4 + dv.size_in_bytes + 4), dv.size_in_bytes))


class DvWriter:
    """Row indexes of the tables one store writes by DVs, and the flush, compaction and vacuum that use them."""

    def __init__(self, row_groups: RowGroupLimits = RowGroupLimits()) -> None:
        self._indexes: dict[str, RowIndex] = {}
        self.row_groups = row_groups

    def latest(self, table: DeltaTable) -> int:
        """The table's latest log version, read back by deltalake only if the log moved without the store.

        deltalake's view of a table is not brought up to the store's own commits (reading each
        back would cost time in the commits since the checkpoint and the files they name): while
        the log has no version after the index's, the index's is the latest.
        """
        index = self._indexes.get(table.table_uri)
        table_dir = local_dir(table.table_uri)
        if (index is not None and table_dir is not None and index.version >= table.version()
                and not log_entry(table_dir, index.version + 1).exists()):
            return index.version
        table.update_incremental()
        return table.version()

    def read_back(self, table: DeltaTable) -> None:
        """Bring deltalake's view of ``table`` to its latest version (before deltalake reads or commits to it)."""
        if table.version() < self.latest(table):
            table.update_incremental()

    def index(self, table: DeltaTable, table_dir: Path, cluster: str) -> RowIndex:
        """The table's row index at its latest version (rebuilt if the table moved without us)."""
        index = self._indexes.get(table.table_uri)
        if index is not None and index.version == self.latest(table):
            return index
        index = RowIndex(table.version())
        live = replay(table_dir, table.version()).live
        cluster_type = pa.schema(table.schema().to_arrow()).field(cluster).type
        for add in pa.table(table.get_add_actions(flatten=True)).to_pylist():
            path = add["path"]
            column = pq.read_table(table_dir / path, columns=[cluster]).column(cluster).cast(cluster_type)
            dv = live.get(path)
            deleted = dv_positions(table_dir, dv) if dv is not None else np.array([], np.int64)
            index.add_file(path, column, deleted, dv, descriptor_json(dv), live_file_info(add))
        self._indexes[table.table_uri] = index
        return index

    def forget(self, table: DeltaTable) -> None:
        """Drop the table's index (it is rebuilt on next use)."""
        self._indexes.pop(table.table_uri, None)

    def flush(self, table: DeltaTable, files: DeltaStorageHandler, changes: Sequence[SquashedChange],
              values: pa.Array, meta: Mapping[str, str], target_rows: int,
              truncated: bool = False) -> tuple[list[AddAction], int, DvChanges]:
        """Apply ``changes`` (touching the cluster ``values``) in one commit; ``truncated``: to an empty
        table, every file removed (the truncate extension).

        Returns the add actions of the new files, the rows they hold and what the DVs did.
        """
        table_dir = _local(table)
        pk_names = tuple(changes[0].schema.pk_names)
        schema = pa.schema(table.schema().to_arrow())
        index = self.index(table, table_dir, pk_names[0])
        commit = DvCommit(table_dir, index.version, index)
        located = index.locate(values)
        full_rows = len(pk_names) > 1 or any(needs_stored_values(c.schema, schema.names) for c in changes)
        parts = []
        for path in index.paths() if truncated else ():
            commit.remove(path)
        for path, positions in () if truncated else located.files():
            commit.mark(path, positions)
            if full_rows:
                parts.append(read_rows_at(table_dir / path, positions, schema))
        if not full_rows and not truncated:  # only which keys are stored matters (needs_stored_values): the keys stand for the rows
            parts.append(pa.table({pk_names[0]: pa.array(located.keys, schema.field(pk_names[0]).type)}))
        affected = _with_columns(pa.concat_tables(parts) if parts else None, schema)
        for change in merge_changes(changes):
            affected = apply_squashed(affected, change.batch, change.schema)
        actions = _write_sorted(files, commit, affected, pk_names, target_rows, self.row_groups)
        return actions, affected.num_rows, commit.commit(meta, "MERGE")

    def compact(self, table: DeltaTable, files: DeltaStorageHandler, keys: Sequence[str],
                meta: Mapping[str, str], target_rows: int, purge_fraction: float) -> tuple[list[DataFile], list[AddAction], int]:
        """Rewrite the files ``purge_groups`` picks without their deleted rows; the files removed,
        the add actions of the files written and their rows (nothing committed when nothing to do)."""
        table_dir = _local(table)
        index = self.index(table, table_dir, keys[0])
        groups = purge_groups(data_files(pa.table(table.get_add_actions(flatten=True)), keys[0]),
                              index.deleted_rows(), target_rows, purge_fraction)
        if not groups:
            return [], [], 0
        schema = pa.schema(table.schema().to_arrow())
        commit = DvCommit(table_dir, index.version, index)
        actions: list[AddAction] = []
        removed: list[DataFile] = []
        rows_added = 0
        for group in groups:
            parts = []
            for f in group:
                rows = pq.read_table(table_dir / f.path, columns=schema.names).cast(schema)
                keep = np.ones(rows.num_rows, dtype=bool)
                keep[index.deleted(f.path)] = False
                parts.append(rows.filter(pa.array(keep)))
                commit.remove(f.path)
                removed.append(f)
            merged = pa.concat_tables(parts)
            actions += _write_sorted(files, commit, merged, keys, target_rows, self.row_groups)
            rows_added += merged.num_rows
        commit.commit(meta, "OPTIMIZE")
        return removed, actions, rows_added

    def vacuum(self, table: DeltaTable, retention_hours: float) -> int:
        """Delete DV files no live file and no tombstone younger than the retention references,
        written longer ago than the retention; how many were deleted."""
        table_dir = _local(table)
        files = replay(table_dir, table.version())
        cutoff_ms = (time.time() - retention_hours * 3600) * 1000
        kept = {dv.relative_path() for dv in files.live.values() if dv is not None and dv.storage_type == "u"}
        kept |= {dv.relative_path() for dv, when in files.removed if dv.storage_type == "u" and when >= cutoff_ms}
        deleted = 0
        for entry in os.scandir(table_dir):
            if (entry.name.startswith(DV_FILE_PREFIX) and entry.name.endswith(".bin") and entry.name not in kept
                    and entry.stat().st_mtime * 1000 < cutoff_ms):
                os.unlink(entry.path)
                deleted += 1
        return deleted


def _write_sorted(files: DeltaStorageHandler, commit: DvCommit, rows: pa.Table, keys: Sequence[str], target_rows: int,
                  row_groups: RowGroupLimits) -> list[AddAction]:
    """Write ``rows`` in key order to files of at most ``target_rows`` rows, added to ``commit``; their add
    actions.  Rows are taken in order one row group at a time (never a sorted copy of them all)."""
    order = key_order(rows, keys)
    actions = []
    for start, end in balanced_slices(rows.num_rows, target_rows) if rows.num_rows else []:
        part = order.slice(start, end - start)
        action = write_data_file(files, rows, part, row_groups)
        commit.add(action, rows.column(keys[0]).take(part))
        actions.append(action)
    return actions


def _local(table: DeltaTable) -> Path:
    table_dir = local_dir(table.table_uri)
    if table_dir is None:
        raise ValueError(f"deletion vectors are written to local tables only, not {table.table_uri}")
    return table_dir


def _with_columns(stored: pa.Table | None, schema: pa.Schema) -> pa.Table:
    """``stored`` with every column of ``schema`` (NULL where only the keys were read)."""
    if stored is None:
        return schema.empty_table()
    columns = [stored.column(f.name) if f.name in stored.column_names else pa.nulls(stored.num_rows, f.type)
               for f in schema]
    return pa.table(columns, schema=schema)
