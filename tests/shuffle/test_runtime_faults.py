"""Socket faults under a real task end it with a typed error, never a raw OSError, and leak nothing.

A reset or failed write becomes the machine's ``send_failed`` (STREAMING_SHUFFLE_SEND_FAILED, with
the socket's cause) when it loses DATA or a TERMINATION_ACK, and otherwise the closed connection
the protocol already names (CONNECTION_CLOSED_BEFORE_TERMINATION); a writer nobody can reach is
STREAMING_SHUFFLE_WRITER_UNREACHABLE. The peers here are raw sockets that reset on purpose (an
RST: SO_LINGER with a zero timeout).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from test_hostile_peers import DEADLINE_S, KEY, RECORDS, SETTINGS, wait_until

from reference.net.ledger import ResourceLedger
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterTask
from spec.shuffle import coordination
from spec.shuffle import errors
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.codec import encode_frame
from spec.shuffle.framing import FrameDecoder, max_frame_from_reader, max_frame_from_writer
from spec.shuffle.messages import CreditMessage, DataMessage
from spec.shuffle.records import encode_record
from spec.shuffle.settings import ShuffleSettings

TIGHT = ShuffleSettings(network_buffer_size=1024, network_buffer_max_wait_time_ms=5, writer_max_memory=64 * 1024)
"""31 DATA messages of permits: a writer whose reader stops reading blocks soon."""


def reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN, as a crashed host's stack or a middlebox does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def check_released(ledger: ResourceLedger) -> None:
    assert ledger.live_threads() == []
    assert ledger.open_sockets() == []


def started_writer(task: WriterTask, records: Iterator[tuple[int, bytes]], outcome: list[BaseException]
                   ) -> threading.Thread:
    """The task run on its own thread; the error it ends with goes to ``outcome``."""
    def run() -> None:
        try:
            task.run(records)
        except BaseException as error:  # noqa: BLE001 - the test judges it
            outcome.append(error)

    thread = threading.Thread(target=run, name="test-writer")
    thread.start()
    return thread


def test_a_reader_reset_mid_stream_fails_the_writer_with_send_failed() -> None:
    ledger = ResourceLedger()
    task = WriterTask(KEY, 0, 1, TIGHT, StandaloneDirectory(), TaskOptions(ledger=ledger))
    outcome: list[BaseException] = []

    def endless() -> Iterator[tuple[int, bytes]]:
        while True:  # ends when the task fails
            yield 0, b"x" * 200

    thread = started_writer(task, endless(), outcome)
    try:
        reader = socket.create_connection(("127.0.0.1", task.port))
        reader.sendall(encode_frame(CreditMessage(writer_id=0, reader_id=0)))  # bind, then read nothing
        # the kernel's buffers are full: DATA waits in the writer (the permits stop it at 31 KiB)
        wait_until(lambda: sum(s.queued_bytes for s in task.reactor.streams) >= 20 * 1024, "DATA queued")
        reset(reader)
        wait_until(lambda: bool(outcome), "the writer's end")
    finally:
        if thread.is_alive():
            task.fail(errors.TaskAborted("test over"))
        thread.join(30)
    error = outcome[0]
    assert isinstance(error, errors.SendFailed), repr(error)
    assert error.condition == "STREAMING_SHUFFLE_SEND_FAILED"
    assert "reader 0" in str(error) and "the connection failed" in str(error)
    assert "ConnectionResetError" in str(error) or "BrokenPipeError" in str(error)
    check_released(ledger)


def test_a_write_the_kernel_refuses_at_once_fails_the_writer_with_send_failed() -> None:
    """A DATA whose write fails in the call itself (EPIPE: the writer's own side already shut for writing, as after
    a reset it has not yet read) fails the task with the machine's SendFailed; the failed send is never dropped to
    leave the writer waiting on permits that cannot come back."""
    ledger = ResourceLedger()
    task = WriterTask(KEY, 0, 1, TIGHT, StandaloneDirectory(), TaskOptions(ledger=ledger))
    outcome: list[BaseException] = []
    gate = threading.Event()

    def gated() -> Iterator[tuple[int, bytes]]:
        yield 0, b"first"
        gate.wait(DEADLINE_S)
        while True:  # ends when the task fails
            yield 0, b"x" * 200

    thread = started_writer(task, gated(), outcome)
    reader = socket.create_connection(("127.0.0.1", task.port))
    try:
        reader.sendall(encode_frame(CreditMessage(writer_id=0, reader_id=0)))
        decoder = FrameDecoder(max_frame_from_writer(TIGHT))
        reader.settimeout(DEADLINE_S)
        while not any(isinstance(m, DataMessage) for m in decoder.feed(reader.recv(65536))):
            pass  # the first record's DATA arrived: the connection is bound and served
        (stream,) = [s for s in task.reactor.streams if s.bound]
        stream.sock.shutdown(socket.SHUT_WR)  # every later sendmsg on it raises BrokenPipeError
        gate.set()
        wait_until(lambda: bool(outcome), "the writer's end")
    finally:
        gate.set()
        if thread.is_alive():
            task.fail(errors.TaskAborted("test over"))
        thread.join(30)
        reader.close()
    error = outcome[0]
    assert isinstance(error, errors.SendFailed), repr(error)
    assert "reader 0" in str(error) and "BrokenPipeError" in str(error)
    check_released(ledger)


def fake_writer(then: Callable[[socket.socket, bytes], None]) -> tuple[StandaloneDirectory, threading.Thread]:
    """A raw-socket writer 0 registered in a directory: it waits for the reader's first CREDIT, then
    ``then(connection, frame)`` with the frame of one DATA carrying one record."""
    listener = socket.create_server(("127.0.0.1", 0))
    directory = StandaloneDirectory()
    directory.register(KEY, coordination.WriterLocation(0, "fake", "127.0.0.1", listener.getsockname()[1]))
    payload = encode_record(b"only record")
    frame = encode_frame(DataMessage(seq=0, writer_id=0, reader_id=0, checksum=payload_checksum(payload),
                                     payload=payload))

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            decoder = FrameDecoder(max_frame_from_reader())
            while not decoder.feed(conn.recv(1024)):  # the reader's first CREDIT
                pass
            then(conn, frame)

    server = threading.Thread(target=serve, name="test-fake-writer")
    server.start()
    return directory, server


def test_a_writer_reset_after_its_data_fails_the_reader_with_a_typed_error() -> None:
    """Whether the reset meets the reader's read or its credit's write, the error is the protocol's."""
    def data_then_reset(conn: socket.socket, frame: bytes) -> None:
        conn.sendall(frame)
        reset(conn)

    directory, server = fake_writer(data_then_reset)
    ledger = ResourceLedger()
    reader = ReaderTask(KEY, 0, [0], SETTINGS, directory, TaskOptions(ledger=ledger))
    got: list[bytes] = []
    try:
        for record in reader.records():
            got.append(record)
        raise AssertionError("the stream ended although its writer reset the connection")
    except errors.ShuffleError as error:
        assert isinstance(error, (errors.ConnectionClosedBeforeTermination, errors.SendFailed)), repr(error)
        assert "writer 0" in str(error)
    finally:
        server.join(30)
    assert got in ([], [b"only record"])
    check_released(ledger)


def test_a_writer_that_closes_inside_a_frame_fails_the_reader_with_truncated_input() -> None:
    """A clean close (FIN) in the middle of a DATA is a truncated frame, not merely an early close."""
    def half_a_frame_then_close(conn: socket.socket, frame: bytes) -> None:
        conn.sendall(frame[:len(frame) // 2])
        conn.close()

    directory, server = fake_writer(half_a_frame_then_close)
    ledger = ResourceLedger()
    reader = ReaderTask(KEY, 0, [0], SETTINGS, directory, TaskOptions(ledger=ledger))
    try:
        with pytest.raises(errors.TruncatedInput):
            list(reader.records())
    finally:
        server.join(30)
    check_released(ledger)


def test_a_writer_nobody_can_reach_fails_the_reader_with_writer_unreachable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again: connections to it are refused
    directory = StandaloneDirectory()
    directory.register(KEY, coordination.WriterLocation(3, "exec-9", "127.0.0.1", port))
    ledger = ResourceLedger()
    reader = ReaderTask(KEY, 0, [3], SETTINGS, directory, TaskOptions(ledger=ledger, connect_timeout_s=0.2))
    try:
        list(reader.records())
        raise AssertionError("the reader ended without its writer")
    except errors.WriterUnreachable as error:
        assert error.condition == "STREAMING_SHUFFLE_WRITER_UNREACHABLE"
        assert error.writer_id == 3
        assert f"127.0.0.1:{port}" in str(error) and "ConnectionRefusedError" in str(error)
    check_released(ledger)


def test_the_first_error_of_a_task_stands_whatever_follows() -> None:
    """Its first error is the task's root cause; what fails after it is a symptom and must not replace it."""
    ledger = ResourceLedger()
    task = ReaderTask(KEY, 0, [0], SETTINGS, StandaloneDirectory(), TaskOptions(ledger=ledger))
    first, later = errors.TaskAborted("the first failure"), errors.TaskAborted("a symptom of it")
    try:
        task.fail(first)
        task.fail(later)
        assert task.error is first and task.cancel.is_set()
    finally:
        task.shutdown()
    check_released(ledger)


class _BrokenDirectory(StandaloneDirectory):
    """A directory with a bug: the serving thread meets it at its first look for failures of other tasks."""

    def lookup(self, key: coordination.ShuffleKey) -> coordination.Writers:
        raise RuntimeError("a bug in the directory")


def test_an_error_on_the_serving_thread_fails_the_task_instead_of_vanishing() -> None:
    ledger = ResourceLedger()
    task = WriterTask(KEY, 0, 1, SETTINGS, _BrokenDirectory(), TaskOptions(ledger=ledger))
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            task.run(iter(RECORDS))
        except BaseException as error:  # noqa: BLE001 - the test judges it
            outcome.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(DEADLINE_S)
    assert [type(error) for error in outcome] == [RuntimeError]  # not a writer waiting for ever
    check_released(ledger)


class _BrokenForTheStandby(StandaloneDirectory):
    """A directory with a bug that only the standby of a writer owning its input meets (its looks for failures
    of other tasks while the input blocks)."""

    def lookup(self, key: coordination.ShuffleKey) -> coordination.Writers:
        if threading.current_thread().name.startswith("shuffle-writer-standby"):
            raise RuntimeError("a bug in the directory")
        return super().lookup(key)


def test_an_error_on_the_standby_thread_fails_the_task_while_its_input_blocks() -> None:
    ledger = ResourceLedger()
    task = WriterTask(KEY, 0, 1, SETTINGS, _BrokenForTheStandby(), TaskOptions(ledger=ledger, writer_owns_input=True))
    outcome: list[BaseException] = []

    def waits_for_its_task_to_end() -> Iterator[tuple[int, bytes]]:
        yield RECORDS[0]
        task.cancel.wait(DEADLINE_S)  # a source waiting for data until the task ends

    def run() -> None:
        try:
            task.run(waits_for_its_task_to_end())
        except BaseException as error:  # noqa: BLE001 - the test judges it
            outcome.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        runner.join(DEADLINE_S * 2)
        assert [type(error) for error in outcome] == [RuntimeError]  # not a writer waiting for ever
    finally:
        if runner.is_alive():
            task.fail(errors.TaskAborted("test over"))
            runner.join(DEADLINE_S)
    check_released(ledger)
