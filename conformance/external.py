"""Reaching an implementation under test from outside: ``tcp://HOST:PORT`` and ``exec:CMD``.

Shared by the live suites, and deliberately protocol-free. The conventions are the ones other
implementations already know from the Arrow integration tests and quic-interop-runner:

- ``exec:CMD`` -- the runner starts CMD (split like a shell would, no shell involved) once per case,
  with the case's parameters in environment variables. A listening implementation prints
  ``LISTENING <port>`` as its first stdout line; a connecting one finds the runner's address in
  ``CONFORMANCE_PEER`` (``host:port``). Every further stdout line is a report for the runner; logs
  belong on stderr. Started with ``CONFORMANCE_ROLE=capabilities``, CMD prints one line
  ``CAPABILITIES <name> ...`` and exits: what it declares there is all the runner assumes.
- ``tcp://HOST:PORT`` -- an implementation that is already listening; the runner only connects.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import threading
import time
from typing import IO, Callable, Final, Mapping

PEER_VARIABLE: Final = "CONFORMANCE_PEER"
ROLE_VARIABLE: Final = "CONFORMANCE_ROLE"
CAPABILITIES_ROLE: Final = "capabilities"
STOP_GRACE_S: Final = 5.0


class LaunchError(RuntimeError):
    """The implementation did not start as the contract requires (no handshake line, bad line)."""


def parse_tcp(spec: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` -> (HOST, PORT); IPv6 hosts in brackets."""
    if not spec.startswith("tcp://"):
        raise ValueError(f"not a tcp:// target: {spec!r}")
    host, sep, port = spec[len("tcp://"):].rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected tcp://HOST:PORT, got {spec!r}")
    return host.strip("[]"), int(port)


class ExecProcess:
    """One started implementation: its stdout lines (collected by a thread) and its stderr log."""

    def __init__(self, command: str, env: Mapping[str, str], interactive: bool = False) -> None:
        """``interactive`` keeps stdin open for :meth:`send_line` (otherwise it is /dev/null)."""
        self.command = command
        self._log: IO[str] = tempfile.TemporaryFile("w+", prefix="conformance-exec-", suffix=".log")
        self._lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        try:
            self._process = subprocess.Popen(
                shlex.split(command), stdin=subprocess.PIPE if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=self._log,
                text=True, bufsize=1, env={**os.environ, **env},
            )
        except OSError as exc:
            self._log.close()
            raise LaunchError(f"cannot start {command!r}: {exc}") from exc
        self._pump = threading.Thread(target=self._collect, name="exec-stdout", daemon=True)
        self._pump.start()

    def _collect(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with self._changed:
                self._lines.append(line.rstrip("\r\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def line(self, index: int, timeout: float) -> str | None:
        """Stdout line ``index`` (0-based), or None if stdout ended or ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._lines) <= index:
                left = deadline - time.monotonic()
                if self._ended or left <= 0:
                    return None
                self._changed.wait(left)
            return self._lines[index]

    def send_line(self, text: str) -> bool:
        """Write one line to the program's stdin; False when it no longer reads it."""
        stdin = self._process.stdin
        assert stdin is not None, "started without interactive=True"
        try:
            stdin.write(text + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def lines(self) -> list[str]:
        with self._changed:
            return list(self._lines)

    def wait_line(self, predicate: Callable[[str], bool], timeout: float) -> str | None:
        """The first stdout line (seen or still to come) matching ``predicate``; None at the deadline or end."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for text in self._lines:
                    if predicate(text):
                        return text
                left = deadline - time.monotonic()
                if self._ended or left <= 0:
                    return None
                self._changed.wait(left)

    def wait_listening(self, timeout: float) -> int:
        """The port from the ``LISTENING <port>`` handshake, which must be the first stdout line."""
        first = self.line(0, timeout)
        words = (first or "").split()
        if len(words) != 2 or words[0] != "LISTENING" or not words[1].isdigit():
            shown = "nothing" if first is None else repr(first)
            raise LaunchError(f"{self.command!r} printed {shown} instead of 'LISTENING <port>' as its "
                              f"first line\n{self.stderr_tail()}")
        return int(words[1])

    def stderr_tail(self, limit: int = 3000) -> str:
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-limit:]

    def stop(self) -> None:
        """Terminate the process (this one only, by its id), then kill it if it ignores that."""
        if self._process.stdin is not None:
            try:
                self._process.stdin.close()
            except OSError:
                pass  # the program already closed its end
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(STOP_GRACE_S)
        self._pump.join(STOP_GRACE_S)
        self._log.close()


def declared_capabilities(command: str, timeout: float) -> frozenset[str]:
    """Run CMD with ``CONFORMANCE_ROLE=capabilities`` and read its ``CAPABILITIES ...`` line."""
    process = ExecProcess(command, {ROLE_VARIABLE: CAPABILITIES_ROLE})
    try:
        first = process.line(0, timeout)
        words = (first or "").split()
        if not words or words[0] != "CAPABILITIES":
            raise LaunchError(f"{command!r} answered {first!r} to {ROLE_VARIABLE}={CAPABILITIES_ROLE}; "
                              f"expected 'CAPABILITIES <name> ...'\n{process.stderr_tail()}")
        return frozenset(words[1:])
    finally:
        process.stop()

