"""A source table as the sync protocol sees it, its row changes, and their sync batch.

A table's sync key is its replica identity key; every other column is a VALUE with a CHANGED
flag (false: an unchanged TOAST value, keep what the table holds). The batch of a run of changes
has, per key column ``k``, ``old.k`` (OLD_PK) and ``new.k`` (NEW_PK); per value column ``c``,
``c`` (VALUE) and ``changed.c`` (CHANGED). An insert has no old key, a delete no new key; an
update whose keys differ is, for the sync server, a delete of the old row and an upsert of the
new one that keeps the old row's values where CHANGED is false.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, overload

import pyarrow as pa
import pyarrow.compute as pc

from spec.pgoutput.columnar import UNREADABLE, column_array
from spec.pgoutput.errors import UnmappedType, UnresolvedToast
from spec.pgoutput.messages import RelationColumn
from spec.pgoutput.types import UnmappedValue, read_text
from spec.sync.messages import ColumnDescriptor, ColumnRole


@dataclass(frozen=True, slots=True)
class TableImage:
    """A published table: its sync path (``schema/table``), key columns and value columns with Arrow types."""

    path: str
    keys: tuple[tuple[str, pa.DataType], ...]
    values: tuple[tuple[str, pa.DataType], ...]

    def descriptors(self) -> tuple[ColumnDescriptor, ...]:
        """The sync column descriptors of :meth:`batch` columns, by position."""
        return (*(ColumnDescriptor(role=int(ColumnRole.OLD_PK), name=k) for k, _ in self.keys),
                *(ColumnDescriptor(role=int(ColumnRole.NEW_PK), name=k) for k, _ in self.keys),
                *(d for v, _ in self.values for d in (ColumnDescriptor(role=int(ColumnRole.VALUE), name=v),
                                                      ColumnDescriptor(role=int(ColumnRole.CHANGED), name=v))))

    def schema(self) -> pa.Schema:
        """The Arrow schema of :meth:`batch`."""
        return pa.schema([*(pa.field(f"old.{k}", t) for k, t in self.keys),
                          *(pa.field(f"new.{k}", t) for k, t in self.keys),
                          *(f for v, t in self.values for f in (pa.field(v, t), pa.field(f"changed.{v}", pa.bool_())))])

    def batch(self, changes: Sequence[RowChange]) -> pa.Table:
        """The sync batch of ``changes`` (all of this table and image, none a TRUNCATE: :class:`TablePut`), in order."""
        assert all(c.op is not Op.TRUNCATE for c in changes), "a TRUNCATE is a put's flag, not a row"
        columns: list[list[object]] = [[] for _ in range(2 * len(self.keys) + 2 * len(self.values))]
        nk = len(self.keys)
        for change in changes:
            for i in range(nk):
                columns[i].append(None if change.old_key is None else change.old_key[i])
                columns[nk + i].append(None if change.new_key is None else change.new_key[i])
            for j in range(len(self.values)):
                columns[2 * nk + 2 * j].append(None if change.values is None else change.values[j])
                columns[2 * nk + 2 * j + 1].append(change.changed[j])
        return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, self.schema())],
                                    schema=self.schema())

    def conform(self, batch: pa.Table, image: TableImage) -> pa.Table:
        """``batch`` of ``image`` (an earlier image of this table, with the same keys) in this image: a
        value column added since is null, CHANGED in an insert (no old key) and unchanged otherwise;
        one dropped since is left out."""
        if image == self:
            return batch
        inserts = pc.is_null(batch.column(f"old.{self.keys[0][0]}"))
        columns: list[pa.ChunkedArray | pa.Array] = [batch.column(f.name) for f in list(self.schema())[:2 * len(self.keys)]]
        for name, kind in self.values:
            if name in batch.column_names:
                columns += [batch.column(name), batch.column(f"changed.{name}")]
            else:
                columns += [pa.nulls(batch.num_rows, kind), inserts]
        return pa.Table.from_arrays(columns, schema=self.schema())


class Op(str, Enum):
    """What a row change does to the table (a key-changing update is an UPDATE whose keys differ;
    a TRUNCATE empties the table and has no keys or values)."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    TRUNCATE = "truncate"


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change of ``table``: keys and values in the table image's column order.

    ``changed[j]`` is False where value ``j`` is an unchanged TOAST value (its ``values[j]`` is None).
    """

    table: TableImage
    op: Op
    old_key: tuple[object, ...] | None
    new_key: tuple[object, ...] | None
    values: tuple[object, ...] | None
    changed: tuple[bool, ...]

    @property
    def changes_key(self) -> bool:
        return self.op is Op.UPDATE and self.old_key != self.new_key

    def split(self) -> tuple[RowChange, RowChange]:
        """A key-changing update as a delete of the old key and an insert of the whole new row, for when
        the two keys travel apart (to different sinks); refused if a value is an unchanged TOAST value."""
        assert self.changes_key and self.values is not None
        for (name, _), changed in zip(self.table.values, self.changed):
            if not changed:
                raise UnresolvedToast(self.table.path, name, "in an update that moves the row to another sink's key "
                                      "(the new row must be sent whole)")
        nothing = (False,) * len(self.changed)
        return (RowChange(self.table, Op.DELETE, self.old_key, None, None, nothing),
                RowChange(self.table, Op.INSERT, None, self.new_key, self.values, self.changed))

    @classmethod
    def truncate(cls, table: TableImage) -> RowChange:
        """``TRUNCATE`` of ``table``."""
        return cls(table, Op.TRUNCATE, None, None, None, (False,) * len(table.values))


@dataclass(slots=True)
class InsertRows:
    """Consecutive inserts of one table image, kept as their values' text (None: NULL) as pgoutput sent
    them: they become Arrow a column at a time (:meth:`batch`), or :class:`RowChange` objects where one
    looks at them one by one (:meth:`changes`), both what the per-row path makes of the same inserts."""

    table: TableImage
    columns: tuple[RelationColumn, ...]
    """The relation's columns, in tuple order."""
    key_positions: tuple[int, ...]
    value_positions: tuple[int, ...]
    tuples: list[Sequence[bytes | None]] = field(default_factory=list)
    """Per insert, its values' text in column order."""

    @property
    def rows(self) -> int:
        return len(self.tuples)

    def add(self, values: Sequence[bytes | None]) -> None:
        """One more insert (a value per relation column)."""
        self.tuples.append(values)

    def changes(self) -> list[RowChange]:
        """The inserts as row changes; UnmappedType names the first value (in row order) that does not read."""
        path, changed = self.table.path, (True,) * len(self.value_positions)
        out = []
        for texts in self.tuples:
            row = [None if t is None else read_column_text(path, c, t) for c, t in zip(self.columns, texts)]
            out.append(RowChange(self.table, Op.INSERT, None, tuple(row[i] for i in self.key_positions),
                                 tuple(row[i] for i in self.value_positions), changed))
        return out

    def batch(self) -> pa.Table:
        """The inserts as the table image's sync batch (no old key, every value CHANGED), read per column;
        where a column does not convert so, exactly what :meth:`TableImage.batch` makes of :meth:`changes`."""
        texts = list(zip(*self.tuples))
        try:
            keys = [column_array(texts[i], self.columns[i], t) for i, (_, t) in zip(self.key_positions, self.table.keys)]
            values = [column_array(texts[i], self.columns[i], t)
                      for i, (_, t) in zip(self.value_positions, self.table.values)]
        except UNREADABLE:
            return self.table.batch(self.changes())
        changed = pa.repeat(True, self.rows)
        out: list[pa.Array] = [pa.nulls(self.rows, t) for _, t in self.table.keys] + keys
        for array in values:
            out += [array, changed]
        return pa.Table.from_arrays(out, schema=self.table.schema())

    @classmethod
    def joined(cls, runs: Sequence[InsertRows]) -> InsertRows:
        """Runs of the same image and columns as one run."""
        first = runs[0]
        return cls(first.table, first.columns, first.key_positions, first.value_positions,
                   [values for run in runs for values in run.tuples])

    def same_shape(self, other: InsertRows) -> bool:
        """Whether ``other`` is of the same image and columns (so the two join)."""
        return self.table == other.table and self.columns == other.columns


def read_column_text(path: str, column: RelationColumn, text: bytes) -> object:
    """One text value of ``column`` of table ``path`` as its Python value; UnmappedType if it does not read."""
    try:
        return read_text(column.type_oid, column.type_modifier, text.decode("utf-8"))
    except (UnmappedValue, UnicodeDecodeError) as exc:
        raise UnmappedType(path, column.name, str(exc)) from None


class TableChanges(Sequence[RowChange]):
    """One table's changes in order: row changes, and runs of inserts held as Arrow (:class:`InsertRows`)."""

    __slots__ = ("parts", "_count")

    def __init__(self, parts: Iterable[RowChange | InsertRows] = ()) -> None:
        self.parts: list[RowChange | InsertRows] = []
        self._count = 0
        for part in parts:
            self.append(part)

    def append(self, part: RowChange | InsertRows) -> None:
        self.parts.append(part)
        self._count += part.rows if isinstance(part, InsertRows) else 1

    def extend(self, changes: Iterable[RowChange]) -> None:
        """Append ``changes`` (their runs of inserts as they are)."""
        if isinstance(changes, TableChanges):
            self.parts.extend(changes.parts)
            self._count += len(changes)
        else:
            for change in changes:
                self.append(change)

    def __len__(self) -> int:
        return self._count

    @property
    def truncates(self) -> bool:
        """Whether a TRUNCATE is among the changes."""
        return any(isinstance(p, RowChange) and p.op is Op.TRUNCATE for p in self.parts)

    def __iter__(self) -> Iterator[RowChange]:
        for part in self.parts:
            if isinstance(part, InsertRows):
                yield from part.changes()
            else:
                yield part

    @overload
    def __getitem__(self, index: int) -> RowChange: ...
    @overload
    def __getitem__(self, index: slice) -> list[RowChange]: ...
    def __getitem__(self, index: int | slice) -> RowChange | list[RowChange]:
        return list(self)[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TableChanges({list(self)!r})"



CHUNK_ROWS: Final = 4096
"""Changes a :class:`TablePut` turns into Arrow at a time: a part of any size is held as Arrow, not as
Python objects, and no single conversion holds the interpreter long (a task's heartbeat thread
must run meanwhile)."""


@dataclass(slots=True)
class TablePut:
    """One table's changes of one transaction, as they arrive, becoming what one sync put sends: the
    changes after the last TRUNCATE (``truncate``: the put empties the table first, the sync
    truncate extension), in the table's latest image (after an ``ALTER TABLE`` in the transaction, a
    column added since is null in the earlier inserts and unchanged in the earlier updates and deletes;
    one dropped since is left out). Held as Arrow batches of :data:`CHUNK_ROWS` changes."""

    changes: int = 0
    """Changes added, TRUNCATEs included."""
    truncate: bool = False
    image: TableImage | None = None
    _batches: list[tuple[TableImage, pa.Table]] = field(default_factory=list)
    _pending: list[RowChange] = field(default_factory=list)
    _pending_runs: list[InsertRows] = field(default_factory=list)
    """Runs of inserts of one image not yet Arrow (converted together: one conversion per column)."""

    def add(self, change: RowChange | InsertRows) -> None:
        if isinstance(change, InsertRows):
            if self._pending or (self._pending_runs and not self._pending_runs[0].same_shape(change)):
                self._seal()
            self.changes += change.rows
            self._pending_runs.append(change)
            if sum(r.rows for r in self._pending_runs) >= CHUNK_ROWS:
                self._seal()
            self.image = change.table
            return
        if self._pending_runs:
            self._seal()
        self.changes += 1
        if change.op is Op.TRUNCATE:
            self.truncate, self._batches, self._pending = True, [], []
        else:
            if self._pending and self._pending[0].table != change.table:
                self._seal()
            self._pending.append(change)
            if len(self._pending) >= CHUNK_ROWS:
                self._seal()
        self.image = change.table

    @classmethod
    def of(cls, changes: Iterable[RowChange]) -> TablePut:
        """``changes`` (of one table, in order) as one put (runs of inserts as they are)."""
        put = cls()
        for change in changes.parts if isinstance(changes, TableChanges) else changes:
            put.add(change)
        return put

    def _seal(self) -> None:
        if self._pending_runs:
            run = InsertRows.joined(self._pending_runs)
            self._batches.append((run.table, run.batch()))
            self._pending_runs = []
        if self._pending:
            image = self._pending[0].table
            self._batches.append((image, image.batch(self._pending)))
            self._pending = []

    def batch(self) -> pa.Table:
        """The put's batch, in the latest image."""
        assert self.image is not None, "no change added"
        self._seal()
        image = self.image
        return pa.concat_tables([image.conform(batch, was) for was, batch in self._batches] or [image.schema().empty_table()])

