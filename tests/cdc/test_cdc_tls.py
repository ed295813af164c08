"""TLS to Postgres as libpq's sslmode says: a server with ssl=on and a throwaway CA; verify-full
connects (and the session is encrypted) and streams; a certificate from another CA is refused in
one line; sslmode=require against a server without TLS is refused in one line."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference.cdc import workload
from reference.cdc.__main__ import main
from reference.cdc.pgwire import PgAddress, PgConnection, PgConnectionError
from conformance.pgoutput.postgres_server import PostgresServer
from reference.pipeline.syncserver import SyncServerProcess


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return key, cert


@pytest.fixture(scope="module")
def tls_server(postgres_required: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PostgresServer, Path, Path]]:
    """A Postgres with ssl=on, its certificate for localhost signed by a throwaway CA; and another CA."""
    tmp = tmp_path_factory.mktemp("tls")
    ca_key, ca = _ca(tmp, "ca")
    _, other_ca = _ca(tmp, "other")
    server = PostgresServer()
    key, csr, cert = server.directory / "server.key", tmp / "server.csr", server.directory / "server.pem"
    (tmp / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", str(key),
                    "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
                    "-CAcreateserial", "-days", "2", "-extfile", str(tmp / "san.cnf"), "-out", str(cert)],
                   check=True, capture_output=True)
    key.chmod(0o600)
    server.own(key)
    server.own(cert)
    server.settings.update(ssl="on", ssl_cert_file=str(cert), ssl_key_file=str(key))
    server.start()
    try:
        yield server, ca, other_ca
    finally:
        server.remove()


def _url(server: PostgresServer, query: str, database: str = "postgres") -> str:
    return f"postgresql://postgres:{server.password}@localhost:{server.port}/{database}?{query}"


def test_verify_full_connects_encrypted(tls_server: tuple[PostgresServer, Path, Path]) -> None:
    server, ca, _ = tls_server
    conn = PgConnection(PgAddress.parse(_url(server, f"sslmode=verify-full&sslrootcert={ca}")))
    try:
        assert conn.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").rows == [("t",)]
    finally:
        conn.close()


def test_a_certificate_of_another_ca_is_refused_in_one_line(tls_server: tuple[PostgresServer, Path, Path]) -> None:
    server, _, other_ca = tls_server
    with pytest.raises(PgConnectionError) as refused:
        PgConnection(PgAddress.parse(_url(server, f"sslmode=verify-full&sslrootcert={other_ca}")))
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"TLS to Postgres at postgresql://postgres@localhost:{server.port}/postgres "
                                                "refused: the server's certificate does not verify (sslmode=verify-full")
    assert "certificate verify failed" in line or "unable to get local issuer certificate" in line


def test_require_against_a_server_without_tls(postgres_server: PostgresServer) -> None:
    url = f"postgresql://postgres:{postgres_server.password}@127.0.0.1:{postgres_server.port}/postgres?sslmode=require"
    with pytest.raises(PgConnectionError, match="does not offer TLS, and sslmode=require requires it"):
        PgConnection(PgAddress.parse(url))


def test_the_source_streams_over_verified_tls(tls_server: tuple[PostgresServer, Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    server, ca, _ = tls_server
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
