"""``python -m conformance.targets.reference_shuffle``: this project's shuffle as an ``exec:`` implementation.

The ``reference`` target of the shuffle suite is exactly ``exec:`` with this program, so the generic
contract (``docs/conformance.md``) is exercised on every run: it reads ``CONFORMANCE_ROLE`` and the
workload named by ``CONFORMANCE_WORKLOAD``; as a writer it listens on 127.0.0.1, prints
``LISTENING <port>``, writes the workload's records and finishes; as a reader it connects to
``CONFORMANCE_PEER``. It reports ``COMPLETED`` or ``ERROR <CONDITION> <message>`` on stdout and exits.

Every protocol decision is the spec machines' (:class:`~spec.shuffle.writer.WriterMachine`,
:class:`~spec.shuffle.reader.ReaderMachine`); this module only moves bytes between them and sockets,
on one thread with ``select``, waking at the machines' deadlines.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import time
from typing import Any, Final

from conformance.shuffle_targets import ACK_TIMEOUT_KEY, CASE_VARIABLE, WORKLOAD_VARIABLE
from conformance.targets.external import CAPABILITIES_ROLE, PEER_VARIABLE, ROLE_VARIABLE
from spec.shuffle.codec import encode_frame
from spec.shuffle.errors import CodecError, ShuffleError
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Completed, Deliver, Failed, Step
from spec.shuffle.writer import WriterMachine

CAPABILITIES: Final = "CAPABILITIES writer reader workload reports"
RECV_CHUNK: Final = 65536
IDLE_WAKE_S: Final = 1.0


def report(line: str) -> None:
    print(line, flush=True)


def report_failure(error: ShuffleError) -> None:
    report(f"ERROR {error.condition} {error.message}".replace("\n", " "))


class Endpoint:
    """Sockets keyed by connection id, each with its frame decoder; sends are blocking writes."""

    def __init__(self) -> None:
        self.socks: dict[int, socket.socket] = {}
        self.decoders: dict[int, FrameDecoder] = {}
        self.outcome: ShuffleError | Completed | None = None

    def add(self, sock: socket.socket) -> int:
        key = sock.fileno()
        self.socks[key], self.decoders[key] = sock, FrameDecoder()
        return key

    def drop(self, key: int) -> None:
        if key in self.socks:
            self.socks.pop(key).close()
            del self.decoders[key]

    def send(self, key: int, frame: bytes) -> bool:
        """Write a whole frame; False when the connection is gone (then it is dropped)."""
        try:
            self.socks[key].sendall(frame)
            return True
        except (KeyError, OSError):
            self.drop(key)
            return False

    def wait(self, extra: list[socket.socket], deadline: float | None) -> list[socket.socket]:
        timeout = IDLE_WAKE_S if deadline is None else max(0.0, min(IDLE_WAKE_S, deadline - time.monotonic()))
        readable, _, _ = select.select([*self.socks.values(), *extra], [], [], timeout)
        return readable

    def note(self, step: Step) -> None:
        for event in step.events:
            if isinstance(event, Failed):
                self.outcome = event.error
            elif isinstance(event, Completed):
                self.outcome = event

    def close(self) -> None:
        for key in list(self.socks):
            self.drop(key)


def run_writer(workload: dict[str, Any], settings: ShuffleSettings) -> None:
    num_readers = int(workload["num_readers"])
    ack_timeout = int(workload.get("settings", {}).get(ACK_TIMEOUT_KEY, -1))
    machine = WriterMachine(int(workload["shuffle_id"]), int(workload["writer_id"]), num_readers, settings,
                            time.monotonic(), ack_timeout_ms=ack_timeout)
    server = socket.create_server(("127.0.0.1", 0))
    report(f"LISTENING {server.getsockname()[1]}")
    io = Endpoint()
    deadline: float | None = None

    def run(step: Step) -> None:
        nonlocal deadline
        io.note(step)
        deadline = step.deadline
        for send in step.sends:
            key = send.conn
            assert isinstance(key, int)
            if not io.send(key, encode_frame(send.message)):
                run(machine.connection_closed(key, time.monotonic()))
                return
            if send.notify:
                run(machine.send_completed(send.peer, send.message.seq, time.monotonic()))

    def pump() -> None:
        for sock in io.wait([server], deadline):
            if sock is server:
                conn, _ = server.accept()
                run(machine.connection_accepted(io.add(conn), time.monotonic()))
                continue
            key = sock.fileno()
            data = _recv(sock)
            if not data:
                io.drop(key)
                run(machine.connection_closed(key, time.monotonic()))
                continue
            try:
                messages = io.decoders[key].feed(data)
            except CodecError as error:
                run(machine.decode_failed(key, error, time.monotonic()))
                continue
            for message in messages:
                run(machine.received(key, message, time.monotonic()))
        run(machine.tick(time.monotonic()))

    try:
        for reader_id in range(num_readers):
            for record in workload["records"].get(str(reader_id), []):
                run(machine.write(reader_id, bytes.fromhex(record), time.monotonic()))
                while machine.blocked and not machine.done:
                    pump()
                if machine.done:
                    break
        if not machine.done:
            run(machine.finish(time.monotonic()))
        while not machine.done:
            pump()
    finally:
        _finish(io.outcome)
        io.close()
        server.close()


def run_reader(workload: dict[str, Any], settings: ShuffleSettings, peer: str) -> None:
    host, _, port = peer.rpartition(":")
    writer_id = int(workload["writer_ids"][0])
    machine = ReaderMachine(int(workload["shuffle_id"]), int(workload["reader_id"]), [writer_id], settings,
                            time.monotonic())
    io = Endpoint()
    key = io.add(socket.create_connection((host.strip("[]"), int(port))))

    def run(step: Step) -> None:
        io.note(step)
        for send in step.sends:
            if not io.send(key, encode_frame(send.message)):
                run(machine.connection_closed(writer_id, time.monotonic()))
                return
            if send.notify:
                run(machine.send_completed(writer_id, send.message.seq, time.monotonic()))
        for event in step.events:
            if isinstance(event, Deliver):
                run(machine.release(event.writer_id, event.seq, time.monotonic()))

    try:
        run(machine.connected(writer_id, time.monotonic()))
        while not machine.done:
            if not io.wait([], None):
                continue
            data = _recv(io.socks[key])
            if not data:
                io.drop(key)
                run(machine.connection_closed(writer_id, time.monotonic()))
                continue
            try:
                messages = io.decoders[key].feed(data)
            except CodecError as error:
                run(machine.decode_failed(writer_id, error, time.monotonic()))
                continue
            for message in messages:
                run(machine.received(writer_id, message, time.monotonic()))
    finally:
        _finish(io.outcome)
        io.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(RECV_CHUNK)
    except ConnectionError:
        return b""


def _finish(outcome: ShuffleError | Completed | None) -> None:
    if isinstance(outcome, ShuffleError):
        report_failure(outcome)
    elif isinstance(outcome, Completed):
        report("COMPLETED")


def main() -> int:
    role = os.environ.get(ROLE_VARIABLE, "")
    if role == CAPABILITIES_ROLE:
        report(CAPABILITIES)
        return 0
    with open(os.environ[WORKLOAD_VARIABLE]) as document:
        workload = json.load(document)
    settings = ShuffleSettings.from_dict(workload.get("settings", {}))
    print(f"conformance case {os.environ.get(CASE_VARIABLE, '?')} as {role}", file=sys.stderr)
    if role == "writer":
        run_writer(workload, settings)
    elif role == "reader":
        run_reader(workload, settings, os.environ[PEER_VARIABLE])
    else:
        print(f"unknown {ROLE_VARIABLE} {role!r}", file=sys.stderr)
        return 127
    return 0


if __name__ == "__main__":
    sys.exit(main())
