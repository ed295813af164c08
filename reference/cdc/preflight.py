"""The catalog's description of every table of a publication, for the check before streaming
(spec/pgoutput/preflight.py judges it)."""

from __future__ import annotations

from reference.cdc.pgwire import PgConnection, quote_literal
from spec.pgoutput.preflight import PublishedColumn, PublishedTable, problems


def published_tables(conn: PgConnection, publication: str) -> list[PublishedTable]:
    """The publication's tables with their replica identity, keys, readability and published columns."""
    tables = conn.query(
        "SELECT c.oid, n.nspname, c.relname, c.relreplident, "
        "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), "
        "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident), "
        "has_table_privilege(c.oid, 'SELECT') "
        "FROM pg_publication_tables pt JOIN pg_namespace n ON n.nspname = pt.schemaname "
        "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
        f"WHERE pt.pubname = {quote_literal(publication)} ORDER BY 2, 3").rows
    columns: dict[str, list[PublishedColumn]] = {}
    for relid, name, oid, mod, type_name in conn.query(
            "SELECT a.attrelid, a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod) "
            "FROM pg_publication_tables pt JOIN pg_namespace n ON n.nspname = pt.schemaname "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = ANY(pt.attnames) "
            f"WHERE pt.pubname = {quote_literal(publication)} ORDER BY a.attrelid, a.attnum").rows:
        columns.setdefault(str(relid), []).append(PublishedColumn(str(name), int(str(oid)), int(str(mod)),
                                                                  str(type_name)))
    return [PublishedTable(str(schema), str(name), str(identity), pk == "t", index == "t", readable == "t",
                           tuple(columns.get(str(relid), ())))
            for relid, schema, name, identity, pk, index, readable in tables]


def table_problems(conn: PgConnection, publication: str, *, reads_back: bool) -> list[str]:
    """Every reason a table of ``publication`` cannot be replicated (empty: all can)."""
    return [p for table in published_tables(conn, publication) for p in problems(table, reads_back=reads_back)]
