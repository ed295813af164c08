"""Set-up mistakes a user makes give one line saying what to change, before anything is consumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference.cdc.__main__ import main
from conformance.pgoutput.postgres_server import PostgresServer
from reference.cdc.source import slot_position
from reference.cdc.verify import verify
from reference.pipeline.syncserver import SyncServerProcess
from spec.pgoutput.messages import parse_lsn
from tests.cdc.conftest import Database

NO_SYNC_SERVER = "grpc://127.0.0.1:9"
"""Set-up errors stop the source before it talks to the sync server."""


def cdc(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``python -m reference.cdc ARGS`` in this process: exit status and the one line on stderr."""
    status = main(list(args))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) <= 1, lines
    return status, lines[0] if lines else ""


def test_wrong_password(database: Database, capsys: pytest.CaptureFixture[str]) -> None:
    assert cdc(capsys, "--source", database.url(password="wrong"), "--publication", database.name, "--slot",
               database.name, "--sync", NO_SYNC_SERVER) == (
        2, f'cdc: connection to server at "127.0.0.1", port {database.server.port} failed: FATAL: password '
           'authentication failed for user "postgres"')


def test_missing_publication_and_missing_slot(database: Database, capsys: pytest.CaptureFixture[str]) -> None:
    status, line = cdc(capsys, "--source", database.url(), "--publication", "nope", "--slot", database.name,
                       "--sync", NO_SYNC_SERVER)
    assert status == 2 and line.startswith(f"cdc: publication 'nope' does not exist in database '{database.name}'")
    status, line = cdc(capsys, "--source", database.url(), "--publication", database.name, "--slot", "other",
                       "--sync", NO_SYNC_SERVER)
    assert status == 2 and "replication slot 'other' does not exist" in line and "--create-slot" in line


def test_wal_level_replica(postgres_required: None, capsys: pytest.CaptureFixture[str]) -> None:
    with PostgresServer(wal_level="replica") as server:
        server.connect().query("CREATE PUBLICATION p FOR ALL TABLES")
        status, line = cdc(capsys, "--source", server.url(), "--publication", "p", "--slot", "s", "--create-slot",
                           "--sync", NO_SYNC_SERVER)
    assert status == 2 and "has wal_level=replica; logical replication needs wal_level=logical" in line


def test_tables_that_cannot_be_replicated_are_named_before_anything_is_consumed(
        database: Database, capsys: pytest.CaptureFixture[str]) -> None:
    """A published table without a key and a column of a type with no Arrow form: one line naming both, at start."""
    database.query("INSERT INTO items (id) VALUES (1)")
    before = slot_position(database.address, database.name)
    database.query("CREATE TABLE logs (at timestamptz, what text)")
    database.query("CREATE TABLE spans (id bigint PRIMARY KEY, took interval, marks integer[])")
    database.query(f"ALTER PUBLICATION {database.name} ADD TABLE logs, spans")
    status, line = cdc(capsys, "--source", database.url(), "--publication", database.name, "--slot", database.name,
                       "--sync", NO_SYNC_SERVER)
    assert status == 2
    assert line == (f"cdc: publication '{database.name}' has tables that cannot be replicated: public/logs has no "
                    "replica identity key (add a primary key, or ALTER TABLE ... REPLICA IDENTITY USING INDEX a unique "
                    "index of NOT NULL columns); public/spans: column took has type interval, which has no Arrow type "
                    "here (leave the column out of the publication's column list, or change its type); public/spans: "
                    "column marks has type integer[], which has no Arrow type here (leave the column out of the "
                    "publication's column list, or change its type)")
    assert slot_position(database.address, database.name) == before
    database.query(f"ALTER PUBLICATION {database.name} SET TABLE items, pairs, spans (id)")  # a column list
    database.query("ALTER TABLE logs ADD PRIMARY KEY (at)")
    database.query(f"ALTER PUBLICATION {database.name} ADD TABLE logs")
    assert cdc(capsys, "--source", database.url(), "--publication", database.name, "--slot", database.name,
               "--sync", NO_SYNC_SERVER, "--until-lsn", "0/1") == (0, "")
