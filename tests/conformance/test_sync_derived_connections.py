"""The sync suite's connection-rank case: its raw HTTP/2 connection's reads until an answer have one deadline, and
each scenario starts once the last one's connections and put slots are all given back."""

from __future__ import annotations

import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conformance.framework import CaseContext, RunOptions
from conformance.sync.derived_connections import PING, RawConnection, _frame, connection_ranks_at_their_bound
from conformance.sync.suite import SyncTarget
from spec.http2_watch import ACK, SETTINGS

PING_FRAME_BYTES = 9 + 8


@contextmanager
def fake_peer(serve: Callable[[socket.socket], None]) -> Iterator[tuple[str, int]]:
    """A server on a free local port: it sends its SETTINGS, then ``serve`` talks to the one client it accepts."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(30)
            try:
                conn.sendall(_frame(SETTINGS, 0, 0))
                serve(conn)
            except OSError:
                pass  # the client closed the connection: the peer's work is over
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()
    finally:
        listener.close()
        thread.join(timeout=30)
        assert done.is_set()


def _after_ping(conn: socket.socket) -> None:
    got = b""
    while len(got) < PING_FRAME_BYTES:
        chunk = conn.recv(PING_FRAME_BYTES - len(got))
        if not chunk:
            raise ConnectionError("the client left before its PING")
        got += chunk


def flood(conn: socket.socket) -> None:
    """Other frames (SETTINGS), never the PING's ACK, for as long as the client reads them."""
    _after_ping(conn)
    while True:
        conn.sendall(_frame(SETTINGS, 0, 0) * 64)


def answer_late(conn: socket.socket) -> None:
    """Some other frames, then the PING's ACK."""
    _after_ping(conn)
    conn.sendall(_frame(SETTINGS, 0, 0) * 3 + _frame(PING, ACK, 0, b"roundtrp"))
    conn.recv(1)  # until the client closes


@pytest.mark.timeout(60)
def test_a_peer_that_keeps_sending_other_frames_fails_the_round_trip_at_its_one_deadline() -> None:
    with fake_peer(flood) as address:
        conn = RawConnection(address, answer_wait_s=0.5)
        try:
            with pytest.raises(TimeoutError, match=r"^no PING ACK within 0.5 s \(\d+ other frames read meanwhile\)$"):
                conn.round_trip()
            with pytest.raises(TimeoutError, match="PING ACK"):
                conn.held()  # neither held nor closed: the reason reaches the case, not a False
        finally:
            conn.close()


@pytest.mark.timeout(60)
def test_a_ping_answered_after_other_frames_is_a_round_trip() -> None:
    with fake_peer(answer_late) as address:
        conn = RawConnection(address, answer_wait_s=30)
        try:
            assert conn.round_trip()
        finally:
            conn.close()


SLOW_PUT_THREADS = (f"{shlex.quote(sys.executable)} "
                    f"{shlex.quote(str(Path(__file__).with_name('sync_slow_put_threads.py')))} --store {{store}}")


@pytest.mark.timeout(120)
def test_each_scenario_waits_for_the_slots_the_last_ones_puts_held() -> None:
    """The last scenario's busy connections are closed; their puts give their slots back only once their threads end,
    after the connections are gone: the next scenario's puts must not meet them busy."""
    target = SyncTarget(f"exec:{SLOW_PUT_THREADS}", frozenset(), SLOW_PUT_THREADS, None)
    target.start()
    try:
        options = RunOptions(suite="sync", target=target.description)
        verdict = connection_ranks_at_their_bound(target, CaseContext(options, time.monotonic() + 90))
    finally:
        target.close()
    assert verdict.passed, verdict.actual
