"""Compare every Delta table the source wrote with the Postgres table it came from.

Each published table is read with ``SELECT *`` (text values, read by the same type mapping the
stream uses) and compared by key with the Delta table ``<store>/<schema>/<table>``. Writes to the
published tables after the source stopped make a difference, so run it once they stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from reference.cdc.pgwire import PgAddress, PgConnection, quote_ident, quote_literal
from reference.sync.store import read_delta
from spec.pgoutput.types import pg_type, read_text


@dataclass
class TableDifference:
    """Keys of one table: missing from Delta, not in Postgres, or with other values."""

    table: str
    missing: list[tuple[Any, ...]] = field(default_factory=list)
    unexpected: list[tuple[Any, ...]] = field(default_factory=list)
    different: list[tuple[Any, ...]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    """Columns of the Postgres table the Delta table does not have."""

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.different or self.columns)

    def line(self, most: int = 5) -> str:
        parts = [f"{name} {len(keys)} (first: {keys[:most]})" for name, keys in
                 (("missing", self.missing), ("unexpected", self.unexpected), ("different", self.different)) if keys]
        if self.columns:
            parts.insert(0, f"columns not in the Delta table: {', '.join(self.columns)}")
        return f"{self.table}: " + "; ".join(parts)


def published_tables(conn: PgConnection, publication: str) -> list[tuple[str, str]]:
    return [(str(s), str(t)) for s, t in conn.query(
        f"SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = {quote_literal(publication)} "
        "ORDER BY 1, 2").rows]


def primary_key(conn: PgConnection, schema: str, table: str) -> list[str]:
    regclass = quote_literal(f"{quote_ident(schema)}.{quote_ident(table)}")
    return [str(r[0]) for r in conn.query(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        f"WHERE i.indrelid = {regclass}::regclass AND (i.indisprimary OR i.indisreplident) "
        "ORDER BY i.indisreplident DESC, array_position(i.indkey, a.attnum)").rows]


def compare_table(conn: PgConnection, store: Path, schema: str, table: str) -> TableDifference:
    """One table: Postgres rows against the Delta table's, by key."""
    result = conn.query(f"SELECT * FROM {quote_ident(schema)}.{quote_ident(table)}")
    keys = primary_key(conn, schema, table)
    arrow = pa.schema([pa.field(name, pg_type(oid).arrow(mod)) for name, oid, mod in
                       zip(result.columns, result.type_oids, result.type_modifiers)])
    source = {}
    for row in result.rows:
        values = {name: None if text is None else read_text(oid, mod, text)
                  for name, oid, mod, text in zip(result.columns, result.type_oids, result.type_modifiers, row)}
        source[tuple(values[k] for k in keys)] = values
    difference = TableDifference(f"{schema}/{table}")
    path = store / schema / table
    if not (path / "_delta_log").exists():
        difference.missing = sorted(source, key=repr)
        return difference
    delta = read_delta(str(path))
    difference.columns = [name for name in arrow.names if name not in delta.column_names]
    if difference.columns:
        return difference
    delta = delta.select(arrow.names).cast(arrow)
    stored: dict[tuple[Any, ...], dict[str, Any]] = {}
    for values in delta.to_pylist():
        key = tuple(values[k] for k in keys)
        if key in stored:
            difference.unexpected.append(key)  # a key twice: a change applied twice
        stored[key] = values
    difference.missing = sorted((k for k in source if k not in stored), key=repr)
    difference.unexpected += sorted((k for k in stored if k not in source), key=repr)
    difference.different = sorted((k for k in source if k in stored and stored[k] != source[k]), key=repr)
    return difference


def verify(address: PgAddress, publication: str, store: Path) -> list[TableDifference]:
    """Every published table compared; the tables that differ."""
    conn = PgConnection(address)
    try:
        return [d for schema, table in published_tables(conn, publication)
                if (d := compare_table(conn, store, schema, table))]
    finally:
        conn.close()
