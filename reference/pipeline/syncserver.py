"""The driver's sync server: a ``python -m reference.sync serve`` subprocess it can kill and restart.

A separate process, so that ``--chaos`` kills it for real (SIGKILL: no flush, memory lost) and
the restarted server must recover from the Delta table's commit metadata alone.  Each start
takes a fresh port; the driver publishes the new location through the cluster provider.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from spec.errors import RuntimeFailure


REPO_ROOT = Path(__file__).resolve().parents[2]


def pythonpath() -> str:
    """This checkout, then the caller's PYTHONPATH: what every Python process the pipeline starts
    (the sync server, Spark's Python workers) needs to import ``reference``."""
    return os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)


class SyncServerFailed(RuntimeFailure):
    """The sync server did not start (or died) — its log says why."""

    condition = "PIPELINE_SYNC_SERVER_FAILED"


@dataclass(frozen=True)
class FlushSettings:
    """Seafowl's settings as the pipeline runs them: a short lag, so changes become durable fast."""

    max_replication_lag_s: float = 0.2
    flush_task_interval_s: float = 0.1
    max_syncs_per_url: int = 100
    max_message_bytes: int | None = None
    """The largest message the server reads (None: its default, 128 MiB)."""

    def args(self) -> list[str]:
        limit = [] if self.max_message_bytes is None else ["--max-message-bytes", str(self.max_message_bytes)]
        return ["--max-replication-lag-s", str(self.max_replication_lag_s),
                "--flush-task-interval-s", str(self.flush_task_interval_s),
                "--max-syncs-per-url", str(self.max_syncs_per_url), *limit]


class SyncServerProcess:
    """Starts, kills and restarts one sync server on ``host``; logs go to ``log_path``.

    The driver's chaos thread restarts it while the driver may be stopping it, so the three
    operations take one lock and nothing starts once ``stop`` ran: a restart racing the end of
    a run would otherwise leave a server nobody stops.  Each server leads its own process group,
    which ``kill`` and ``stop`` signal whole.
    """

    def __init__(self, store: str, log_path: Path, settings: FlushSettings = FlushSettings(),
                 start_timeout_s: float = 60.0, host: str = "127.0.0.1") -> None:
        self.store, self.log_path, self.settings, self.host = store, log_path, settings, host
        self.start_timeout_s = start_timeout_s
        self.generation = 0
        self.location = ""
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> str:
        """Start a server and return its ``grpc://`` location once it listens."""
        with self._lock:
            if self._stopped:
                raise SyncServerFailed("sync server not started: the run is stopping")
            if self._log is None:
                self._log = open(self.log_path, "a", encoding="utf-8")
            cmd = [sys.executable, "-m", "reference.sync", "serve", "--store", self.store, "--host", self.host,
                   "--port", "0", *self.settings.args()]
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath()}
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
                                          start_new_session=True)
            port = self._await_port(self._proc)
            self.generation += 1
            self.location = f"grpc://{self.host}:{port}"
            return self.location

    def _await_port(self, proc: subprocess.Popen[str]) -> int:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if sel.select(self.start_timeout_s):
                line = proc.stdout.readline()
                if line.startswith("LISTENING "):
                    return int(line.split()[1])
        self._end(signal.SIGKILL)
        raise SyncServerFailed(f"sync server did not print LISTENING within {self.start_timeout_s}s; "
                               f"see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL, as a crash: whatever the server held in memory is gone."""
        with self._lock:
            self._end(signal.SIGKILL)

    def stop(self) -> None:
        """Terminate the server (SIGKILL if it does not end within 10 s), close its log, start none again."""
        with self._lock:
            self._stopped = True
            self._end(signal.SIGTERM)
            if self._log is not None:
                self._log.close()
                self._log = None

    def _end(self, signum: signal.Signals) -> None:
        """Signal the current server's process group, reap the server and close its pipe (lock held)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
