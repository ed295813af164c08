"""The driver-side coordinator: writers register their servers, readers find them as they appear.

The interface the tasks depend on is the narrow :class:`WriterDirectory` protocol, so the
directory can later live on the cluster-provider interface instead of this TCP service. The
service also records the first failure of an attempt (any task's root cause, which every other
task then reports instead of its own secondary error) and starts the writers of a new attempt
when the first reader of a run joins (see docs/shuffle-runtime.md).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

from spec.shuffle import coordination as co

REQUEST_TIMEOUT_S = 30.0
"""Longest wait for one coordinator answer before the task fails instead of hanging."""


class WriterDirectory(Protocol):
    """What writer and reader tasks need from the coordinator, and nothing more."""

    def register(self, key: co.ShuffleKey, writer: co.WriterLocation) -> None: ...

    def lookup(self, key: co.ShuffleKey) -> co.Writers: ...

    def unregister(self, key: co.ShuffleKey, writer_id: int) -> None: ...

    def report_failure(self, key: co.ShuffleKey, role: co.Role, task: int, description: str) -> None: ...


Launcher = Callable[[co.ShuffleKey], None]
"""Starts the writers of a new attempt (runs on its own thread in the driver)."""


def failure_text(role: co.Role, task: int, description: str) -> str:
    """How an attempt's first failure reads to every other task (``task`` < 0: the role itself)."""
    who = role.name.lower() if task < 0 else f"{role.name.lower()} {task}"
    return f"{who} failed: {description}"


@dataclass
class _Attempt:
    writers: dict[int, co.WriterLocation] = field(default_factory=dict)
    failure: str = ""
    readers: set[int] = field(default_factory=set)


class Directory:
    """The in-memory directory the service serves; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: dict[co.ShuffleKey, _Attempt] = {}
        self._current: dict[int, int] = {}
        self._launchers: dict[int, Launcher] = {}

    def add_shuffle(self, shuffle_id: int, launcher: Launcher) -> None:
        with self._lock:
            self._launchers[shuffle_id] = launcher

    def remove_shuffle(self, shuffle_id: int) -> None:
        with self._lock:
            self._launchers.pop(shuffle_id, None)
            self._current.pop(shuffle_id, None)
            for key in [k for k in self._attempts if k.shuffle_id == shuffle_id]:
                del self._attempts[key]

    def _attempt(self, key: co.ShuffleKey) -> _Attempt:
        return self._attempts.setdefault(key, _Attempt())

    def register(self, key: co.ShuffleKey, writer: co.WriterLocation) -> None:
        with self._lock:
            self._attempt(key).writers[writer.writer_id] = writer

    def lookup(self, key: co.ShuffleKey) -> co.Writers:
        with self._lock:
            attempt = self._attempt(key)
            return co.Writers(attempt.failure, tuple(sorted(attempt.writers.values(), key=lambda w: w.writer_id)))

    def unregister(self, key: co.ShuffleKey, writer_id: int) -> None:
        with self._lock:
            self._attempt(key).writers.pop(writer_id, None)

    def report_failure(self, key: co.ShuffleKey, role: co.Role, task: int, description: str) -> None:
        """Keep the first failure only: later ones are usually consequences of it."""
        with self._lock:
            attempt = self._attempt(key)
            if not attempt.failure:
                attempt.failure = failure_text(role, task, description)

    def failure(self, key: co.ShuffleKey) -> str:
        with self._lock:
            return self._attempt(key).failure

    def join(self, shuffle_id: int, reader_id: int) -> int:
        """The attempt a starting reader belongs to; a reader seen twice starts a new run."""
        with self._lock:
            launcher = self._launchers.get(shuffle_id)
            if launcher is None:
                raise co.RemoteError("UNKNOWN_SHUFFLE", f"shuffle {shuffle_id} is not open in this driver")
            current = self._current.get(shuffle_id)
            if current is not None and reader_id not in self._attempt(co.ShuffleKey(shuffle_id, current)).readers:
                self._attempt(co.ShuffleKey(shuffle_id, current)).readers.add(reader_id)
                return current
            attempt = 0 if current is None else current + 1
            self._current[shuffle_id] = attempt
            key = co.ShuffleKey(shuffle_id, attempt)
            self._attempt(key).readers.add(reader_id)
        threading.Thread(target=launcher, args=(key,), name=f"shuffle-launch-{shuffle_id}-{attempt}",
                         daemon=True).start()
        return attempt

    def handle(self, request: co.Request) -> co.Response:
        """Answer one decoded request."""
        try:
            if isinstance(request, co.Register):
                self.register(request.key, request.writer)
            elif isinstance(request, co.Lookup):
                return self.lookup(request.key)
            elif isinstance(request, co.Unregister):
                self.unregister(request.key, request.writer_id)
            elif isinstance(request, co.ReportFailure):
                self.report_failure(request.key, request.role, request.task, request.description)
            else:
                return co.Joined(self.join(request.shuffle_id, request.reader_id))
        except co.RemoteError as error:
            return co.Error(error.remote_condition, error.message)
        return co.Ok()


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            if chunks:
                raise co.MalformedMessage(f"connection closed inside a message ({len(chunks)} of {n} bytes)")
            return None
        chunks += chunk
    return bytes(chunks)


def read_message(sock: socket.socket) -> co.CoordinatorMessage | None:
    """One length-prefixed message, or None when the peer closed between messages."""
    prefix = _read_exactly(sock, 4)
    if prefix is None:
        return None
    body = _read_exactly(sock, co.check_length(prefix))
    if body is None:
        raise co.MalformedMessage("connection closed after a length prefix")
    return co.decode(body)


class CoordinatorServer:
    """The directory served over TCP; one thread per client connection, all closed by ``stop``."""

    def __init__(self, directory: Directory, host: str = "127.0.0.1", port: int = 0) -> None:
        self.directory = directory
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(0.1)
        self.host = host
        self.port: int = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._clients: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"coordinator-{self.port}", daemon=True)
        self._acceptor.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            thread = threading.Thread(target=self._serve, args=(client,), name=f"coordinator-client-{self.port}",
                                      daemon=True)
            with self._lock:
                if self._stopping.is_set():
                    client.close()
                    return
                self._clients.add(client)
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        try:
            while True:
                try:
                    request = read_message(client)
                except co.CoordinationError as error:
                    client.sendall(co.encode(co.Error(error.condition, error.message)))
                    return
                if request is None:
                    return
                if isinstance(request, (co.Ok, co.Writers, co.Joined, co.Error)):
                    response: co.Response = co.Error("STREAMING_SHUFFLE_COORDINATION_MALFORMED",
                                                     f"{type(request).__name__} is not a request")
                else:
                    response = self.directory.handle(request)
                client.sendall(co.encode(response))
        except OSError:
            return
        finally:
            with self._lock:
                self._clients.discard(client)
            client.close()

    def stop(self) -> None:
        """Stop accepting, close every client connection and wait for the threads."""
        self._stopping.set()
        self._listener.close()
        with self._lock:
            for client in self._clients:
                try:
                    client.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            threads = list(self._threads)
        self._acceptor.join(5)
        for thread in threads:
            thread.join(5)


class CoordinatorClient:
    """A :class:`WriterDirectory` over one TCP connection to the coordinator; thread-safe."""

    def __init__(self, host: str, port: int, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._lock = threading.Lock()

    def _call(self, request: co.Request) -> co.Response:
        with self._lock:
            self._sock.sendall(co.encode(request))
            response = read_message(self._sock)
        if response is None:
            raise co.RemoteError("STREAMING_SHUFFLE_COORDINATION_CLOSED", "the coordinator closed the connection")
        if isinstance(response, co.Error):
            raise co.RemoteError(response.condition, response.message)
        if not isinstance(response, (co.Ok, co.Writers, co.Joined)):
            raise co.MalformedMessage(f"{type(response).__name__} is not a response")
        return response

    def register(self, key: co.ShuffleKey, writer: co.WriterLocation) -> None:
        self._call(co.Register(key, writer))

    def lookup(self, key: co.ShuffleKey) -> co.Writers:
        response = self._call(co.Lookup(key))
        if not isinstance(response, co.Writers):
            raise co.MalformedMessage(f"LOOKUP answered with {type(response).__name__}")
        return response

    def unregister(self, key: co.ShuffleKey, writer_id: int) -> None:
        self._call(co.Unregister(key, writer_id))

    def report_failure(self, key: co.ShuffleKey, role: co.Role, task: int, description: str) -> None:
        self._call(co.ReportFailure(key, role, task, description))

    def join(self, shuffle_id: int, reader_id: int) -> int:
        response = self._call(co.Join(shuffle_id, reader_id))
        if not isinstance(response, co.Joined):
            raise co.MalformedMessage(f"JOIN answered with {type(response).__name__}")
        return response.attempt

    def close(self) -> None:
        self._sock.close()
