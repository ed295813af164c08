"""A throwaway certificate authority for a Postgres with ``ssl = on`` (the TLS tests, the acceptance run):
``openssl`` makes a CA and the certificates it signs, in a directory of the caller's."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conformance.pgoutput.postgres_server import PostgresServer


def throwaway_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA called ``name`` (key, certificate)."""
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return key, cert


def signed(directory: Path, name: str, ca: tuple[Path, Path], extensions: str = "") -> tuple[Path, Path]:
    """A key and a certificate for CN=``name`` signed by ``ca`` (key, certificate)."""
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    (directory / f"{name}.cnf").write_text(extensions)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(key),
                    "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[1]), "-CAkey", str(ca[0]),
                    "-CAcreateserial", "-days", "2", "-extfile", str(directory / f"{name}.cnf"), "-out", str(cert)],
                   check=True, capture_output=True)
    key.chmod(0o600)
    return key, cert


def serve_tls(server: PostgresServer, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    """Set ``server`` (not yet started) to ``ssl = on`` with a certificate for localhost and 127.0.0.1 signed
    by ``ca``, whose certificate also checks client certificates; the server's key and certificate."""
    key, cert = signed(server.directory, "localhost", ca, "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    clients_ca = server.directory / "clients-ca.pem"  # the server's user reads it (a caller's tmp may be private)
    clients_ca.write_bytes(ca[1].read_bytes())
    for path in (key, cert, clients_ca):
        server.own(path)
    server.settings.update(ssl="on", ssl_cert_file=str(cert), ssl_key_file=str(key), ssl_ca_file=str(clients_ca))
    return key, cert
