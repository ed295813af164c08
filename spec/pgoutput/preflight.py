"""What makes a published table impossible to replicate, judged from the catalog before streaming.

A table without a replica identity key (its updates and deletes cannot be applied by key), a
column whose type has no faithful Arrow type, or, where the source reads unchanged TOAST values
back (spec/pgoutput/lookup.py), a table it may not read: each would stop the stream at the table's
first change, after the slot had been read up to it. The source checks every table of the
publication first and stops with one line naming every problem and its fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec.pgoutput.types import UnmappedValue, pg_type


@dataclass(frozen=True, slots=True)
class PublishedColumn:
    """A published column as the catalog describes it (``type_name``: ``format_type``'s text)."""

    name: str
    type_oid: int
    type_modifier: int
    type_name: str


@dataclass(frozen=True, slots=True)
class PublishedTable:
    """A table of the publication as the catalog describes it."""

    schema: str
    name: str
    replica_identity: str
    """``d`` default (primary key), ``n`` nothing, ``f`` full, ``i`` index (pg_class.relreplident)."""
    has_primary_key: bool
    has_identity_index: bool
    readable: bool
    """The source's role may SELECT from it."""
    columns: tuple[PublishedColumn, ...]

    @property
    def path(self) -> str:
        return f"{self.schema}/{self.name}"

    def has_key(self) -> bool:
        """Whether its changes carry a key: the primary key (default, or full), or the identity index."""
        if self.replica_identity == "i":
            return self.has_identity_index
        return self.replica_identity in "df" and self.has_primary_key


def problems(table: PublishedTable, *, reads_back: bool) -> list[str]:
    """Why ``table`` cannot be replicated, each with its fix; empty when it can."""
    out: list[str] = []
    if not table.has_key():
        out.append(f"{table.path} has no replica identity key (add a primary key, or ALTER TABLE ... REPLICA "
                   "IDENTITY USING INDEX a unique index of NOT NULL columns)")
    for column in table.columns:
        try:
            pg_type(column.type_oid).arrow(column.type_modifier)
        except UnmappedValue:
            out.append(f"{table.path}: column {column.name} has type {column.type_name}, which has no Arrow type here "
                       "(leave the column out of the publication's column list, or change its type)")
    if reads_back and not table.readable:
        out.append(f"{table.path} cannot be read by the source's role, which reads unchanged TOAST values back "
                   f"from it (GRANT SELECT ON {table.schema}.{table.name} TO the role)")
    return out
