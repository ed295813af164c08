"""A PySpark job with ``spark.authenticate`` and ``spark.network.crypto.enabled``: its streaming shuffle
authenticates every connection with the application's secret and encrypts it, a stranger flooding
its writers gets no DATA and cannot fail it, and the records never cross loopback in clear.

The writers hold back most of their input until the stranger has connected (a flag file), so the
attack always lands while the shuffle runs. The loopback capture needs a raw socket (root).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from spark_session import local_session

from reference.spark.shuffle import StreamingShuffle, application_conf
from spec.auth.settings import auth_from_conf
from spec.shuffle import coordination
from spec.shuffle.codec import encode_frame
from spec.shuffle.messages import CreditMessage

pytestmark = pytest.mark.spark

WRITERS, READERS, RECORDS = 2, 2, 4000
FLOOD = 80
"""Idle stranger connections per writer: more than the 64 a writer keeps waiting to identify."""
DEADLINE_S = 120.0
"""Only ends a hung run; nothing here asserts on time."""


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session({"spark.authenticate": "true", "spark.network.crypto.enabled": "true",
                              "spark.network.crypto.cipher": "AES/GCM/NoPadding"})


def marker(i: int) -> bytes:
    return b"auth-record-%06d" % i


class Capture:
    """Every TCP payload on ``lo`` to or from ``ports`` (a raw AF_PACKET socket, loopback only)."""

    def __init__(self) -> None:
        try:
            self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
        except PermissionError:
            pytest.skip("capturing loopback packets needs root (a raw AF_PACKET socket)")
        self._sock.bind(("lo", 0))
        self._sock.settimeout(0.05)
        self.ports: set[int] = set()
        self.payload = bytearray()
        self.packets = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frame, meta = self._sock.recvfrom(262144)
            except TimeoutError:
                continue
            if meta[2] == socket.PACKET_OUTGOING:
                continue  # each loopback packet is seen twice: keep the incoming copy
            if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
                continue  # IPv4 TCP only
            ip = frame[14:]
            header = (ip[0] & 0x0F) * 4
            total = int.from_bytes(ip[2:4], "big")
            tcp = ip[header:total]
            ports = {int.from_bytes(tcp[0:2], "big"), int.from_bytes(tcp[2:4], "big")}
            if ports & self.ports:
                self.packets += 1
                self.payload += tcp[(tcp[12] >> 4) * 4:]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)
        self._sock.close()


def test_the_settings_give_every_connection_the_generated_secret_and_the_chosen_cipher(spark: Any) -> None:
    sc = spark.sparkContext
    conf = application_conf(sc)
    auth = auth_from_conf(conf, sc.applicationId, None)
    assert auth is not None and auth.cipher.name == "GCM" and auth.engine_version == 1
    assert len(auth.secret) == 64  # Spark generated it: 256 bits, hex


def test_a_stranger_flooding_the_writers_gets_no_data_cannot_fail_the_job_and_sees_no_record(
        spark: Any, tmp_path: Path) -> None:
    capture = Capture()
    flag = str(tmp_path / "stranger-connected")
    sc = spark.sparkContext
    done = threading.Event()
    strangers: list[socket.socket] = []
    credited: list[bytes] = []

    with StreamingShuffle(spark) as service:
        def held_back(index: int, rows: Iterator[int]) -> Iterator[tuple[int, bytes]]:
            """A writer's input (pickled by value: workers cannot import this module): the first rows
            at once, the rest once the stranger has connected."""
            for n, i in enumerate(rows):
                if n == 10:
                    deadline = time.monotonic() + DEADLINE_S
                    while not os.path.exists(flag) and time.monotonic() < deadline:
                        time.sleep(0.01)
                yield i % READERS, b"auth-record-%06d" % i

        rdd = sc.parallelize(range(RECORDS), WRITERS).mapPartitionsWithIndex(held_back)
        result = service.shuffle(rdd, READERS, partition_func=lambda key: key)
        shuffle_id = service.directory.open_shuffles()[-1]

        def attack() -> None:
            """Find the writers, flood each, send one a CREDIT in clear, then release the writers."""
            seen: set[tuple[str, int]] = set()
            deadline = time.monotonic() + DEADLINE_S
            while len(seen) < WRITERS and time.monotonic() < deadline and not done.is_set():
                directory = service.directory.directory(shuffle_id)
                for attempt in range(3):
                    for writer in directory.lookup(coordination.ShuffleKey(shuffle_id, attempt)).writers:
                        seen.add((writer.host, writer.port))
                time.sleep(0.01)
            capture.ports |= {port for _, port in seen}
            for address in seen:
                for _ in range(FLOOD):
                    strangers.append(socket.create_connection(address))
                credit = socket.create_connection(address)
                credit.sendall(encode_frame(CreditMessage(writer_id=0, reader_id=0, num_messages=1)))
                credit.settimeout(DEADLINE_S)
                got = bytearray()
                try:
                    while chunk := credit.recv(4096):
                        got += chunk
                except ConnectionResetError:
                    pass
                credited.append(bytes(got))
                credit.close()
            Path(flag).touch()

        attacker = threading.Thread(target=attack, daemon=True)
        attacker.start()
        try:
            got = result.glom().collect()
        finally:
            done.set()
            Path(flag).touch()
            attacker.join(DEADLINE_S)
            capture.stop()
    received = b""
    for sock in strangers:
        sock.setblocking(False)
        try:
            received += sock.recv(65536)
        except (BlockingIOError, ConnectionResetError):
            pass
        sock.close()

    expected = [[(r, marker(i)) for i in range(RECORDS) if i % READERS == r] for r in range(READERS)]
    assert [Counter(p) for p in got] == [Counter(p) for p in expected]
    assert len(credited) == WRITERS and credited == [b""] * WRITERS
    assert received == b""
    assert capture.packets > 0 and len(capture.payload) > RECORDS * 6  # the shuffle's bytes were captured
    assert not any(marker(i) in capture.payload for i in range(RECORDS))
