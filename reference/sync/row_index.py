"""Where each live row of a sync table is: data file and row position, by cluster value.

A flush by deletion vectors must learn the file and position of every row under a changed
key without reading the table.  The index numbers every row of every data file (a file's rows
are a range of these numbers), keeps whether its DV deletes each, and keeps the cluster values
(the first key column) of all files sorted with their row numbers, in two runs: a large one and
a small one of the files added since (merged into the large one when it passes a sixteenth of
it).  Finding ``k`` keys is then ``k x log(rows)`` searches and work in the rows found, with no
step per data file, so a flush's cost follows its keys and the files they fall in.  It is rebuilt
from the key column of every file and the DVs whenever the table moved without the store
(another writer, a restart), and kept up to date by the store's own commits.  Memory: about
17 bytes per row for numeric keys (more for strings).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyroaring

from spec.delta.deletion_vectors import DeletionVectorDescriptor

Positions = np.ndarray[Any, np.dtype[np.int64]]
RECENT_ROWS = 1 << 16
"""Rows of the small run beyond which it is merged into the large one (also at a sixteenth of it)."""


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
class _File:
    """One live data file: its range of row numbers, its DV, and what its log actions repeat."""

    start: int
    rows: int
    deleted: pyroaring.BitMap64
    """The positions its DV deletes (what the next DV is made from)."""
    dv: DeletionVectorDescriptor | None
    dv_json: str
    """``dv`` as the log writes it ("" without a DV)."""
    info: FileInfo


class _Run(NamedTuple):
    """Cluster values sorted, with the row number of each."""

    keys: np.ndarray[Any, Any]
    rows: Positions

    def find(self, wanted: np.ndarray[Any, Any]) -> tuple[Positions, np.ndarray[Any, Any]]:
        """Row numbers whose value is in ``wanted`` (sorted, distinct), and the value at each."""
        left = np.searchsorted(self.keys, wanted, "left")
        counts = np.searchsorted(self.keys, wanted, "right") - left
        idx = np.repeat(left - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        return self.rows[idx], self.keys[idx]

    @staticmethod
    def joined(runs: list[_Run]) -> _Run:
        """The runs as one: in linear time when they follow each other (the files of a laid-out table)
        or are two (the small run and a new file), else by a sort."""
        runs = sorted((r for r in runs if len(r.keys)), key=lambda r: r.keys[0]) or runs[:1]
        keys, rows = np.concatenate([r.keys for r in runs]), np.concatenate([r.rows for r in runs])
        if not np.any(keys[1:] < keys[:-1]):
            return _Run(keys, rows)
        if len(runs) == 2:
            first, second = runs
            at = np.searchsorted(first.keys, second.keys, "right")
            return _Run(np.insert(first.keys, at, second.keys), np.insert(first.rows, at, second.rows))
        order = np.argsort(keys, kind="stable")
        return _Run(keys[order], rows[order])


class Located(NamedTuple):
    """The live rows under some cluster values: per file its positions (sorted), and the values found."""

    paths: list[str]
    positions: list[Positions]
    keys: np.ndarray[Any, Any]
    """The non-null cluster values of the rows found (what stands for the rows when only keys matter)."""

    def files(self) -> Iterator[tuple[str, Positions]]:
        return zip(self.paths, self.positions)


class RowIndex:
    """The index of one table at one log version."""

    def __init__(self, version: int) -> None:
        self.version = version
        self._files: dict[str, _File] = {}
        self._starts: list[int] = []
        self._paths: list[str] = []
        """Start row number and path of every file indexed, in row-number order (removed ones too)."""
        self._deleted = np.zeros(RECENT_ROWS, dtype=bool)
        """Per row number, whether it is deleted (a DV marks it, or its file was removed)."""
        self._size = 0
        self._large: _Run | None = None
        self._small: _Run | None = None
        self._added: list[_Run] = []
        """The runs of files indexed since the last lookup (sorted into the small run by the next)."""
        self._nulls = np.array([], np.int64)
        """Row numbers whose cluster value is NULL."""

    def add_file(self, path: str, cluster: pa.Array | pa.ChunkedArray, deleted: Positions,
                 dv: DeletionVectorDescriptor | None, dv_json: str, info: FileInfo) -> None:
        """Index a data file from its cluster column (in row order) and the positions its DV deletes."""
        start, rows = self._size, len(cluster)
        self._grow(start + rows)
        self._deleted[start + deleted] = True
        valid = pc.is_valid(cluster).to_numpy(zero_copy_only=False)
        keys = comparable(pc.drop_null(cluster))
        order = np.argsort(keys, kind="stable")
        self._added.append(_Run(keys[order], start + np.flatnonzero(valid).astype(np.int64)[order]))
        if not valid.all():
            self._nulls = np.concatenate([self._nulls, start + np.flatnonzero(~valid).astype(np.int64)])
        self._files[path] = _File(start, rows, pyroaring.BitMap64(deleted.tolist()), dv, dv_json, info)
        self._starts.append(start)
        self._paths.append(path)
        self._size = start + rows

    def _grow(self, size: int) -> None:
        if size > len(self._deleted):
            grown = np.zeros(max(size, 2 * len(self._deleted)), dtype=bool)
            grown[:self._size] = self._deleted[:self._size]
            self._deleted = grown

    def remove_file(self, path: str) -> None:
        """Forget a removed file (its rows stay numbered, all deleted)."""
        entry = self._files.pop(path, None)
        if entry is not None:
            self._deleted[entry.start:entry.start + entry.rows] = True
            if 2 * sum(f.rows for f in self._files.values()) < self._size:
                self._renumber()

    def _renumber(self) -> None:
        """Number the rows of the live files anew, dropping removed files' rows (once they are most)."""
        live = sorted(self._files.items(), key=lambda item: item[1].start)
        old = np.array([f.start for _, f in live], np.int64)
        lengths = np.array([f.rows for _, f in live], np.int64)
        new = np.cumsum(lengths) - lengths

        def kept(rows: Positions) -> tuple[np.ndarray[Any, np.dtype[np.bool_]], Positions]:
            i = np.maximum(np.searchsorted(old, rows, "right") - 1, 0)
            keep = (rows >= old[i]) & (rows - old[i] < lengths[i]) if len(old) else np.zeros(len(rows), bool)
            return keep, (new[i] + rows - old[i])[keep] if len(old) else rows[:0]

        self._settle()
        runs = []
        for run in (self._large, self._small):
            if run is not None:
                keep, rows = kept(run.rows)
                runs.append(_Run(run.keys[keep], rows))
        self._large, self._small = (runs[0], runs[1] if len(runs) > 1 else None) if runs else (None, None)
        self._nulls = kept(self._nulls)[1]
        deleted = [self._deleted[f.start:f.start + f.rows] for _, f in live]
        self._size = int(lengths.sum())
        self._deleted = np.zeros(max(RECENT_ROWS, 2 * self._size), dtype=bool)
        if deleted:
            self._deleted[:self._size] = np.concatenate(deleted)
        for (_, f), start in zip(live, new.tolist()):
            f.start = start
        self._starts, self._paths = new.tolist(), [path for path, _ in live]

    def mark_deleted(self, path: str, positions: Positions, deleted: pyroaring.BitMap64,
                     dv: DeletionVectorDescriptor, dv_json: str) -> None:
        """Record that ``dv`` (``dv_json``), which deletes ``deleted`` (``positions`` among them), is now the file's DV."""
        entry = self._files[path]
        self._deleted[entry.start + positions] = True
        entry.deleted, entry.dv, entry.dv_json = deleted, dv, dv_json

    def deleted(self, path: str) -> Positions:
        """Positions the file's DV deletes."""
        entry = self._files[path]
        return np.flatnonzero(self._deleted[entry.start:entry.start + entry.rows]).astype(np.int64)

    def deleted_with(self, path: str, more: Positions) -> pyroaring.BitMap64:
        """The positions the file's DV deletes and ``more``, as a new Roaring bitmap."""
        deleted = self._files[path].deleted.copy()
        deleted.update(more.tolist())
        return deleted

    def dv_json(self, path: str) -> str:
        return self._files[path].dv_json

    def paths(self) -> list[str]:
        """Every live file of the table."""
        return list(self._files)

    def info(self, path: str) -> FileInfo:
        return self._files[path].info

    def deleted_rows(self) -> Mapping[str, int]:
        """Path -> rows its DV deletes."""
        return {path: len(f.deleted) for path, f in self._files.items()}

    def _settle(self) -> None:
        """Sort the files added since the last lookup into the small run, and that into the large one
        once it passes a sixteenth of it."""
        if not self._added:
            return
        small = _Run.joined(self._added if self._small is None else [self._small, *self._added])
        self._added = []
        large_rows = 0 if self._large is None else len(self._large.keys)
        if len(small.keys) > max(RECENT_ROWS, large_rows // 16):
            self._large, self._small = small if self._large is None else _Run.joined([self._large, small]), None
        else:
            self._small = small

    def locate(self, values: pa.Array) -> Located:
        """The live rows whose cluster value is among ``values`` (sorted, distinct, NULL last)."""
        self._settle()
        wanted = comparable(pc.drop_null(values))
        found = [run.find(wanted) for run in (self._large, self._small) if run is not None]
        rows = np.concatenate([r for r, _ in found] + [self._nulls if values.null_count else self._nulls[:0]])
        keys = np.concatenate([k for _, k in found]) if found else wanted[:0]
        keys = keys[~self._deleted[rows[:len(keys)]]]
        rows = np.sort(rows[~self._deleted[rows]])
        starts = np.array(self._starts, np.int64)
        file_of = np.searchsorted(starts, rows, "right") - 1
        firsts = np.flatnonzero(np.diff(file_of, prepend=-1)).tolist()  # where each file's rows begin
        positions = rows - starts[file_of]
        return Located([self._paths[i] for i in file_of[firsts].tolist()],
                       [positions[a:b] for a, b in zip(firsts, firsts[1:] + [len(rows)])], keys)
