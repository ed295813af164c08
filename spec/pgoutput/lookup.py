"""Unchanged TOAST values of key changes, read back from the published table.

Under the default replica identity Postgres does not resend a large value an update left alone
(an unchanged TOAST value), and says nothing of the old row's values. With one sink the sync server
keeps such a value from the row it holds. With several, a key change whose keys belong to different
sinks travels as a delete of the old key and an insert of the whole new row
(reference/pipeline/routing.py says why it cannot travel whole), so the new row's values must come
from somewhere: the source reads them from the table at the new key, in a snapshot that sees the
change's transaction (the query below). It does so for every key change with an unchanged value,
within one sink too, because the server would carry a value on from the old key, where an earlier
read back may have found no row.

Why a value read later is as good as the value at the change (docs/cdc-postgres.md has it too).
With the read backs, the column's value at a key is written explicitly by whatever brings a row to
the key (an insert, or a key change: from the stream or read back) and kept only by updates of the
same key. Take a key where Postgres ends with a row, and the last change that brought a row there,
at LSN L. After L the row stays at that key, so the only later writes of the column there are
updates of that key that send it, and they land after L's piece at that key's sink, which keeps the
stream's order. If none follows, the column kept its value from L to the end, and the read back,
made after L, saw exactly that value. If one follows, it lands later and its value is the final one.
A key where Postgres ends without a row: the last change that touched it removed it (a delete, or a
key change away, whose delete lands at that key's sink in order), and nothing later writes it. So
each table ends equal to Postgres's, whatever the order between sinks; on the way a reader of the
Delta table may see a newer value at a key for a while, or nulls where the row had already moved
on, as it may see any source transaction partly applied.

A commit reaches the stream once its WAL record is flushed, a moment before other sessions see
it, so the query first checks that its own snapshot sees the transaction and says so; the
caller asks again when it does not (:data:`VISIBILITY_POLL_S`, at most :data:`VISIBILITY_BOUND_S`).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from spec.pgoutput.changes import RowChange, TableImage
from spec.pgoutput.errors import UnmappedType
from spec.pgoutput.types import UnmappedValue, read_text

VISIBILITY_POLL_S: Final = 0.005
"""How long the source waits before asking again when its snapshot does not yet see the transaction."""

VISIBILITY_BOUND_S: Final = 30.0
"""How long a committed transaction may stay invisible to a new snapshot before the source stops."""

Key = tuple[object, ...]


def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """An SQL string literal (standard_conforming_strings is on since Postgres 9.1)."""
    return "'" + text.replace("'", "''") + "'"


def key_text(value: object) -> str:
    """A key value (as :func:`~spec.pgoutput.types.read_text` made it) in a text form its column's type reads."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str, decimal.Decimal)):
        return str(value)
    raise TypeError(f"a key value of type {type(value).__name__}")


def visibility_sql(xid: int) -> str:
    """True when the statement's snapshot sees 32-bit transaction ``xid`` (committed, as the stream says).

    The full 64-bit id is the one nearest below the snapshot's ``xmax`` with these low 32 bits; an
    id at or above ``xmax`` (modulo 2^32, within half the space) is not visible yet."""
    low = "(m & 4294967295)"
    return (f"(SELECT CASE WHEN (({xid} - {low}) & 4294967295) < 2147483648 THEN false "
            f"ELSE pg_visible_in_snapshot((m - (({low} - {xid}) & 4294967295))::text::xid8, pg_current_snapshot()) END "
            "FROM (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS m) s)")


@dataclass(frozen=True, slots=True)
class RowLookup:
    """One query for the unchanged values of some key changes of one table in one transaction."""

    table: TableImage
    xid: int
    keys: tuple[Key, ...]
    """The new keys whose rows are read."""
    columns: tuple[str, ...]
    """The value columns read (those unchanged in at least one of the changes)."""

    @classmethod
    def of(cls, xid: int, changes: Sequence[RowChange]) -> RowLookup:
        """The lookup of ``changes`` (key changes of one table, each with an unchanged value)."""
        table = changes[0].table
        unchanged = {name for c in changes for (name, _), changed in zip(table.values, c.changed) if not changed}
        keys = tuple(dict.fromkeys(c.new_key for c in changes if c.new_key is not None))
        return cls(table, xid, keys, tuple(name for name, _ in table.values if name in unchanged))

    def sql(self) -> str:
        """One row per key found (or a single row of nulls), each led by whether the snapshot sees ``xid``."""
        schema, name = self.table.path.split("/", 1)
        key_names = [k for k, _ in self.table.keys]
        match = " OR ".join("(" + " AND ".join(f"t.{quote_ident(k)} = {quote_literal(key_text(v))}"
                                               for k, v in zip(key_names, key)) + ")" for key in self.keys)
        selected = ", ".join(f"t.{quote_ident(c)}" for c in (*key_names, *self.columns))
        return (f"SELECT v.visible, {selected} FROM (SELECT {visibility_sql(self.xid)} AS visible) v "
                f"LEFT JOIN {quote_ident(schema)}.{quote_ident(name)} t ON v.visible AND ({match})")

    def read(self, rows: Sequence[Sequence[str | None]], type_oids: Sequence[int],
             type_modifiers: Sequence[int]) -> dict[Key, dict[str, object]] | None:
        """The values per key found (columns of :attr:`columns`); None when the snapshot did not see ``xid``."""
        if not rows or rows[0][0] != "t":
            return None
        nk = len(self.table.keys)
        found: dict[Key, dict[str, object]] = {}
        names = [k for k, _ in self.table.keys] + list(self.columns)
        for row in rows:
            values: list[object] = []
            for name, text, oid, mod in zip(names, row[1:], type_oids[1:], type_modifiers[1:]):
                try:
                    values.append(None if text is None else read_text(oid, mod, text))
                except UnmappedValue as exc:
                    raise UnmappedType(self.table.path, name, str(exc)) from None
            if values[0] is None:
                continue  # the LEFT JOIN's row of nulls: no key matched
            found[tuple(values[:nk])] = dict(zip(self.columns, values[nk:]))
        return found


def whole_row(change: RowChange, found: dict[Key, dict[str, object]]) -> RowChange:
    """``change`` with every unchanged value replaced by the one read at its new key (null when no row is there)."""
    assert change.values is not None and change.new_key is not None
    read = found.get(change.new_key, {})
    values = tuple(value if changed else read.get(name) for (name, _), value, changed
                   in zip(change.table.values, change.values, change.changed))
    return RowChange(change.table, change.op, change.old_key, change.new_key, values, (True,) * len(values))

