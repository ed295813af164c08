"""The pgoutput stream as source transactions: the machine between decoded messages and sync puts.

Feed it every decoded message of one replication stream, in order; at each Commit it returns the
transaction: its commit LSN (the sync sequence number), its row changes grouped by table in
stream order. The rules it owns:

- structure: changes only between Begin and Commit, no nested Begin, the Commit's LSN is the one
  its Begin announced; a change names a relation a Relation message described earlier on this
  stream (Postgres sends one before a relation's first change and after each schema change);
- keys: the replica identity key (``d`` default = primary key, ``i`` the chosen index); under
  REPLICA IDENTITY FULL every column is flagged, so the key is the table's primary key, which the
  caller supplies (``primary_key``); a table with neither is refused at its first change;
- an update whose key changed is one change from the old key to the new one, which the sync
  server applies as a delete of the old row and an upsert of the new (:meth:`RowChange.split`
  makes them two changes where they must travel apart);
- unchanged TOAST values: the old tuple of REPLICA IDENTITY FULL supplies them; otherwise an
  update sends them as CHANGED=false (the table keeps the old row's value, across a key change
  too); an insert or a delete cannot have one;
- TRUNCATE is a change of each table it names (:meth:`RowChange.truncate`), in order with the
  rows: the sync put of a table's changes empties it first (the sync protocol's truncate
  extension, docs/sync.md) and carries what followed; Type, Origin and logical decoding messages
  carry nothing a table needs and are passed over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from spec.pgoutput.changes import InsertRows, Op, RowChange, TableChanges, TableImage, read_column_text
from spec.pgoutput.errors import (
    NoReplicaIdentity,
    OutOfOrder,
    PgOutputError,
    UnappliableSchemaChange,
    UnknownRelation,
    UnmappedType,
    UnresolvedToast,
)
from spec.pgoutput.layouts import ColumnKind
from spec.pgoutput.messages import (
    Begin,
    Commit,
    Delete,
    Insert,
    PgOutputMessage,
    Relation,
    RelationColumn,
    Truncate,
    TupleData,
    TupleValue,
    Update,
    decode_pgoutput,
    split_insert,
)
from spec.pgoutput.types import TYPES, UnmappedValue, pg_type


@dataclass(frozen=True, slots=True)
class SourceTransaction:
    """One committed Postgres transaction: ``commit_lsn`` numbers it; ``changes`` per table path, in order."""

    commit_lsn: int
    end_lsn: int
    commit_time: int
    xid: int
    changes: dict[str, TableChanges]
    tables: dict[str, TableImage]
    spilled_rows: int = 0
    """Changes handed over before the Commit (:meth:`TransactionAssembler.take_open`), not in ``changes``:
    they come before ``changes`` in the transaction."""

    @property
    def row_count(self) -> int:
        return self.spilled_rows + sum(len(c) for c in self.changes.values())


@dataclass(slots=True)
class _Described:
    relation: Relation
    image: TableImage | None = None
    key_positions: tuple[int, ...] = ()
    value_positions: tuple[int, ...] = ()
    readers: tuple[tuple[Callable[[str, int], object], int], ...] = ()
    """Per column, its text reader and type modifier (the plain path of :meth:`TransactionAssembler._plain_row`)."""


@dataclass(slots=True)
class TransactionAssembler:
    """Decoded messages in, :class:`SourceTransaction` out at each Commit.

    ``primary_key(relation)``: the primary key column names of a REPLICA IDENTITY FULL table
    (empty if it has none); asked once per Relation message of such a table.
    """

    primary_key: Callable[[Relation], tuple[str, ...]] = lambda _: ()
    _relations: dict[int, _Described] = field(default_factory=dict)
    _begin: Begin | None = None
    _changes: dict[str, TableChanges] = field(default_factory=dict)
    _tables: dict[str, TableImage] = field(default_factory=dict)
    _spilled_rows: int = 0
    _run: InsertRows | None = None
    """The inserts read per column since the last other message (a run ends at any other message)."""
    _run_relation: int = -1
    _runs: list[InsertRows] = field(default_factory=list)
    """The transaction's runs, in stream order (where a later fault looks for an earlier one first)."""

    def feed_data(self, data: bytes) -> SourceTransaction | None:
        """Take the next message as the stream sends it (what :meth:`feed` takes, decoded). An insert whose
        tuple is text values and NULLs, of a relation whose first insert of this stream went the per-row way,
        joins the open run of inserts (:class:`~spec.pgoutput.changes.InsertRows`: kept as text, read per
        column once its put is built), which any other message ends; anything else is decoded and fed."""
        if data[:1] == b"I" and self._begin is not None and len(data) >= 5:
            relation_id = int.from_bytes(data[1:5], "big")
            described = self._relations.get(relation_id)
            if described is not None and described.image is not None:
                values = split_insert(data, len(described.relation.columns))
                if values is not None:
                    if self._run is None or self._run_relation != relation_id:
                        self._close_run()
                        self._run, self._run_relation = InsertRows(
                            described.image, described.relation.columns, described.key_positions,
                            described.value_positions), relation_id
                        self._runs.append(self._run)
                    self._run.add(values)
                    return None
        try:
            return self.feed(decode_pgoutput(data))
        except PgOutputError:
            for run in self._runs:
                run.changes()  # a value of an earlier insert that does not read is the fault, as on the per-row path
            raise

    def _close_run(self) -> None:
        run, self._run = self._run, None
        if run is not None:
            self._changes.setdefault(run.table.path, TableChanges()).append(run)
            self._tables[run.table.path] = run.table

    @property
    def open(self) -> bool:
        """A transaction has begun and not yet committed."""
        return self._begin is not None

    @property
    def final_lsn(self) -> int | None:
        """The open transaction's commit LSN, as its Begin announced it (None: no transaction open)."""
        return None if self._begin is None else self._begin.final_lsn

    def take_open(self) -> dict[str, TableChanges]:
        """The open transaction's changes so far, per table in order, handed over (to be written out:
        spec/pgoutput/spill.py); its Commit returns only what follows, with ``spilled_rows`` counting these."""
        assert self._begin is not None, "no open transaction"
        self._close_run()
        taken, self._changes, self._runs = self._changes, {}, []
        self._spilled_rows += sum(len(c) for c in taken.values())
        return taken

    def feed(self, message: PgOutputMessage) -> SourceTransaction | None:
        """Take the next message; the whole transaction when ``message`` is its Commit."""
        self._close_run()
        if isinstance(message, Relation):
            known = self._relations.get(message.relation_id)
            if known is not None:
                _check_followable(known.relation, message)
            self._relations[message.relation_id] = _Described(message)
            return None
        if isinstance(message, Begin):
            if self._begin is not None:
                raise OutOfOrder(f"Begin of xid {message.xid} inside the transaction of xid {self._begin.xid}")
            self._begin, self._changes, self._tables, self._spilled_rows, self._runs = message, {}, {}, 0, []
            return None
        if isinstance(message, Commit):
            begin = self._begin
            if begin is None:
                raise OutOfOrder(f"Commit at LSN {message.commit_lsn} without a Begin")
            if message.commit_lsn != begin.final_lsn:
                raise OutOfOrder(f"Commit at LSN {message.commit_lsn} closes a Begin announcing {begin.final_lsn}")
            self._begin, self._runs = None, []
            return SourceTransaction(message.commit_lsn, message.end_lsn, message.commit_time, begin.xid,
                                     self._changes, self._tables, self._spilled_rows)
        if isinstance(message, (Insert, Update, Delete, Truncate)):
            if self._begin is None:
                raise OutOfOrder(f"{type(message).__name__} outside a transaction")
            if isinstance(message, Truncate):
                for relation_id in message.relation_ids:
                    image = self._image(self._described(relation_id))
                    self._changes.setdefault(image.path, TableChanges()).append(RowChange.truncate(image))
                    self._tables[image.path] = image
            else:
                self._row_changes(message)
        return None

    def _described(self, relation_id: int) -> _Described:
        described = self._relations.get(relation_id)
        if described is None:
            raise UnknownRelation(relation_id)
        return described

    def _image(self, described: _Described) -> TableImage:
        if described.image is None:
            rel = described.relation
            names = [c.name for c in rel.columns]
            if rel.replica_identity == "f":
                keys = self.primary_key(rel)
            else:
                keys = tuple(c.name for c in rel.columns if c.key) if rel.replica_identity in "di" else ()
            if not keys or any(k not in names for k in keys):
                raise NoReplicaIdentity(rel.table)
            described.key_positions = tuple(names.index(k) for k in keys)
            described.value_positions = tuple(i for i in range(len(names)) if i not in described.key_positions)
            described.readers = tuple((pg_type(c.type_oid).read, c.type_modifier) if c.type_oid in TYPES else
                                      (_unmapped, c.type_modifier) for c in rel.columns)
            described.image = TableImage(rel.table, tuple(self._typed(rel, i) for i in described.key_positions),
                                         tuple(self._typed(rel, i) for i in described.value_positions))
        return described.image

    @staticmethod
    def _typed(rel: Relation, position: int) -> tuple[str, pa.DataType]:
        column = rel.columns[position]
        try:
            return column.name, pg_type(column.type_oid).arrow(column.type_modifier)
        except UnmappedValue as exc:
            raise UnmappedType(rel.table, column.name, str(exc)) from None

    def _row_changes(self, message: Insert | Update | Delete) -> None:
        described = self._described(message.relation_id)
        image = self._image(described)
        rel = described.relation
        out = self._changes.setdefault(image.path, TableChanges())
        self._tables[image.path] = image
        if isinstance(message, Insert):
            row = _plain_row(described, message.new) or self._row(described, message.new, None, "in an insert")
            out.append(self._insert(described, image, row))
        elif isinstance(message, Delete):
            old = self._row(described, message.old, None, "in a delete key", keys_only=True)
            out.append(RowChange(image, Op.DELETE, self._key(described, old), None, None,
                                 (False,) * len(described.value_positions)))
        else:
            old_row = None if message.old is None else self._row(described, message.old, None, "in an old tuple",
                                                                  keys_only=message.old_kind == "K")
            full_old = old_row if message.old_kind == "O" else None
            new_row = self._row(described, message.new, full_old, "", allow_unchanged=True)
            new_key = self._key(described, new_row)
            old_key = new_key if old_row is None else self._key(described, old_row)
            values = tuple(None if new_row[i] is _UNCHANGED else new_row[i] for i in described.value_positions)
            changed = tuple(new_row[i] is not _UNCHANGED for i in described.value_positions)
            out.append(RowChange(image, Op.UPDATE, old_key, new_key, values, changed))

    @staticmethod
    def _insert(described: _Described, image: TableImage, row: list[object]) -> RowChange:
        return RowChange(image, Op.INSERT, None, tuple(row[i] for i in described.key_positions),
                         tuple(row[i] for i in described.value_positions), (True,) * len(described.value_positions))

    @staticmethod
    def _key(described: _Described, row: list[object]) -> tuple[object, ...]:
        return tuple(row[i] for i in described.key_positions)

    def _row(self, described: _Described, data: TupleData, full_old: list[object] | None, where: str, *,
             keys_only: bool = False, allow_unchanged: bool = False) -> list[object]:
        """The Python values of one TupleData; unchanged TOAST values taken from ``full_old`` or marked."""
        rel = described.relation
        if len(data) != len(rel.columns):
            raise OutOfOrder(f"table {rel.table}: a tuple of {len(data)} columns for a relation of {len(rel.columns)}")
        row: list[object] = []
        for i, (column, value) in enumerate(zip(rel.columns, data)):
            if keys_only and i not in described.key_positions:
                row.append(None)
            elif value.kind is ColumnKind.UNCHANGED_TOAST:
                if full_old is not None and full_old[i] is not _UNCHANGED:
                    row.append(full_old[i])
                elif allow_unchanged:
                    row.append(_UNCHANGED)
                else:
                    raise UnresolvedToast(rel.table, column.name, where)
            else:
                row.append(self._value(rel, i, value))
        return row

    @staticmethod
    def _value(rel: Relation, position: int, value: TupleValue) -> object:
        column = rel.columns[position]
        if value.kind is ColumnKind.NULL:
            return None
        if value.kind is ColumnKind.BINARY or value.value is None:
            raise UnmappedType(rel.table, column.name, "binary tuple data (the source asks for text)")
        return read_column_text(rel.table, column, value.value)


def _check_followable(old: Relation, new: Relation) -> None:
    """Raise UnappliableSchemaChange when the table's new description cannot be followed by its Delta
    table: added and dropped columns can (the sync server adds value columns; a put may leave some
    out), a column whose Arrow type changed (``ALTER COLUMN ... TYPE``) or a changed key cannot."""
    def arrow(column: RelationColumn) -> pa.DataType | None:
        try:
            return pg_type(column.type_oid).arrow(column.type_modifier)
        except UnmappedValue:
            return None  # refused where it is used (UnmappedType)

    before = {c.name: c for c in old.columns}
    for column in new.columns:
        was = before.get(column.name)
        if was is not None and arrow(was) != arrow(column):
            raise UnappliableSchemaChange(new.table, f"column {column.name} changed from {arrow(was)} to {arrow(column)}")
    if old.replica_identity != "f" and new.replica_identity != "f":
        keys_before = [c.name for c in old.columns if c.key]
        keys_now = [c.name for c in new.columns if c.key]
        if keys_before and keys_now and keys_before != keys_now:
            raise UnappliableSchemaChange(new.table, f"the replica identity key changed from {keys_before} to {keys_now}")


def _unmapped(text: str, _: int) -> object:
    raise UnmappedValue("not mapped")


def _plain_row(described: _Described, data: TupleData) -> list[object] | None:
    """The values of a tuple of text values and NULLs that all read (what nearly every insert is), in one loop;
    None for anything else, which :meth:`TransactionAssembler._row` reads or names the fault of."""
    readers = described.readers
    if len(data) != len(readers) or not data:
        return None
    row: list[object] = []
    try:
        for (read, modifier), value in zip(readers, data):
            if value.kind is ColumnKind.TEXT and value.value is not None:
                row.append(read(value.value.decode("utf-8"), modifier))
            elif value.kind is ColumnKind.NULL:
                row.append(None)
            else:
                return None
    except (ValueError, UnmappedValue, UnicodeDecodeError):
        return None
    return row


_UNCHANGED: object = object()
"""Marks an unchanged TOAST value in a decoded row."""
