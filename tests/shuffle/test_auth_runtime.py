"""Shuffle connections under Spark's AuthEngine: correct results with both ciphers, strangers never
served, records never in clear on the wire, and a connection cut inside its handshake retried.

Each test runs real tasks on loopback; the wire is observed through a forwarding proxy the test
owns (it listens on 127.0.0.1 only). Waits have deadlines that only end a broken run.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from test_hostile_peers import DEADLINE_S, KEY, RECORDS, SETTINGS, running_writer

from reference.net import ConnectionLimits
from reference.net.ledger import ResourceLedger
from reference.shuffle.local import run_local_shuffle
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions
from spec.auth import AuthConfig, CipherName, ClientHandshake, Established
from spec.auth import errors
from spec.shuffle import coordination
from spec.shuffle import errors as shuffle_errors
from spec.shuffle.codec import encode_frame
from spec.shuffle.messages import CreditMessage

SECRET = AuthConfig(b"the application's secret", "app-20261125", CipherName.CTR, 1)
CONFIGS = [SECRET, AuthConfig(b"the application's secret", "app-20261125", CipherName.GCM, 2)]


@pytest.mark.parametrize("auth", CONFIGS, ids=lambda a: f"{a.cipher.name}-v{a.engine_version}")
def test_an_authenticated_encrypted_shuffle_delivers_every_record_to_its_reader(auth: AuthConfig) -> None:
    inputs = [[(i % 3, b"w%d-%05d" % (w, i)) for i in range(3000)] for w in range(2)]
    outputs, _ = run_local_shuffle(inputs, 3, SETTINGS, TaskOptions(auth=auth), timeout_s=DEADLINE_S)
    for reader, records in enumerate(outputs):
        assert sorted(records) == sorted(r for rows in inputs for k, r in rows if k == reader)


class Proxy:
    """Forwards loopback connections to ``target``, keeping every byte; cuts the first ``cut`` at once."""

    def __init__(self, target: tuple[str, int], cut: int = 0) -> None:
        self.target = target
        self.cut = cut
        self.wire = bytearray()
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._spawn(self._accept)

    @property
    def port(self) -> int:
        port: int = self._listener.getsockname()[1]
        return port

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted <= self.cut:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    self.wire += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the pumping threads
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(DEADLINE_S)


@contextmanager
def proxied_reader(auth: AuthConfig | None, cut: int = 0) -> Iterator[tuple[list[bytes], Proxy]]:
    """Reader 0 reads a real writer's stream through a proxy; yields its records and the proxy."""
    with running_writer(auth=auth) as writer:
        writer.directory.registered.wait(DEADLINE_S)
        proxy = Proxy(writer.address, cut)
        try:
            directory = StandaloneDirectory((coordination.WriterLocation(0, "driver", "127.0.0.1", proxy.port),))
            ledger = ResourceLedger()
            reader = ReaderTask(KEY, 0, [0], SETTINGS, directory, TaskOptions(ledger=ledger, auth=auth))
            records = list(reader.records())
            assert ledger.open_sockets() == []
            assert writer.wait_outcome() is None
            yield records, proxy
        finally:
            proxy.close()


@pytest.mark.parametrize("auth", CONFIGS, ids=lambda a: f"{a.cipher.name}-v{a.engine_version}")
def test_records_never_cross_the_loopback_wire_in_clear(auth: AuthConfig) -> None:
    with proxied_reader(auth) as (records, proxy):
        assert records == [record for _, record in RECORDS]
        assert not any(record in proxy.wire for record in records)
        assert encode_frame(CreditMessage(writer_id=0, reader_id=0, num_messages=1)) not in proxy.wire


def test_without_a_secret_the_same_capture_shows_the_records() -> None:
    """The capture above can fail: on a plaintext connection it sees every record."""
    with proxied_reader(None) as (records, proxy):
        assert all(record in proxy.wire for record in records)


def test_a_reader_cut_off_inside_its_handshake_connects_again() -> None:
    with proxied_reader(SECRET, cut=2) as (records, proxy):
        assert records == [record for _, record in RECORDS]
        assert proxy.accepted == 3


def test_a_stranger_sending_a_credit_in_clear_gets_no_data_and_the_real_reader_is_served() -> None:
    with running_writer(auth=SECRET) as writer:
        stranger = socket.create_connection(writer.address)
        stranger.sendall(encode_frame(CreditMessage(writer_id=0, reader_id=0, num_messages=1)))
        stranger.settimeout(DEADLINE_S)
        received = bytearray()
        while chunk := stranger.recv(4096):
            received += chunk
        assert received == b""
        stranger.close()
        ledger = ResourceLedger()
        reader = ReaderTask(KEY, 0, [0], SETTINGS, writer.directory, TaskOptions(ledger=ledger, auth=SECRET))
        assert list(reader.records()) == [record for _, record in RECORDS]
        assert writer.wait_outcome() is None


def test_a_reader_with_another_secret_fails_typed_and_the_writer_keeps_waiting_for_the_real_one() -> None:
    with running_writer(auth=SECRET) as writer:
        wrong = AuthConfig(b"a guess", SECRET.app_id)
        writer.directory.registered.wait(DEADLINE_S)
        own = StandaloneDirectory(writer.directory.writers)  # its failure report must not stop the writer
        impostor = ReaderTask(KEY, 0, [0], SETTINGS, own, TaskOptions(auth=wrong))
        with pytest.raises(errors.HandshakeRejected):
            list(impostor.records())
        reader = ReaderTask(KEY, 0, [0], SETTINGS, writer.directory, TaskOptions(auth=SECRET))
        assert list(reader.records()) == [record for _, record in RECORDS]
        assert writer.wait_outcome() is None


def _handshaken(address: tuple[str, int], auth: AuthConfig) -> socket.socket:
    """A client that completes the handshake with the writer's secret, then asks for nothing."""
    sock = socket.create_connection(address)
    sock.settimeout(DEADLINE_S)
    handshake = ClientHandshake(auth)
    sock.sendall(handshake.challenge())
    outcome = None
    while outcome is None:
        data = sock.recv(65536)
        assert data, "the writer closed the connection inside the handshake"
        outcome = handshake.receive(data)
    assert isinstance(outcome, Established)
    return sock


def test_authenticated_connections_that_never_send_a_credit_are_closed_at_the_bind_timeout() -> None:
    """Issue #38.4: the handshake alone does not bind, so 100 peers that hold the secret but never ask
    for anything stay strangers, under the pending cap and the bind timeout; the real reader is served."""
    with running_writer(ConnectionLimits(max_pending=128, bind_timeout_s=0.5), auth=SECRET) as writer:
        writer.directory.registered.wait(DEADLINE_S)
        idle = [_handshaken(writer.address, SECRET) for _ in range(100)]
        try:
            for sock in idle:
                assert sock.recv(1) == b""  # the writer closed it (DEADLINE_S only ends a broken run)
        finally:
            for sock in idle:
                sock.close()
        reader = ReaderTask(KEY, 0, [0], SETTINGS, writer.directory, TaskOptions(auth=SECRET))
        assert list(reader.records()) == [record for _, record in RECORDS]
        assert writer.wait_outcome() is None


def test_authenticated_connections_beyond_the_pending_cap_evict_the_oldest() -> None:
    with running_writer(ConnectionLimits(max_pending=4), auth=SECRET) as writer:
        writer.directory.registered.wait(DEADLINE_S)
        idle = [_handshaken(writer.address, SECRET) for _ in range(12)]
        try:
            for sock in idle[:8]:
                assert sock.recv(1) == b""  # evicted by the newer ones
        finally:
            for sock in idle:
                sock.close()


@pytest.mark.parametrize("writer_cipher, reader_cipher", [(CipherName.GCM, CipherName.CTR),
                                                         (CipherName.CTR, CipherName.GCM)], ids=["gcm-ctr", "ctr-gcm"])
def test_a_writer_and_a_reader_with_different_ciphers_fail_typed_instead_of_hanging(
        writer_cipher: CipherName, reader_cipher: CipherName) -> None:
    """Both hold the secret, configured with different ciphers: the handshake completes and the reader's
    CREDIT never decrypts. A GCM writer waits for the rest of a unit that never comes, so it never binds the
    connection and closes it at the bind timeout (Spark's spark.network.timeout by default); a CTR writer
    reads garbage and fails with the codec's error. Either way the reader fails with a typed error instead
    of waiting for ever (issue #38 saw a GCM writer and a CTR reader both wait more than 200 s)."""
    with running_writer(ConnectionLimits(bind_timeout_s=0.5),
                        auth=AuthConfig(SECRET.secret, SECRET.app_id, writer_cipher, 1)) as writer:
        writer.directory.registered.wait(DEADLINE_S)
        own = StandaloneDirectory(writer.directory.writers)  # its failure report must not stop the writer
        reader = ReaderTask(KEY, 0, [0], SETTINGS, own,
                            TaskOptions(auth=AuthConfig(SECRET.secret, SECRET.app_id, reader_cipher, 1)))
        outcome = _read_to_the_end(reader)
        assert len(outcome) == 1 and isinstance(outcome[0], shuffle_errors.ConnectionClosedBeforeTermination)


def test_a_writer_that_never_answers_the_handshake_is_unreachable_not_a_hang() -> None:
    """The reader's side of 'a deadline until it is useful': a listener that accepts and says nothing is
    dropped at the bind timeout and retried as a failed connect, so the reader fails WriterUnreachable."""
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    directory = StandaloneDirectory((coordination.WriterLocation(0, "exec", "127.0.0.1", silent.getsockname()[1]),))
    reader = ReaderTask(KEY, 0, [0], SETTINGS, directory, TaskOptions(
        auth=SECRET, limits=ConnectionLimits(bind_timeout_s=0.2), connect_timeout_s=0.5))
    try:
        outcome = _read_to_the_end(reader)
        assert len(outcome) == 1 and isinstance(outcome[0], shuffle_errors.WriterUnreachable), outcome
        assert "did not identify itself in time" in str(outcome[0])
    finally:
        silent.close()
        for sock in held:
            sock.close()


def _read_to_the_end(reader: ReaderTask) -> list[BaseException]:
    """Read every record on a thread of its own (a broken runtime would wait for ever there); the error it
    ended with, if any. Fails when the reader is still waiting after DEADLINE_S."""
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            list(reader.records())
        except BaseException as error:  # noqa: BLE001 - the test judges it
            outcome.append(error)

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    reading.join(DEADLINE_S)
    assert not reading.is_alive(), f"the reader still waits after {DEADLINE_S} s"
    return outcome
