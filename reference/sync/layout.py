"""Key-range layout of a sync table: which files a keyed change touches, how rows are cut into files.

A table's rows are kept sorted by its cluster column (the first primary-key column) and cut
into files of at most ``target_rows`` rows whose key ranges do not overlap, so a change to a
few keys touches only the few files whose ranges may hold them.  Ranges are the files'
min/max statistics from the Delta log; a file without them may hold any key and is always
touched.  Correctness never depends on the layout: every file that *may* hold an affected
key is touched, so a foreign or overlapping layout only costs more.  Pure: no I/O here.
"""

from __future__ import annotations

import bisect
import datetime
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class DataFile:
    """One data file of the table as its add action describes it."""

    path: str
    size: int
    rows: int
    lo: Any = None
    """Least cluster-column value (None: unknown, the file may hold any key)."""
    hi: Any = None

    @property
    def bounded(self) -> bool:
        """Whether the file's key range is known."""
        return self.lo is not None and self.hi is not None


def data_files(add_actions: pa.Table, column: str) -> list[DataFile]:
    """The files of ``DeltaTable.get_add_actions(flatten=True)``, ranged by ``column``'s statistics."""
    count = add_actions.num_rows

    def values(name: str) -> list[Any]:
        return add_actions.column(name).to_pylist() if name in add_actions.column_names else [None] * count

    return [
        DataFile(path, int(size), int(rows or 0), lo, hi)
        for path, size, rows, lo, hi in zip(
            values("path"), values("size_bytes"), values("num_records"),
            values(f"min.{column}"), values(f"max.{column}"),
        )
    ]


def _comparable(value: Any, bound: Any) -> bool:
    """Whether ``value`` orders against ``bound`` as the store's statistics do (int, str, date)."""
    return type(value) is type(bound) and type(value) in (int, str, datetime.date)


def touched_files(files: Sequence[DataFile], keys: Sequence[Any]) -> list[DataFile]:
    """Files a change of the cluster values ``keys`` (sorted, distinct) must rewrite.

    A file is touched when its range holds a key, or when it is a key's *home*: the file with
    the greatest lower bound at or below the key (the first file for a key below all), so a new
    key joins a neighbour instead of starting a small file.  A key that cannot be compared with
    the statistics (NULL, another type) touches every file.  Cost: files x log(keys).
    """
    ranged = sorted((f for f in files if f.bounded), key=lambda f: f.lo)
    touched = [f for f in files if not f.bounded]
    if not ranged or not keys:
        return touched
    if not all(_comparable(k, ranged[0].lo) for k in (keys[0], keys[-1])):
        return list(files)
    for i, f in enumerate(ranged):
        first = bisect.bisect_left(keys, f.lo)
        holds = first < len(keys) and keys[first] <= f.hi
        home_start = 0 if i == 0 else first
        home_end = bisect.bisect_left(keys, ranged[i + 1].lo) if i + 1 < len(ranged) else len(keys)
        if holds or home_end > home_start:
            touched.append(f)
    return touched


def key_order(rows: pa.Table, keys: Sequence[str]) -> pa.Array:
    """The indices of ``rows`` sorted by the key columns (NULLs first), the order the store writes files in."""
    # By position: Arrow reads a sort key's name as a field path (".a" would be field a).
    positional = pa.table({f"k{i}": rows.column(k) for i, k in enumerate(keys)})
    order: pa.Array = pc.sort_indices(positional, sort_keys=[(f"k{i}", "ascending", "at_start") for i in range(len(keys))])
    return order



def balanced_slices(rows: int, target_rows: int) -> list[tuple[int, int]]:
    """``[start, end)`` slices cutting ``rows`` into the fewest near-equal files of at most ``target_rows``."""
    count = max(math.ceil(rows / target_rows), 1)
    bounds = [rows * i // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(count) if bounds[i + 1] > bounds[i]]


def cut(sorted_keys: Sequence[Any], untouched: Sequence[DataFile], target_rows: int) -> list[tuple[int, int]]:
    """Slices of rows sorted by cluster value (NULLs first) that become files.

    Rows are first split where an untouched file's range begins, so no new file spans a
    file that stays, then each segment is cut into balanced files.
    """
    nulls = sum(1 for k in sorted_keys if k is None)
    values = sorted_keys[nulls:]
    splits = {0, len(sorted_keys)}
    for f in untouched:
        if f.bounded and values and _comparable(values[0], f.lo):
            splits.add(nulls + bisect.bisect_left(values, f.lo))
    edges = sorted(splits)
    return [
        (start + a, start + b)
        for start, end in zip(edges, edges[1:])
        for a, b in balanced_slices(end - start, target_rows)
    ]


def compaction_groups(files: Sequence[DataFile], target_rows: int) -> list[list[DataFile]]:
    """Runs of files (in key order) that compaction rewrites together.

    Files whose ranges overlap are merged; a small file (under half the target) is merged
    with a neighbour while the run stays within two targets; a file above the target is
    split.  Files without statistics form one run.  Other files are left as they are, so a
    compacted table is a fixpoint.
    """
    unbounded = [f for f in files if not f.bounded]
    groups: list[list[DataFile]] = [unbounded] if unbounded else []
    ranged = sorted((f for f in files if f.bounded), key=lambda f: (f.lo, f.hi))
    run: list[DataFile] = []
    run_hi: Any = None
    for f in ranged:
        small = f.rows < target_rows / 2 or bool(run) and run[-1].rows < target_rows / 2
        if run and (f.lo <= run_hi or (small and sum(r.rows for r in run) + f.rows <= 2 * target_rows)):
            run.append(f)
            run_hi = max(run_hi, f.hi)
            continue
        if run:
            groups.append(run)
        run, run_hi = [f], f.hi
    if run:
        groups.append(run)
    return [g for g in groups if len(g) > 1 or g[0].rows > target_rows or not g[0].bounded]


def purge_groups(files: Sequence[DataFile], deleted: Mapping[str, int], target_rows: int,
                 purge_fraction: float) -> list[list[DataFile]]:
    """Runs of files that compaction rewrites in a table whose flushes write deletion vectors.

    There a flush finds rows through the row index, not the files' ranges, so overlapping
    ranges cost nothing and are left alone.  What compaction fixes is what DVs leave behind:
    a file whose DV deletes at least ``purge_fraction`` of its rows is rewritten without them
    (alone), and files holding under half the target of live rows (the changed rows each
    flush adds) are merged in key order into runs of at most two targets.  A file above the
    target is split (a flush re-encodes the whole DV of each file it touches, so files stay
    bounded).  A compacted table is a fixpoint.  ``deleted``: path -> rows its DV deletes (``rows`` of a file is physical).
    """
    groups: list[list[DataFile]] = []
    small: list[DataFile] = []
    for f in sorted(files, key=lambda f: (f.bounded, f.lo) if f.bounded else (False, 0)):
        live = f.rows - deleted.get(f.path, 0)
        if live < target_rows / 2:
            small.append(f)
        elif deleted.get(f.path, 0) >= purge_fraction * f.rows or live > target_rows:
            groups.append([f])
    run: list[DataFile] = []
    for f in small:
        if run and sum(r.rows - deleted.get(r.path, 0) for r in run) + f.rows - deleted.get(f.path, 0) > 2 * target_rows:
            groups.append(run)
            run = []
        run.append(f)
    if len(run) > 1 or run and deleted.get(run[0].path, 0):
        groups.append(run)
    return groups


def _json_bound(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.date) else value


class FileStats:
    """The add action's ``stats`` of a file written in parts (row groups): row count, null counts,
    min/max of int, string and date columns."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self.null_count: dict[str, int] = {f.name: 0 for f in schema if not pa.types.is_nested(f.type)}
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}

    def add(self, table: pa.Table) -> None:
        """Count the rows of one part."""
        self.rows += table.num_rows
        for field, column in zip(table.schema, table.columns):
            if field.name not in self.null_count:
                continue
            self.null_count[field.name] += column.null_count
            t = field.type
            if column.null_count == len(column) or not (
                pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date32(t)
            ):
                continue
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            self.mins[field.name] = min(self.mins.get(field.name, low), low)
            self.maxs[field.name] = max(self.maxs.get(field.name, high), high)

    def json(self) -> str:
        order = [f.name for f in self.schema if f.name in self.mins]  # columns in schema order, as one pass gives
        return json.dumps(
            {"numRecords": self.rows, "minValues": {n: _json_bound(self.mins[n]) for n in order},
             "maxValues": {n: _json_bound(self.maxs[n]) for n in order}, "nullCount": self.null_count},
            separators=(",", ":"),
        )


def file_stats(table: pa.Table) -> str:
    """The add action's ``stats`` JSON of a file holding ``table``."""
    stats = FileStats(table.schema)
    stats.add(table)
    return stats.json()
