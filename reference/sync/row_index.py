"""Where each live row of a sync table is: data file and row position, by cluster value.

A flush by deletion vectors must learn the file and position of every row under a changed
key without reading the table.  The index keeps, per data file, the file's cluster values
(its first key column) sorted with their row positions, which positions its deletion vector
deletes, and what a re-add of the file repeats (size, time, statistics).  Finding ``k`` keys
costs ``files x log(k)`` to pick the files whose range holds a key and ``k x log(rows per
file)`` inside them; the table's size enters only through the number of files.  It is
rebuilt from the key column of every file and the DVs whenever the table moved without the
store (another writer, a restart), and kept up to date by the store's own commits.  Memory:
about 13 bytes per row for numeric keys (more for strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyroaring

from spec.delta.deletion_vectors import DeletionVectorDescriptor

Positions = np.ndarray[Any, np.dtype[np.int64]]


class FileInfo(NamedTuple):
    """What the log actions that re-add or remove a data file repeat, as JSON text up to their DV."""

    add_head: str
    """``{"add":{...`` with the file's size, time and statistics (``tightBounds`` false), up to ``"deletionVector":``."""
    remove_head: str
    """``{"remove":{...`` with the file's size, up to ``"deletionTimestamp":``."""


def comparable(values: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, Any]:
    """Non-null cluster values as a NumPy array that sorts and compares like the Arrow values."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    array: np.ndarray[Any, Any] = values.to_numpy(zero_copy_only=False)
    return array


@dataclass
class _FileRows:
    """One data file: sorted cluster values, the row of each, NULL rows, deleted rows."""

    keys: np.ndarray[Any, Any]
    order: Positions
    unique: bool
    nulls: Positions
    deleted: np.ndarray[Any, np.dtype[np.bool_]]
    """Per row, whether the DV deletes it (what a lookup tests)."""
    deleted_set: pyroaring.BitMap64
    """The same positions as a Roaring bitmap (what the next DV is made from)."""
    dv: DeletionVectorDescriptor | None
    info: FileInfo

    @property
    def rows(self) -> int:
        return len(self.deleted)

    def locate(self, wanted: np.ndarray[Any, Any]) -> tuple[Positions, np.ndarray[Any, Any]]:
        """Live positions whose value is in ``wanted`` (sorted, distinct) and the value at each."""
        if self.unique:  # the usual case (a one-column key): one search per wanted value
            idx = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
            idx = idx[self.keys[idx] == wanted]
        else:
            left = np.searchsorted(self.keys, wanted, "left")
            counts = np.searchsorted(self.keys, wanted, "right") - left
            total = int(counts.sum())
            idx = np.repeat(left - np.cumsum(counts) + counts, counts) + np.arange(total)
        positions = self.order[idx]
        live = ~self.deleted[positions]
        return positions[live], self.keys[idx][live]


class RowIndex:
    """The index of one table at one log version."""

    def __init__(self, version: int) -> None:
        self.version = version
        self._files: dict[str, _FileRows] = {}

    def add_file(self, path: str, cluster: pa.Array | pa.ChunkedArray, deleted: Positions,
                 dv: DeletionVectorDescriptor | None, info: FileInfo) -> None:
        """Index a data file from its cluster column (in row order) and the positions its DV deletes."""
        valid = pc.is_valid(cluster).to_numpy(zero_copy_only=False)
        positions = np.flatnonzero(valid).astype(np.int64)
        keys = comparable(pc.drop_null(cluster))
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        mask = np.zeros(len(valid), dtype=bool)
        mask[deleted] = True
        unique = len(keys) < 2 or bool(np.all(keys[1:] != keys[:-1]))
        self._files[path] = _FileRows(keys, positions[order], unique, np.flatnonzero(~valid).astype(np.int64),
                                      mask, pyroaring.BitMap64(deleted.tolist()), dv, info)

    def remove_file(self, path: str) -> None:
        self._files.pop(path, None)

    def mark_deleted(self, path: str, positions: Positions, dv: DeletionVectorDescriptor) -> None:
        """Record that ``dv``, which deletes ``positions`` among others, is now the file's DV."""
        entry = self._files[path]
        entry.deleted[positions] = True
        entry.deleted_set.update(positions.tolist())
        entry.dv = dv

    def deleted(self, path: str) -> Positions:
        """Positions the file's DV deletes."""
        return np.flatnonzero(self._files[path].deleted).astype(np.int64)

    def deleted_with(self, path: str, more: Positions) -> pyroaring.BitMap64:
        """The positions the file's DV deletes and ``more``, as a new Roaring bitmap."""
        deleted = self._files[path].deleted_set.copy()
        deleted.update(more.tolist())
        return deleted

    def dv(self, path: str) -> DeletionVectorDescriptor | None:
        return self._files[path].dv

    def info(self, path: str) -> FileInfo:
        return self._files[path].info

    def deleted_rows(self) -> Mapping[str, int]:
        """Path -> rows its DV deletes."""
        return {path: int(f.deleted.sum()) for path, f in self._files.items()}

    def locate(self, values: pa.Array) -> dict[str, tuple[Positions, np.ndarray[Any, Any]]]:
        """Path -> live positions whose cluster value is among ``values`` (sorted, distinct, NULL last),
        and the value at each (NULL rows have no value; they come last)."""
        wanted = comparable(pc.drop_null(values))
        with_null = values.null_count > 0
        ranged = [(path, f) for path, f in self._files.items() if len(f.keys)]
        firsts = lasts = np.zeros(len(ranged), np.int64)
        if ranged and len(wanted):  # each file's slice of ``wanted``, for all files at once
            firsts = np.searchsorted(wanted, np.array([f.keys[0] for _, f in ranged]), "left")
            lasts = np.searchsorted(wanted, np.array([f.keys[-1] for _, f in ranged]), "right")
        found: dict[str, tuple[Positions, np.ndarray[Any, Any]]] = {}
        for (path, f), first, last in zip(ranged, firsts.tolist(), lasts.tolist()):
            if last > first:
                positions, keys = f.locate(wanted[first:last])
                if len(positions):
                    found[path] = (positions, keys)
        if with_null:
            for path, f in self._files.items():
                nulls = f.nulls[~f.deleted[f.nulls]]
                if len(nulls):
                    positions, keys = found.get(path, (np.array([], np.int64), f.keys[:0]))
                    found[path] = (np.concatenate([positions, nulls]), keys)
        return found
