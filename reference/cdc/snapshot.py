"""Reading the initial snapshot (the rules are spec/pgoutput/snapshot.py): the published tables from
the catalog, their chunks on the replication connection inside its REPEATABLE READ transaction,
the progress record appended and fsynced before each chunk is handed over, a line per chunk on
the console."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from reference.cdc.pgwire import PgConnection, quote_literal
from spec.pgoutput.messages import Relation, RelationColumn
from spec.pgoutput.snapshot import SnapshotProgress, SnapshotRefused, SnapshotTable, chunk_transaction, resume_plan
from spec.pgoutput.transactions import SourceTransaction, TransactionAssembler


def snapshot_tables(conn: PgConnection, publication: str) -> list[SnapshotTable]:
    """Every table of the publication as pgoutput describes it (published columns, replica identity flags),
    with its key and row filter, in schema and name order."""
    tables = []
    for oid, schema, name, identity, row_filter in conn.query(
            "SELECT c.oid, n.nspname, c.relname, c.relreplident, pt.rowfilter FROM pg_publication_tables pt "
            "JOIN pg_namespace n ON n.nspname = pt.schemaname "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
            f"WHERE pt.pubname = {quote_literal(publication)} ORDER BY 2, 3").rows:
        index = "i.indisreplident" if identity == "i" else "i.indisprimary"
        rows = conn.query(
            "SELECT a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod), "
            "array_position(i.indkey, a.attnum) FROM pg_attribute a "
            f"LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND {index} AND a.attnum = ANY(i.indkey) "
            f"JOIN pg_publication_tables pt ON pt.pubname = {quote_literal(publication)} "
            f"AND pt.schemaname = {quote_literal(str(schema))} AND pt.tablename = {quote_literal(str(name))} "
            f"WHERE a.attrelid = {oid} AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY(pt.attnames) "
            "ORDER BY a.attnum").rows
        in_key = {str(r[0]): int(str(r[4])) for r in rows if r[4] is not None}
        identity = str(identity)
        relation = Relation(int(str(oid)), str(schema), str(name), identity, tuple(
            RelationColumn(identity == "f" or (identity in "di" and str(r[0]) in in_key), str(r[0]), int(str(r[1])),
                           int(str(r[2]))) for r in rows))
        types = {str(r[0]): str(r[3]) for r in rows}
        key = sorted(in_key, key=in_key.__getitem__) if identity == "f" else [c.name for c in relation.columns if c.key]
        tables.append(SnapshotTable(relation, tuple((k, types[k]) for k in key), row_filter))
    return tables


class SnapshotReader:
    """The chunks of one snapshot, read on ``conn`` inside its open REPEATABLE READ transaction, numbered
    from ``first_number`` up (below ``limit``, the slot's consistent point)."""

    def __init__(self, conn: PgConnection, tables: list[SnapshotTable], progress: Path, *,
                 after: tuple[str, tuple[str, ...]] | None, first_number: int, limit: int, chunk_rows: int,
                 primary_key: Callable[[Relation], tuple[str, ...]], say: Callable[[str], None]) -> None:
        self._conn, self._progress, self._say = conn, progress, say
        self._plan = resume_plan(tables, after)
        self._number, self._limit, self._chunk_rows = first_number, limit, chunk_rows
        self._assembler = TransactionAssembler(primary_key=primary_key)
        self._rows = 0
        self.last: int | None = None

    def next(self) -> SourceTransaction | None:
        """The next chunk (its progress line written first); None once every table was read, the complete
        line written and the transaction committed."""
        while self._plan:
            table, after = self._plan[0]
            rows = self._conn.query(table.chunk_query(after, self._chunk_rows)).rows
            if not rows:
                self._say(f"snapshot of {table.path} read: {self._rows} rows")
                self._plan.pop(0)
                self._rows = 0
                continue
            if self._number >= self._limit:
                raise SnapshotRefused(f"snapshot chunk number {self._number} is not below the slot's consistent "
                                      f"point {self._limit}")
            last_key = table.last_key(rows)
            self._plan[0] = (table, last_key)
            tx = chunk_transaction(table, rows, self._number, self._assembler)
            append_durably(self._progress, SnapshotProgress.chunk_line(self._number, table.path, last_key))
            self.last, self._number = self._number, self._number + 1
            self._rows += len(rows)
            self._say(f"snapshot of {table.path}: {self._rows} rows so far (up to key {', '.join(last_key)})")
            return tx
        self._conn.query("COMMIT")
        append_durably(self._progress, SnapshotProgress.complete_line(self.last))
        self._say("snapshot read; streaming from the slot")
        return None


def append_durably(path: Path, line: str) -> None:
    """Append one line and fsync it (the directory too when the file is new)."""
    new = not path.exists()
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
    if new:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
