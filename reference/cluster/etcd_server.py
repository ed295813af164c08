"""Run a single-member etcd on loopback in a directory of its own (tests, the conformance target).

Election and heartbeat ticks are shortened so that etcd accepts 1-second leases (its minimum TTL
is 1.5 election timeouts) and elects itself quickly after a restart.
"""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import time
from pathlib import Path

from spec.cluster.errors import ProviderUnavailable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def etcd_binary() -> str | None:
    return shutil.which("etcd")


class EtcdServer:
    """An etcd process bound to free loopback ports; ``stop`` always reaps it."""

    def __init__(self, data_dir: Path, start_timeout: float = 20.0) -> None:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("no `etcd` on PATH (Debian: apt-get install etcd-server)")
        self._binary = binary
        self._data_dir = data_dir
        self._timeout = start_timeout
        self.client_port = free_port()
        self.peer_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        log = open(self._data_dir.parent / f"{self._data_dir.name}.log", "ab")
        self._process = subprocess.Popen(
            [self._binary, "--name", "streamwire", "--data-dir", str(self._data_dir),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"streamwire={peer}",
             "--heartbeat-interval", "10", "--election-timeout", "100"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ProviderUnavailable(f"etcd exited with {self._process.returncode} at start")
            if self._healthy():
                return
            time.sleep(0.05)
        self.stop()
        raise ProviderUnavailable(f"etcd at {self.url} not healthy within {self._timeout} s")

    def _healthy(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.client_port, timeout=1.0)
        try:
            conn.request("GET", "/health")
            return b'"true"' in conn.getresponse().read()
        except OSError:
            return False
        finally:
            conn.close()

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
