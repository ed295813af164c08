"""The expected final table, computed from the stream alone, and the check of a table against it.

:func:`expected_state` follows entities (a row's identity across key changes) and inverts the
result into rows by key; it never applies a change to a keyed table, so it shares no logic with
the sync server's squash-and-apply path it judges.  :func:`apply_change` is the naive keyed,
row-by-row applier the tests hold the oracle against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reference.pipeline.changes import Change, Op, StreamSpec
from spec.errors import RuntimeFailure

Row = dict[str, Any]
COLUMNS = ("id", "entity", "value", "note", "origin", "seq")


class InvalidChange(RuntimeFailure):
    """A change does not fit the table it is applied to (e.g. an insert over a live key)."""

    condition = "PIPELINE_INVALID_CHANGE"


def expected_state(spec: StreamSpec) -> dict[int, Row]:
    """The final rows by key after every transaction of every origin."""
    rows: dict[int, Row] = {}
    for origin in range(spec.origins):
        name = spec.origin_name(origin)
        entities: dict[int, Row | None] = {}
        for tx in spec.transactions(origin):
            for c in tx.changes:
                if c.op is Op.DELETE:
                    entities[c.entity] = None
                    continue
                previous = entities.get(c.entity)
                note = c.note if c.note_changed else (previous or {}).get("note")
                entities[c.entity] = {"id": c.new_id, "entity": c.entity, "value": c.value, "note": note,
                                      "origin": name, "seq": tx.seq}
        for entity, row in entities.items():
            if row is None:
                continue
            if row["id"] in rows:
                raise InvalidChange(f"entities {rows[row['id']]['entity']} and {entity} both end at key {row['id']}")
            rows[row["id"]] = row
    return rows


def apply_change(table: dict[int, Row], change: Change, origin: str, seq: int) -> None:
    """Apply one change row to ``table`` (keyed by id) as the sync protocol defines it, strictly."""
    old, new = change.old_id, change.new_id
    previous: Row | None = None
    if old is not None:
        previous = table.pop(old, None)
        if previous is None:
            raise InvalidChange(f"{origin} seq {seq}: change of missing key {old}")
    if new is None:
        return
    if new in table:
        raise InvalidChange(f"{origin} seq {seq}: key {new} is already live")
    if not change.note_changed and previous is None:
        raise InvalidChange(f"{origin} seq {seq}: unchanged note of key {new} without a stored row")
    note = change.note if change.note_changed else previous["note"] if previous else None
    table[new] = {"id": new, "entity": change.entity, "value": change.value, "note": note,
                  "origin": origin, "seq": seq}


@dataclass
class TableDiff:
    """How a table differs from the expected rows (empty when it matches)."""

    missing: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    different: list[tuple[Row, Row]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.duplicated or self.different)

    def describe(self, limit: int = 10) -> str:
        """A readable account of the first ``limit`` differences of each kind."""
        lines = []
        for label, keys in (("missing", self.missing), ("unexpected", self.unexpected),
                            ("duplicated", self.duplicated)):
            if keys:
                lines.append(f"{len(keys)} {label} keys: {sorted(keys)[:limit]}")
        if self.different:
            lines.append(f"{len(self.different)} rows differ:")
            lines += [f"  key {want['id']}: expected {want}, table has {got}" for want, got in self.different[:limit]]
        return "\n".join(lines)


def compare(expected: Mapping[int, Row], actual: Iterable[Row]) -> TableDiff:
    """Compare table rows (any extra columns ignored) with the expected rows by key."""
    diff = TableDiff()
    seen: dict[int, Row] = {}
    for row in actual:
        key = row["id"]
        if key in seen:
            diff.duplicated.append(key)
            continue
        seen[key] = {c: row.get(c) for c in COLUMNS}
    for key, want in expected.items():
        got = seen.get(key)
        if got is None:
            diff.missing.append(key)
        elif got != want:
            diff.different.append((want, got))
    diff.unexpected = [k for k in seen if k not in expected]
    return diff
