"""Sync cases derived from the store's limits and the table's schema rules (issue 43), each answer computed by the
spec as it is:

- **Row groups** (``spec.sync.writer.RowGroupLimits``, capability ``row-groups``): a flush's rows, in key order,
  cut into row groups at most ``max_rows`` rows and ``max_bytes`` bytes (``spec.sync.writer.row_ends``), never empty.
  Each limit at exactly its bound, one under and one over; a row of exactly ``max_bytes`` and one a byte over it; both
  limits at once, each the one reached first. The answer is what a reader of the Delta table sees: its files' row
  groups, the keys of each in order.
- **A table's schema** (``spec.sync.schema.check_table_fit``): a table written, then a put with a column added,
  left out, in another order, of another type (wider, narrower), renamed in case, with its nullability changed, a
  key added, left out or in another order: the refusal (its problems as the spec words them) or the table's
  columns in order and its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from conformance.framework import CaseContext, Verdict
from spec.sync.writer import RowGroupLimits, row_ends

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

FIXED_BYTES: Final = 12
"""What ``row_ends`` counts for a row of a table ``id int64, v string`` besides the value's characters (8 + 4)."""


@dataclass(frozen=True)
class RowGroupScenario:
    """One flush into a fresh table under row-group limits: the lengths of its rows' values, in key order."""

    label: str
    max_rows: int
    max_bytes: int
    lengths: tuple[int, ...]


def _bytes(*lengths: int) -> int:
    return sum(FIXED_BYTES + n for n in lengths)


ROWS: Final = 3
"""The row bound the row-count scenarios set (the byte bound far above them)."""
WIDE: Final = 1 << 20

ROW_GROUP_SCENARIOS: Final = (
    RowGroupScenario("one row under max_rows", ROWS, WIDE, (1,) * (ROWS - 1)),
    RowGroupScenario("exactly max_rows", ROWS, WIDE, (1,) * ROWS),
    RowGroupScenario("one row over max_rows", ROWS, WIDE, (1,) * (ROWS + 1)),
    RowGroupScenario("twice max_rows and one", ROWS, WIDE, (1,) * (2 * ROWS + 1)),
    RowGroupScenario("max_rows of one", 1, WIDE, (1, 2, 3)),
    RowGroupScenario("two rows at exactly max_bytes", 100, _bytes(3, 5), (3, 5, 3, 5, 3)),
    RowGroupScenario("two rows a byte under max_bytes", 100, _bytes(3, 5) + 1, (3, 5, 3, 5, 3)),
    RowGroupScenario("two rows a byte over max_bytes", 100, _bytes(3, 5) - 1, (3, 5, 3, 5, 3)),
    RowGroupScenario("a row of exactly max_bytes between pairs", 100, _bytes(1, 1), (1, 1, 14, 1, 1)),
    RowGroupScenario("a row a byte over max_bytes between pairs", 100, _bytes(1, 1), (1, 1, 15, 1, 1)),
    RowGroupScenario("a row over max_bytes first and last", 100, _bytes(1, 1), (15, 1, 1, 15)),
    RowGroupScenario("max_rows reached before max_bytes", 2, _bytes(1, 1, 1), (1, 1, 1, 1, 1)),
    RowGroupScenario("max_bytes reached before max_rows", 4, _bytes(1, 1), (1, 1, 1, 1, 1)),
    RowGroupScenario("both at once", 2, _bytes(1, 1), (1, 1, 1, 1, 1)),
)


def expected_row_groups(scenario: RowGroupScenario) -> list[list[int]]:
    """The keys of each row group the spec cuts the scenario's rows into (keys 0, 1, ... in key order)."""
    rows = pa.table({"id": pa.array(range(len(scenario.lengths)), pa.int64()),
                     "v": pa.array(["v" * n for n in scenario.lengths], pa.string())})
    order = pa.array(range(rows.num_rows), pa.int64())
    limits = RowGroupLimits(scenario.max_rows, scenario.max_bytes)
    return [list(range(start, end)) for start, end in limits.cut(row_ends(rows, order))]


def stored_row_groups(t: SyncTarget, path: str) -> list[list[list[Any]]]:
    """The keys of each row group of each live data file of the table, files in the order of their first key."""
    from deltalake import DeltaTable

    files = []
    for uri in DeltaTable(f"{t.store}/{path}").file_uris():
        parquet = pq.ParquetFile(uri.removeprefix("file://"))
        files.append([parquet.read_row_group(i, columns=["id"]).column("id").to_pylist()
                      for i in range(parquet.num_row_groups)])
    return sorted(files, key=lambda groups: (groups[0][:1] if groups else [], len(groups)))


def row_groups_at_their_limits(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Each scenario's rows in one put to a fresh table, flushed under its limits (``SETTINGS row_group_max_rows=R
    row_group_max_bytes=B``): the table holds one file whose row groups are the spec's cut, keys in order."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    want, got = [], []
    try:
        for scenario in ROW_GROUP_SCENARIOS:
            t.command(f"SETTINGS row_group_max_rows={scenario.max_rows} row_group_max_bytes={scenario.max_bytes}")
            origin, path = _ids()
            batch = pa.table({"old_id": pa.nulls(len(scenario.lengths), pa.int64()),
                              "new_id": pa.array(range(len(scenario.lengths)), pa.int64()),
                              "v": pa.array(["v" * n for n in scenario.lengths], pa.string())})
            out = t.put(ctx, _cmd(path, origin, 1), batch)
            want.append(f"{scenario.label}: {[expected_row_groups(scenario)]}")
            got.append(f"{scenario.label}: {stored_row_groups(t, path) if out.error is None else _numbers(out)}")
    finally:
        t.command("SETTINGS")
    return Verdict(want == got, "; ".join(want), "; ".join(got))
