"""A fresh database with the workload's tables, publication and slot per test (one Postgres for the
session), and a sync server subprocess per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reference.cdc import workload
from reference.cdc.pgwire import PgAddress, PgConnection
from conformance.pgoutput.postgres_server import PostgresServer
from reference.pipeline.syncserver import SyncServerProcess

_NAMES = itertools.count()


@dataclass(frozen=True)
class Database:
    """One test's database: its name is also its publication's and slot's."""

    server: PostgresServer
    name: str

    @property
    def address(self) -> PgAddress:
        return self.server.address(database=self.name)

    def url(self, password: str | None = None) -> str:
        secret = self.server.password if password is None else password
        return f"postgresql://postgres:{secret}@127.0.0.1:{self.server.port}/{self.name}"

    def query(self, sql: str) -> list[tuple[str | None, ...]]:
        conn = PgConnection(self.address)
        try:
            return conn.query(sql).rows
        finally:
            conn.close()


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[Database]:
    name = f"cdc{next(_NAMES)}"
    admin = postgres_server.connect()
    admin.query(f"CREATE DATABASE {name}")
    admin.close()
    db = Database(postgres_server, name)
    conn = PgConnection(db.address)
    workload.create(conn, name)
    conn.query(f"SELECT pg_create_logical_replication_slot('{name}', 'pgoutput')")
    conn.close()
    yield db
    # the session's Postgres has room for 10 slots: free this test's (those no source still holds)
    db.query(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{name}' "
             "AND NOT active")


@pytest.fixture
def sync_server(tmp_path: Path) -> Iterator[SyncServerProcess]:
    server = SyncServerProcess(str(tmp_path / "store"), tmp_path / "server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()

