"""A writer task under the attacks of a stranger: what it holds stays bounded and is released at once.

Each test runs one real writer task on loopback, attacks it with raw sockets, then (where the
writer is meant to survive) lets a real reader task complete the stream, proving the writer still
serves. Resources are counted in ledgers the tasks enter their own sockets and threads in, never
across the process. Waits have generous deadlines that only end a broken run.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from reference.net import ConnectionLimits
from reference.net.ledger import ResourceLedger
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterTask
from spec.shuffle import coordination as co
from spec.shuffle import errors
from spec.shuffle.framing import max_frame_from_reader
from spec.shuffle.settings import ShuffleSettings

KEY = co.ShuffleKey(0, 0)
SETTINGS = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=5)
RECORDS = [(0, b"record %d" % i) for i in range(200)]
DEADLINE_S = 30.0
"""Only to end a broken run; nothing here asserts on time."""
WRITER_OWN_SOCKETS = 3
"""A writer task's sockets besides its connections: the listener and the reactor's wake-up pair."""


class Directory:
    """A unit-test directory for one attempt: writers register, readers look them up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writers: dict[int, co.WriterLocation] = {}
        self._failure = ""

    def register(self, key: co.ShuffleKey, writer: co.WriterLocation) -> None:
        with self._lock:
            self._writers[writer.writer_id] = writer

    def lookup(self, key: co.ShuffleKey) -> co.Writers:
        with self._lock:
            return co.Writers(self._failure, tuple(self._writers.values()))

    def unregister(self, key: co.ShuffleKey, writer_id: int) -> None:
        with self._lock:
            self._writers.pop(writer_id, None)

    def report_failure(self, key: co.ShuffleKey, role: co.Role, task: int, description: str) -> None:
        with self._lock:
            self._failure = self._failure or f"{role.name.lower()} {task} failed: {description}"


@dataclass
class RunningWriter:
    task: WriterTask
    ledger: ResourceLedger
    directory: Directory
    outcome: list[BaseException | None] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.task.port)

    def read_as_reader(self) -> list[bytes]:
        """A real reader task for reader 0 reads the whole stream (its own ledger checked too)."""
        ledger = ResourceLedger()
        reader = ReaderTask(KEY, 0, [0], SETTINGS, self.directory, TaskOptions(ledger=ledger))
        records = list(reader.records())
        assert ledger.open_sockets() == [] and ledger.live_threads() == []
        return records

    def wait_outcome(self) -> BaseException | None:
        wait_until(lambda: bool(self.outcome), "the writer task's end")
        return self.outcome[0]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(0.005)


@contextmanager
def running_writer(limits: ConnectionLimits = ConnectionLimits()) -> Iterator[RunningWriter]:
    """A writer task with ``RECORDS`` for one reader, on its own thread; checked for leaks at the end."""
    ledger = ResourceLedger()
    directory = Directory()
    task = WriterTask(KEY, 0, 1, SETTINGS, directory, TaskOptions(limits=limits, ledger=ledger))
    writer = RunningWriter(task, ledger, directory)

    def run() -> None:
        try:
            task.run(iter(RECORDS))
            writer.outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - the test judges it
            writer.outcome.append(error)

    thread = threading.Thread(target=run, name="test-writer")
    thread.start()
    try:
        yield writer
    finally:
        if thread.is_alive():
            task.fail(errors.TaskAborted("test over"))
        thread.join(DEADLINE_S)
        assert ledger.live_threads() == []
        assert ledger.open_sockets() == []


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_connect_then_close_churn_holds_nothing_once_closed() -> None:
    """300 connect-then-close cycles: each is released as it closes; one I/O thread throughout."""
    with running_writer() as writer:
        for _ in range(300):
            socket.create_connection(writer.address).close()
        wait_until(lambda: writer.ledger.sockets_opened == WRITER_OWN_SOCKETS + 300, "every churned accept")
        wait_until(lambda: len(writer.ledger.open_sockets()) == WRITER_OWN_SOCKETS, "every churned close")
        assert writer.ledger.threads_started == 1
        assert writer.read_as_reader() == [record for _, record in RECORDS]
        assert writer.wait_outcome() is None


def test_idle_connections_beyond_the_pending_cap_evict_the_oldest() -> None:
    """500 idle connections: at most ``max_pending`` are held, the rest are closed oldest first, and
    a real reader arriving afterwards is still served."""
    limits = ConnectionLimits(max_pending=64)
    with running_writer(limits) as writer:
        clients = []
        try:
            for _ in range(500):
                clients.append(socket.create_connection(writer.address))
            for client in clients:
                client.setblocking(False)
            evicted: set[socket.socket] = set()

            def all_accepted() -> bool:
                evicted.update(c for c in clients if c not in evicted and closed_by_peer(c))
                return len(evicted) == 500 - 64

            wait_until(all_accepted, "436 evictions")
            assert evicted == set(clients[:436])
            assert len(writer.ledger.open_sockets()) == WRITER_OWN_SOCKETS + 64
            assert writer.ledger.threads_started == 1
            assert writer.read_as_reader() == [record for _, record in RECORDS]
            assert writer.wait_outcome() is None
        finally:
            for client in clients:
                client.close()


def test_a_connection_that_never_binds_is_closed_at_the_bind_timeout() -> None:
    with running_writer(ConnectionLimits(bind_timeout_s=0.2)) as writer:
        with socket.create_connection(writer.address) as idle:
            idle.settimeout(DEADLINE_S)
            assert idle.recv(1) == b""  # the writer closed it
        wait_until(lambda: len(writer.ledger.open_sockets()) == WRITER_OWN_SOCKETS, "the release")
        assert writer.read_as_reader() == [record for _, record in RECORDS]
        assert writer.wait_outcome() is None


def test_a_huge_frame_header_from_a_stranger_is_refused_before_any_allocation() -> None:
    """A reader only ever sends 20- or 24-byte bodies, so a writer refuses any longer frame on its
    header alone: 256 MiB announced, nothing of it buffered, a typed error, everything released."""
    with running_writer() as writer:
        with socket.create_connection(writer.address) as stranger:
            stranger.sendall(struct.pack(">qbi", 256 * 1024 * 1024, 9, 256 * 1024 * 1024 - 13))
            error = writer.wait_outcome()
    assert isinstance(error, errors.FrameLengthOutOfRange)
    assert error.parameters["maximum"] == max_frame_from_reader() == 37
