"""The initial snapshot: the rows a database held when the slot was created, as sync transactions
numbered below the slot's first streamed commit, in bounded chunks, resumable after a crash.

A new slot streams only what commits after its consistent point C, so the rows already there are
read in the snapshot the slot exports (``CREATE_REPLICATION_SLOT ... (SNAPSHOT 'use')`` inside a
REPEATABLE READ transaction): exactly the database at C, and the stream continues at C.

Chunks. Each published table is read in primary-key order (the replica identity key, the key the
stream uses), at most ``CHUNK_ROWS`` rows a query (``WHERE (k1, k2) > (last key) ORDER BY k1, k2
LIMIT n``, with the publication's row filter and column list), each chunk one sync transaction.
Chunk ``j`` is numbered ``C - SNAPSHOT_NUMBERS + j``: increasing, and below every commit LSN the
slot will send (each is at least C), so the sync server's rule for an origin (increasing numbers,
a replay at or below durable is skipped) holds across snapshot and stream unchanged.

Progress. A chunk's rows and its number become durable together (one sync transaction), so the
origin's durable number says which chunks landed; the source writes, before handing a chunk
over, its number and the key it ended at (:class:`SnapshotProgress`, one line each, appended),
and a last line once every chunk was handed over. After a crash the next run waits until what the
sync server holds in memory is durable, then resumes after the last durable chunk's key, in a
new REPEATABLE READ snapshot, and streams from C as before. The resumed chunks are read later
than C, so the stream then replays, over rows already newer, the changes between C and that
later snapshot: every one of them, in commit order, with whole new rows (upserts by key, deletes
by key), so by the end of the replay each key holds what Postgres holds, and no key is held
twice (the Delta table is keyed). The record is started before the slot is created, so a slot
the source created always has one until its snapshot is done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from spec.pgoutput.changes import TableImage
from spec.pgoutput.layouts import ColumnKind
from spec.pgoutput.lookup import quote_ident, quote_literal
from spec.pgoutput.messages import Begin, Commit, Insert, Relation, TupleValue
from spec.pgoutput.transactions import SourceTransaction, TransactionAssembler

CHUNK_ROWS = 5_000
"""Rows per chunk: one query and one sync transaction each (a few MB for wide rows)."""
SNAPSHOT_NUMBERS = 1 << 24
"""How many numbers below the consistent point the chunks may use (the first WAL segment ends at
2^24, so C - 2^24 is never negative); 5,000 rows each, 80 billion rows."""


class SnapshotRefused(ValueError):
    """A snapshot that cannot be numbered below the slot's consistent point."""


def chunk_number(consistent_point: int, index: int) -> int:
    """The sync number of chunk ``index`` (0-based, over all tables) of a slot created at ``consistent_point``."""
    if not 0 <= index < SNAPSHOT_NUMBERS:
        raise SnapshotRefused(f"chunk {index} is beyond the {SNAPSHOT_NUMBERS} chunks a snapshot may have")
    return consistent_point - SNAPSHOT_NUMBERS + index


@dataclass(frozen=True, slots=True)
class SnapshotTable:
    """A published table as the snapshot reads it: its Relation (as pgoutput would describe it: the
    published columns, the replica identity flags), its key columns with their SQL types, and the
    publication's row filter (None: every row)."""

    relation: Relation
    key: tuple[tuple[str, str], ...]
    """(column, SQL type as ``format_type`` prints it), in key order."""
    row_filter: str | None = None

    @property
    def path(self) -> str:
        return self.relation.table

    def chunk_query(self, after: tuple[str, ...] | None, limit: int) -> str:
        """The next chunk: the rows after key ``after`` (its text values; None: from the first), in key order."""
        rel = self.relation
        columns = ", ".join(quote_ident(c.name) for c in rel.columns)
        keys = ", ".join(quote_ident(k) for k, _ in self.key)
        where = [f"({self.row_filter})"] if self.row_filter else []
        if after is not None:
            bound = ", ".join(f"{quote_literal(v)}::{t}" for v, (_, t) in zip(after, self.key))
            where.append(f"({keys}) > ({bound})" if len(self.key) > 1 else f"{keys} > {bound}")
        condition = f" WHERE {' AND '.join(where)}" if where else ""
        return (f"SELECT {columns} FROM {quote_ident(rel.namespace)}.{quote_ident(rel.name)}{condition} "
                f"ORDER BY {keys} LIMIT {limit}")

    def last_key(self, rows: list[tuple[str | None, ...]]) -> tuple[str, ...]:
        """The key (text values) of a chunk's last row, where the next chunk starts after."""
        names = [c.name for c in self.relation.columns]
        last = rows[-1]
        out = tuple(last[names.index(k)] for k, _ in self.key)
        if any(v is None for v in out):
            raise SnapshotRefused(f"table {self.path}: a NULL in key column of a snapshot row")
        return tuple(str(v) for v in out)


def chunk_transaction(table: SnapshotTable, rows: list[tuple[str | None, ...]], number: int,
                      assembler: TransactionAssembler) -> SourceTransaction:
    """A chunk's rows as one transaction of inserts numbered ``number``, decoded by the same machine
    (type mapping, keys) as the stream's inserts."""
    assembler.feed(table.relation)
    assembler.feed(Begin(number, 0, 0))
    for row in rows:
        assembler.feed(Insert(table.relation.relation_id, tuple(
            TupleValue(ColumnKind.NULL) if v is None else TupleValue(ColumnKind.TEXT, v.encode()) for v in row)))
    tx = assembler.feed(Commit(0, number, number, 0))
    assert tx is not None
    return tx


def image_of(tx: SourceTransaction) -> TableImage:
    """The one table a chunk transaction holds."""
    (image,) = tx.tables.values()
    return image


@dataclass
class SnapshotProgress:
    """What a snapshot handed to the sync server, as appended to its progress record (one JSON line each):
    ``{"chunk": n, "table": path, "after": [key text]}`` per chunk, ``{"complete": n}`` once the last
    chunk (number n, or null: no rows at all) was handed over."""

    chunks: list[tuple[int, str, tuple[str, ...]]] = field(default_factory=list)
    complete: bool = False
    last: int | None = None

    @staticmethod
    def chunk_line(number: int, path: str, after: tuple[str, ...]) -> str:
        return json.dumps({"chunk": number, "table": path, "after": list(after)}) + "\n"

    @staticmethod
    def complete_line(last: int | None) -> str:
        return json.dumps({"complete": last}) + "\n"

    @classmethod
    def parse(cls, text: str) -> SnapshotProgress:
        """The record as written; a torn last line (a crash while appending it) is ignored."""
        progress = cls()
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                break
            if "complete" in entry:
                progress.complete, progress.last = True, entry["complete"]
            else:
                progress.chunks.append((int(entry["chunk"]), str(entry["table"]), tuple(entry["after"])))
        return progress

    def done(self, durable: int | None) -> bool:
        """Every chunk handed over, and the last one durable."""
        return self.complete and (self.last is None or (durable is not None and durable >= self.last))

    def resume_after(self, durable: int | None) -> tuple[str, tuple[str, ...]] | None:
        """(table, key) of the last durable chunk, where reading resumes; None: from the start."""
        landed = [(path, after) for number, path, after in self.chunks if durable is not None and number <= durable]
        return landed[-1] if landed else None


def resume_plan(tables: list[SnapshotTable], after: tuple[str, tuple[str, ...]] | None,
                ) -> list[tuple[SnapshotTable, tuple[str, ...] | None]]:
    """The tables still to read, each with the key to start after (None: from its first row)."""
    if after is None:
        return [(t, None) for t in tables]
    paths = [t.path for t in tables]
    if after[0] not in paths:
        return [(t, None) for t in tables]
    start = paths.index(after[0])
    return [(tables[start], after[1]), *((t, None) for t in tables[start + 1:])]
