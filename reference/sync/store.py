"""Delta Lake store of the sync server: keyed, idempotent application of squashed changes.

A flush reads only the stored rows whose keys the changes may touch (an ``IN`` list
for a single integer or string key, a per-column range otherwise), applies the
changes to them with the spec's ``apply_squashed`` and overwrites exactly that key
predicate, so delta-rs rewrites only the files that may hold affected keys.  Every
commit carries ``streamwire.sync`` metadata: the per-origin sequences whose
transactions this table fully holds (to skip replays) and the durable sequence of
every origin once the commit landed (what a restarted server reports again).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, write_deltalake

from spec.sync.messages import ColumnRole, StorageLocation
from spec.sync.squash import Change, apply_squashed, merge_changes

META_KEY = "streamwire.sync"
META_VERSION = 1
IN_LIST_LIMIT = 5000
"""Above this many affected keys a key-range predicate replaces the IN list."""


@dataclass(frozen=True)
class TableState:
    """What a table's latest commit says about the sync."""

    marks: dict[str, int]
    durable: dict[str, int]


def _sql_literal(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def key_filter(pk_names: Sequence[str], keys: set[tuple[Any, ...]]) -> tuple[str, pc.Expression] | None:
    """SQL predicate and the same Arrow filter selecting every stored row the keys may touch.

    None means the key values have no SQL rendering here, so the whole table is rewritten.
    """
    if len(pk_names) == 1:
        values = [k[0] for k in keys]
        literals = [_sql_literal(v) for v in values]
        if len(values) <= IN_LIST_LIMIT and all(lit is not None for lit in literals):
            sql = f"{_quote(pk_names[0])} IN ({', '.join(str(lit) for lit in literals)})"
            return sql, pc.field(pk_names[0]).isin(values)
    sql_parts: list[str] = []
    expr: pc.Expression | None = None
    for i, name in enumerate(pk_names):
        column = [k[i] for k in keys]
        lo, hi = min(column), max(column)
        lo_lit, hi_lit = _sql_literal(lo), _sql_literal(hi)
        if lo_lit is None or hi_lit is None:
            return None
        sql_parts.append(f"{_quote(name)} >= {lo_lit} AND {_quote(name)} <= {hi_lit}")
        part = (pc.field(name) >= lo) & (pc.field(name) <= hi)
        expr = part if expr is None else expr & part
    assert expr is not None
    return " AND ".join(sql_parts), expr


def _affected_keys(change: Change) -> set[tuple[Any, ...]]:
    keys: set[tuple[Any, ...]] = set()
    for role in (ColumnRole.OLD_PK, ColumnRole.NEW_PK):
        cols = [change.schema.column(n, role) for n in change.schema.pk_names]
        values = [change.batch.column(c.field.name).to_pylist() for c in cols if c is not None]
        keys.update(row for row in zip(*values) if not all(v is None for v in row))
    return keys


class DeltaStore:
    """Tables under one root (a local path or ``file://`` URL; other URLs with ``storage_options``)."""

    def __init__(self, root: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.root = root.rstrip("/")
        self.storage_options = dict(storage_options or {})

    def table_uri(self, path: str, store: StorageLocation | None = None) -> str:
        """Where the table at ``path`` lives (the command's own store root wins)."""
        root = store.location.rstrip("/") if store is not None and store.location else self.root
        return f"{root}/{path.strip('/')}"

    def _options(self, uri: str) -> dict[str, str] | None:
        return self.storage_options or None if uri.startswith(self.root) else None

    def read_state(self, uri: str) -> TableState:
        """The sync metadata of the table's latest commit (empty for a missing table)."""
        if not DeltaTable.is_deltatable(uri, storage_options=self._options(uri)):
            return TableState({}, {})
        history = DeltaTable(uri, storage_options=self._options(uri)).history(1)
        raw = history[0].get(META_KEY) if history else None
        if not isinstance(raw, str):
            return TableState({}, {})
        meta = json.loads(raw)
        return TableState(
            {o: int(s) for o, s in meta.get("marks", {}).items()},
            {o: int(s) for o, s in meta.get("durable", {}).items()},
        )

    def restore_durable(self) -> dict[str, int]:
        """Per-origin durable sequences recorded by the tables under a local root."""
        parsed = urlparse(self.root)
        local = parsed.path if parsed.scheme == "file" else (self.root if not parsed.scheme else None)
        durable: dict[str, int] = {}
        if local is None or not os.path.isdir(local):
            return durable
        for dirpath, dirnames, _ in os.walk(local):
            if "_delta_log" in dirnames:
                dirnames.clear()
                for origin, seq in self.read_state(dirpath).durable.items():
                    durable[origin] = max(durable.get(origin, seq), seq)
        return durable

    def write(self, uri: str, changes: Sequence[Change], marks: Mapping[str, int], durable: Mapping[str, int]) -> None:
        """Apply ``changes`` (in order) to the table in one commit carrying the sync metadata."""
        meta = json.dumps({"version": META_VERSION, "marks": dict(marks), "durable": dict(durable)}, sort_keys=True)
        props = CommitProperties(custom_metadata={META_KEY: meta})
        opts = self._options(uri)
        if not DeltaTable.is_deltatable(uri, storage_options=opts):
            if not changes:
                return
            schema = changes[0].schema.table_schema()
            write_deltalake(uri, schema.empty_table(), mode="append", storage_options=opts)
        table = DeltaTable(uri, storage_options=opts)
        dataset = table.to_pyarrow_dataset()
        keys: set[tuple[Any, ...]] = set()
        pk_names = changes[0].schema.pk_names if changes else []
        for change in changes:
            keys |= _affected_keys(change)
        if not keys:
            write_deltalake(table, dataset.schema.empty_table(), mode="append", commit_properties=props)
            return
        selector = key_filter(pk_names, keys)
        rows = dataset.to_table(filter=selector[1]) if selector is not None else dataset.to_table()
        # One application per run of equal schemas: each reads and rebuilds all affected rows.
        for change in merge_changes(changes):
            rows = apply_squashed(rows, change.batch, change.schema)
        write_deltalake(
            table,
            rows,
            mode="overwrite",
            predicate=selector[0] if selector is not None else None,
            commit_properties=props,
        )

    def read_table(self, uri: str) -> pa.Table:
        """The whole table (for readers and checks)."""
        return DeltaTable(uri, storage_options=self._options(uri)).to_pyarrow_table()

