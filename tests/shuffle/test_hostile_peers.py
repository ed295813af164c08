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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from reference.net import ConnectionLimits
from reference.net.ledger import ResourceLedger
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterTask
from spec.auth import AuthConfig
from spec.shuffle import coordination
from spec.shuffle import errors
from spec.shuffle.codec import encode_frame
from spec.shuffle.framing import max_frame_from_reader
from spec.shuffle.messages import CreditMessage, DataMessage
from spec.shuffle.settings import ShuffleSettings

KEY = coordination.ShuffleKey(0, 0)
SETTINGS = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=5)
RECORDS = [(0, b"record %d" % i) for i in range(200)]
DEADLINE_S = 30.0
"""Only to end a broken run; nothing here asserts on time."""
WRITER_OWN_SOCKETS = 3
"""A writer task's sockets besides its connections: the listener and the reactor's wake-up pair."""


@dataclass
class RunningWriter:
    task: WriterTask
    ledger: ResourceLedger
    directory: StandaloneDirectory
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


def endless() -> Iterator[tuple[int, bytes]]:
    """Records for reader 0 until the writer fails (it stops asking), or the deadline ends a broken run."""
    deadline = time.monotonic() + DEADLINE_S
    i = 0
    while time.monotonic() < deadline:
        yield 0, b"endless %d" % i
        i += 1
        time.sleep(0.001)


@contextmanager
def running_writer(limits: ConnectionLimits = ConnectionLimits(), records: Iterable[tuple[int, bytes]] = RECORDS,
                   auth: AuthConfig | None = None) -> Iterator[RunningWriter]:
    """A writer task with ``records`` for one reader, on its own thread; checked for leaks at the end."""
    ledger = ResourceLedger()
    directory = StandaloneDirectory()
    task = WriterTask(KEY, 0, 1, SETTINGS, directory, TaskOptions(limits=limits, ledger=ledger, auth=auth))
    writer = RunningWriter(task, ledger, directory)

    def run() -> None:
        try:
            task.run(iter(records))
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
            # a client sees EOF as the writer closes, a moment before the writer's ledger notes it
            wait_until(lambda: len(writer.ledger.open_sockets()) == WRITER_OWN_SOCKETS + 64, "64 held")
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


def test_a_reader_that_bound_outlives_the_strangers_bind_deadline() -> None:
    """Its CREDIT identifies a reader: a consumer slower than the bind deadline is still served in full."""
    many = [(0, b"record %06d" % i) for i in range(20_000)]  # more than the socket buffers hold
    with running_writer(ConnectionLimits(bind_timeout_s=0.2), many) as writer:
        reader = ReaderTask(KEY, 0, [0], SETTINGS, writer.directory, TaskOptions())
        records = reader.records()
        received = [next(records)]
        time.sleep(1.0)  # five bind deadlines with the connection bound, the writer waiting to write
        received += list(records)
        assert received == [record for _, record in many]
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


# -- identities: a reader id is bound once, a connection carries one pair -------------------------

def _credit(reader_id: int = 0, writer_id: int = 0) -> bytes:
    return encode_frame(CreditMessage(writer_id=writer_id, reader_id=reader_id, num_messages=1))


def _failing_reader(writer: RunningWriter) -> BaseException:
    """Reader 0's real task, which must fail (not hang) with the writer's root cause."""
    reader = ReaderTask(KEY, 0, [0], SETTINGS, writer.directory, TaskOptions())
    with pytest.raises(BaseException) as failed:
        list(reader.records())
    return failed.value


def test_a_second_credit_for_a_bound_reader_fails_the_writer_and_the_impostor_gets_nothing_more() -> None:
    """The real reader binds first; an impostor's CREDIT for the same reader id is READER_ALREADY_BOUND,
    and the real reader fails loudly naming it instead of hanging."""
    with running_writer(records=endless()) as writer:
        reader_error: list[BaseException] = []
        reader = ReaderTask(KEY, 0, [0], SETTINGS, writer.directory, TaskOptions())
        stream = reader.records()
        next(stream)  # bound, and data is flowing
        with socket.create_connection(writer.address) as impostor:
            impostor.sendall(_credit())
            error = writer.wait_outcome()
            impostor.settimeout(DEADLINE_S)
            assert impostor.recv(1) == b""  # closed without a byte of the stream
            try:
                list(stream)
            except BaseException as caught:  # noqa: BLE001 - judged below
                reader_error.append(caught)
    assert isinstance(error, errors.ReaderAlreadyBound)
    assert error.parameters == {"writerId": 0, "readerId": 0}
    assert reader_error and errors.ReaderAlreadyBound.condition in str(reader_error[0])


def test_an_impostor_that_binds_first_is_found_out_when_the_real_reader_arrives() -> None:
    with running_writer(records=endless()) as writer:
        with socket.create_connection(writer.address) as impostor:
            impostor.sendall(_credit())
            wait_until(lambda: writer.task.machine.channels[0].bound, "the impostor's bind")
            reader_error = _failing_reader(writer)
            error = writer.wait_outcome()
    assert isinstance(error, errors.ReaderAlreadyBound)
    assert errors.ReaderAlreadyBound.condition in str(reader_error)


def test_a_credit_naming_another_writer_on_a_bound_connection_is_a_mismatch() -> None:
    """One connection carries one (writer, reader) pair: it cannot name another writer."""
    with running_writer(records=endless()) as writer:
        with socket.create_connection(writer.address) as peer:
            peer.sendall(_credit(reader_id=0))
            wait_until(lambda: writer.task.machine.channels[0].bound, "the bind")
            peer.sendall(_credit(reader_id=0, writer_id=5))
            error = writer.wait_outcome()
    assert isinstance(error, errors.MismatchedChannelIds)


def test_data_naming_another_pair_fails_the_reader() -> None:
    """A writer's connection carries one partition id, the one its first DATA names (here 1, in a later
    job than the directory id 0): a DATA naming partition 2 after it is refused before its records are
    delivered."""
    directory = StandaloneDirectory()
    with socket.create_server(("127.0.0.1", 0)) as server:
        directory.register(KEY, coordination.WriterLocation(0, "fake", "127.0.0.1", server.getsockname()[1]))
        ledger = ResourceLedger()
        reader = ReaderTask(KEY, 0, [0], SETTINGS, directory, TaskOptions(ledger=ledger))
        first = DataMessage(seq=0, writer_id=1, reader_id=0, checksum=0, payload=b"")
        stray = DataMessage(seq=1, writer_id=2, reader_id=0, checksum=0, payload=b"")
        failure: list[BaseException] = []

        def fake_writer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(64)  # the reader's first CREDIT
                conn.sendall(encode_frame(first) + encode_frame(stray))
                conn.settimeout(DEADLINE_S)
                while conn.recv(4096):
                    pass

        thread = threading.Thread(target=fake_writer)
        thread.start()
        try:
            list(reader.records())
        except BaseException as error:  # noqa: BLE001 - judged below
            failure.append(error)
        thread.join(DEADLINE_S)
    assert failure and isinstance(failure[0], errors.MismatchedChannelIds)
    assert failure[0].parameters["writerId"] == 2 and failure[0].parameters["expectedWriterId"] == 1
    assert ledger.open_sockets() == [] and ledger.live_threads() == []
