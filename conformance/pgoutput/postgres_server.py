"""A throwaway Postgres (tests, ``make demo-postgres``, the benchmark): ``initdb`` in a fresh temporary
directory, bound to a free loopback port and a unix socket in that directory, stopped and removed.

Postgres refuses to run as root: run as root (CI), the server runs as ``nobody`` in a directory
``nobody`` owns, which is why the directory is its own ``mkdtemp`` and not a caller's (pytest's
are private to root).

The binaries come from ``PATH`` or Debian's ``/usr/lib/postgresql/<major>/bin`` (package
``postgresql-15``; ``.ci/run`` installs it where missing). ``wal_level`` is ``logical`` unless told
otherwise; the superuser ``postgres`` logs in with ``password`` over TCP (SCRAM-SHA-256) and
without one over the socket.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from conformance.loopback import free_port
from reference.cdc.pgwire import PgAddress, PgConnection, PgConnectionError, PgServerError

SUPERUSER = "postgres"


def postgres_bin_dir() -> Path | None:
    """The directory of ``initdb``/``pg_ctl``: PATH first, then the newest Debian install."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


class PostgresServer:
    """One Postgres cluster in a directory of its own; ``start``/``stop``/``restart``; ``remove`` deletes it."""

    def __init__(self, *, password: str = "streamwire", wal_level: str = "logical",
                 start_timeout_s: float = 30.0, settings: dict[str, str] | None = None) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise FileNotFoundError("no Postgres binaries (Debian: apt-get install postgresql-15)")
        self._bin = bin_dir
        self._user = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
        self.directory = Path(tempfile.mkdtemp(prefix="streamwire-pg-"))
        self._own(self.directory)
        self.data_dir = self.directory / "data"
        self.password = password
        self.wal_level = wal_level
        self.settings = settings or {}
        """More postgresql.conf settings (``ssl``, ``ssl_cert_file``, ...)."""
        self.port = free_port()
        self._timeout = start_timeout_s
        self._started = False

    def address(self, *, user: str = SUPERUSER, password: str | None = None, database: str = "postgres",
                socket: bool = True) -> PgAddress:
        """The socket address (no password needed) or, with ``socket=False``, the TCP one."""
        host = str(self.directory) if socket else "127.0.0.1"
        return PgAddress.of(host=host, port=self.port, user=user, dbname=database,
                            password=self.password if password is None else password)

    def url(self, database: str = "postgres", *, with_password: bool = True) -> str:
        secret = f":{self.password}" if with_password else ""
        return f"postgresql://{SUPERUSER}{secret}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres", *, replication: bool = False) -> PgConnection:
        """A session over the unix socket (no password needed)."""
        return PgConnection(self.address(database=database), replication=replication)

    def own(self, path: Path) -> None:
        """Give ``path`` to the user the server runs as (a TLS key must be the server's own, mode 0600)."""
        self._own(path)

    def _own(self, path: Path) -> None:
        if self._user is not None:
            os.chown(path, self._user.pw_uid, self._user.pw_gid)

    def _run(self, *args: str, timeout_s: float = 120.0, check: bool = True) -> None:
        try:
            subprocess.run([str(self._bin / args[0]), *args[1:]], check=check, capture_output=True, timeout=timeout_s,
                           user=self._user.pw_uid if self._user else None,
                           group=self._user.pw_gid if self._user else None, extra_groups=[] if self._user else None)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"{args[0]} failed: {exc.stderr.decode(errors='replace').strip()}") from None

    def start(self) -> None:
        if not self.data_dir.exists():
            pwfile = self.directory / "pwfile"
            pwfile.write_text(self.password + "\n")
            self._own(pwfile)
            self._run("initdb", "-D", str(self.data_dir), "-U", SUPERUSER, "--pwfile", str(pwfile),
                      "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
            pwfile.unlink()
        settings = {"wal_level": self.wal_level, "port": str(self.port), "listen_addresses": "127.0.0.1",
                    "unix_socket_directories": str(self.directory), "max_wal_senders": "10",
                    "max_replication_slots": "10", "fsync": "off", "synchronous_commit": "off",
                    "full_page_writes": "off", "shared_buffers": "16MB", "max_connections": "40",
                    "wal_sender_timeout": "60s", **self.settings}
        options = " ".join(f"-c {k}={v}" for k, v in settings.items())
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.directory / "log"), "-o", options, "-w",
                  "-t", str(int(self._timeout)), "start", timeout_s=self._timeout + 10)
        self._started = True
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                self.connect().close()
                return
            except (PgConnectionError, PgServerError):
                if time.monotonic() > deadline:
                    raise

    def stop(self, *, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: ``immediate`` is a crash (no shutdown checkpoint, recovery at the next start)."""
        if not self._started:
            return
        self._started = False
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop", timeout_s=60, check=False)

    def restart(self, *, wal_level: str | None = None, mode: str = "fast") -> None:
        self.stop(mode=mode)
        if wal_level is not None:
            self.wal_level = wal_level
        self.start()

    def remove(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.remove()

