"""The source connects through libpq, so libpq's options work as they do for psql: TLS as sslmode
says against a server with ssl=on and a throwaway CA (verify-full connects, the session is encrypted
and the source streams over it; a certificate from another CA, and sslmode=require against a server
without TLS, are refused in one line), a client certificate instead of a password (sslcert, sslkey),
the password file, a service file, and a host list whose first host is down."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance.loopback import free_port
from conformance.pgoutput.postgres_server import PostgresServer
from conformance.pgoutput.tls import serve_tls, signed, throwaway_ca
from reference.cdc import workload
from reference.cdc.__main__ import main
from reference.cdc.pgwire import PgAddress, PgConnection, PgConnectionError
from reference.pipeline.syncserver import SyncServerProcess
from tests.cdc.conftest import Database


@dataclass(frozen=True)
class TlsServer:
    """A Postgres with ssl=on, its certificate for localhost signed by a throwaway CA (which also signs the
    client certificate of role ``certified``, who logs in with it and no password); and another CA."""

    server: PostgresServer
    ca: Path
    other_ca: Path
    client_key: Path
    client_cert: Path


@pytest.fixture(scope="module")
def tls_server(postgres_required: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    tmp = tmp_path_factory.mktemp("tls")
    ca = throwaway_ca(tmp, "ca")
    _, other_ca = throwaway_ca(tmp, "other")
    server = PostgresServer()
    serve_tls(server, ca)
    client_key, client_cert = signed(tmp, "certified", ca)
    server.start()
    try:
        hba = server.data_dir / "pg_hba.conf"
        hba.write_text("hostssl all certified 127.0.0.1/32 cert\n" + hba.read_text())
        admin = server.connect()
        admin.query("CREATE ROLE certified LOGIN")
        admin.query("SELECT pg_reload_conf()")
        admin.close()
        yield TlsServer(server, ca[1], other_ca, client_key, client_cert)
    finally:
        server.remove()


def _url(server: PostgresServer, query: str, database: str = "postgres") -> str:
    return f"postgresql://postgres:{server.password}@localhost:{server.port}/{database}?{query}"


def _ask(address: PgAddress, sql: str) -> list[tuple[str | None, ...]]:
    conn = PgConnection(address)
    try:
        return conn.query(sql).rows
    finally:
        conn.close()


def test_verify_full_connects_encrypted(tls_server: TlsServer) -> None:
    address = PgAddress.parse(_url(tls_server.server, f"sslmode=verify-full&sslrootcert={tls_server.ca}"))
    assert _ask(address, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == [("t",)]


def test_a_certificate_of_another_ca_is_refused_in_one_line(tls_server: TlsServer) -> None:
    server = tls_server.server
    with pytest.raises(PgConnectionError) as refused:
        PgConnection(PgAddress.parse(_url(server, f"sslmode=verify-full&sslrootcert={tls_server.other_ca}")))
    assert str(refused.value) == (f'connection to server at "localhost" (127.0.0.1), port {server.port} failed: '
                                  "SSL error: certificate verify failed")


def test_require_against_a_server_without_tls(postgres_server: PostgresServer) -> None:
    url = f"postgresql://postgres:{postgres_server.password}@127.0.0.1:{postgres_server.port}/postgres?sslmode=require"
    with pytest.raises(PgConnectionError, match="server does not support SSL, but SSL was required$"):
        PgConnection(PgAddress.parse(url))


def test_a_client_certificate_logs_in_without_a_password(tls_server: TlsServer) -> None:
    address = PgAddress.of(host="localhost", port=tls_server.server.port, dbname="postgres", user="certified",
                           sslmode="verify-full", sslrootcert=str(tls_server.ca), sslcert=str(tls_server.client_cert),
                           sslkey=str(tls_server.client_key))
    assert _ask(address, "SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == [("certified", "t")]


def test_the_password_file_a_service_file_and_a_host_list(database: Database, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """No password on the command line: libpq finds it in the password file; the service file names the
    rest; the first host of the list refuses connections and the second is used."""
    port = database.server.port
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{port}:{database.name}:postgres:{database.server.password}\n")
    passfile.chmod(0o600)
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[lake]\nhost=127.0.0.1,127.0.0.1\nport={free_port()},{port}\ndbname={database.name}\n"
                        f"user=postgres\npassfile={passfile}\n")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    assert _ask(PgAddress.parse("service=lake"), "SELECT current_database()") == [(database.name,)]
    without = f"postgresql://postgres@127.0.0.1:{port}/{database.name}?passfile={tmp_path / 'none'}"
    with pytest.raises(PgConnectionError, match="no password supplied"):
        PgConnection(PgAddress.parse(without))


def test_the_source_runs_from_a_service_name(database: Database, sync_server: SyncServerProcess, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:*:postgres:{database.server.password}\n")
    passfile.chmod(0o600)
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[lake]\nhost=127.0.0.1\nport={database.server.port}\ndbname={database.name}\nuser=postgres\n")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    database.query("INSERT INTO items (id, name) SELECT g, 'n' || g FROM generate_series(1, 50) g")
    assert main(["--source", "service=lake", "--publication", database.name, "--slot", database.name, "--sync",
                 sync_server.location, "--until-lsn", "current", "--verify", "--store", sync_server.store]) == 0
    assert "50 rows" in capsys.readouterr().out


def test_the_source_streams_over_verified_tls(tls_server: TlsServer, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    server, ca = tls_server.server, tls_server.ca
    admin = server.connect()
    admin.query("CREATE DATABASE tlsdb")
    admin.close()
    conn = server.connect("tlsdb")
    workload.create(conn, "tlsdb")
    conn.close()
    workload.run_concurrently(server.address(database="tlsdb"), 2, 5)  # existing rows: the snapshot reads them
    sync = SyncServerProcess(str(tmp_path / "store"), tmp_path / "server.log")
    location = sync.start()
    try:
        status = main(["--source", _url(server, f"sslmode=verify-full&sslrootcert={ca}", "tlsdb"), "--publication",
                       "tlsdb", "--slot", "tlsdb", "--create-slot", "--state-dir", str(tmp_path), "--sync", location,
                       "--until-lsn", "current", "--verify", "--store", str(tmp_path / "store")])
    finally:
        sync.stop()
    assert status == 0 and "pipeline OK" in capsys.readouterr().out
