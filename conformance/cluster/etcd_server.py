"""Run a single-member etcd on loopback in a directory of its own (tests, the conformance target).

Election and heartbeat ticks are shortened so that etcd accepts 1-second leases (its minimum TTL
is 1.5 election timeouts) and elects itself quickly after a restart.

As deployed, optionally: TLS with client certificates from a throwaway CA that ``openssl`` makes
in the server's directory (:func:`make_test_pki`), and authentication with a user whose role may
read and write every key (root gets a random password nobody keeps).
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from conformance.loopback import free_port
from reference.cluster.etcd_gateway import EtcdEndpoint, EtcdGateway, b64
from spec.cluster.errors import ProviderUnavailable


def etcd_binary() -> str | None:
    return shutil.which("etcd")


@dataclasses.dataclass(frozen=True, slots=True)
class TlsFiles:
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed (PEM files)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_test_pki(directory: Path) -> TlsFiles:
    """Make a throwaway CA and its server and client certificates with ``openssl`` (P-256 keys,
    valid one day). The server's certificate is for client use too: etcd's JSON gateway dials
    etcd's own gRPC port with it, which ``--client-cert-auth`` then checks. The client's has no
    common name: with authentication on, etcd 3.4's gateway refuses a client certificate with
    one (it would otherwise name the user), so users log in with their password."""
    if shutil.which("openssl") is None:
        raise FileNotFoundError("no `openssl` on PATH (Debian: apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(*(directory / name for name in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")))
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *key, "-keyout", str(directory / "ca.key"), "-out", str(files.ca), "-days", "1",
             "-subj", "/CN=streamwire test CA")
    for role, cert, key_file, usage, san in (
            ("server", files.server_cert, files.server_key, "serverAuth,clientAuth", "IP:127.0.0.1"),
            ("client", files.client_cert, files.client_key, "clientAuth", "DNS:streamwire")):
        request, extensions = directory / f"{role}.csr", directory / f"{role}.ext"
        extensions.write_text(f"subjectAltName={san}\nextendedKeyUsage={usage}\n")
        subject = f"/CN=streamwire {role}" if role == "server" else "/O=streamwire client"
        _openssl("req", *key, "-keyout", str(key_file), "-out", str(request), "-subj", subject)
        _openssl("x509", "-req", "-in", str(request), "-CA", str(files.ca), "-CAkey", str(directory / "ca.key"),
                 "-CAcreateserial", "-out", str(cert), "-days", "1", "-extfile", str(extensions))
    return files


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclasses.dataclass(frozen=True, slots=True)
class EtcdUser:
    """The user clients log in as; its role may read and write every key under ``/``."""

    name: str
    password: str


class EtcdServer:
    """An etcd process bound to free loopback ports; ``stop`` always reaps it.

    ``tls``: serve clients over TLS and require client certificates from its CA; ``user``:
    enable authentication with that user (set up at first start)."""

    def __init__(self, data_dir: Path, start_timeout: float = 20.0, *, tls: TlsFiles | None = None,
                 user: EtcdUser | None = None) -> None:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("no `etcd` on PATH (Debian: apt-get install etcd-server)")
        self._binary = binary
        self._data_dir = data_dir
        self._timeout = start_timeout
        self._tls = tls
        self._user = user
        self._auth_enabled = False
        self.client_port = free_port()
        self.peer_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.client_port}"

    @property
    def endpoint(self) -> EtcdEndpoint:
        """How a client reaches this server: its CA and client certificate, its user."""
        tls = self._tls
        return EtcdEndpoint("127.0.0.1", self.client_port, tls is not None,
                            None if tls is None else str(tls.ca), None if tls is None else str(tls.client_cert),
                            None if tls is None else str(tls.client_key),
                            None if self._user is None else self._user.name,
                            None if self._user is None else self._user.password)

    def start(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        log = open(self._data_dir.parent / f"{self._data_dir.name}.log", "ab")
        tls = [] if self._tls is None else [
            "--cert-file", str(self._tls.server_cert), "--key-file", str(self._tls.server_key),
            "--trusted-ca-file", str(self._tls.ca), "--client-cert-auth"]
        self._process = subprocess.Popen(
            [self._binary, "--name", "streamwire", "--data-dir", str(self._data_dir),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"streamwire={peer}",
             "--heartbeat-interval", "10", "--election-timeout", "100", *tls],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ProviderUnavailable(f"etcd exited with {self._process.returncode} at start")
            if self._healthy():
                if self._user is not None and not self._auth_enabled:
                    self._enable_auth(self._user)
                return
            time.sleep(0.05)
        self.stop()
        raise ProviderUnavailable(f"etcd at {self.url} not healthy within {self._timeout} s")

    def _healthy(self) -> bool:
        gateway = EtcdGateway(self.endpoint, timeout=1.0)
        conn = gateway.connection()
        try:
            conn.request("GET", "/health")
            return b'"true"' in conn.getresponse().read()
        except OSError:
            return False
        finally:
            conn.close()

    def _enable_auth(self, user: EtcdUser) -> None:
        """Root (with a password nobody keeps), the user with a read-write role on ``/``, then
        authentication on."""
        admin = EtcdGateway(dataclasses.replace(self.endpoint, user=None, password=None))
        admin.call("auth/user/add", {"name": "root", "password": secrets.token_hex(16)})
        admin.call("auth/user/grant", {"user": "root", "role": "root"})
        admin.call("auth/role/add", {"name": "streamwire"})
        admin.call("auth/role/grant", {"name": "streamwire", "perm": {
            "permType": "READWRITE", "key": b64("/"), "range_end": b64("0")}})
        admin.call("auth/user/add", {"name": user.name, "password": user.password})
        admin.call("auth/user/grant", {"user": user.name, "role": "streamwire"})
        admin.call("auth/enable", {})
        self._auth_enabled = True

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10.0)

    def restart(self) -> None:
        self.stop()
        self.start()
