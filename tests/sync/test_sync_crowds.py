"""Issue 37, reproductions 1 and 2, scaled down through the flags: a crowd of connections or streams
that sends nothing useful cannot lock a legitimate client out. Idle connections and a slow-loris
holding every ``--max-connections`` slot are closed at ``--idle-timeout-s`` and
``--handshake-timeout-s``, and at the cap a newcomer evicts one of them at once (the front,
``reference/sync/front.py``); silent streams on one connection hold no put slot and end at
``--first-message-timeout-s``. Each bound is the client's deadline, not a measured time."""

from __future__ import annotations

import logging
import time

import grpc
import pytest

from benchmarks.sync_attacks import ConnectionCrowd, SilentStreams
from conformance.sync.suite import DESCS, rows_batch
from reference.sync.client import SyncClient, SyncPut
from tests.sync.conftest import ServerFactory, clock_of

BOUND_S = 20.0
"""How long a legitimate client keeps trying (its deadline): far above the scaled-down timeouts."""


def _legit_put_lands(location: str) -> None:
    client = SyncClient(location, "legit", deadline_s=BOUND_S)
    try:
        assert client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)]).memory_sequence_number == 1
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["idle", "slow-loris"])
def test_connections_holding_every_slot_are_closed_and_a_legit_put_gets_in(server_factory: ServerFactory, kind: str) -> None:
    server = server_factory(max_connections=4, idle_timeout_s=0.5, handshake_timeout_s=0.5)
    crowd = ConnectionCrowd("127.0.0.1", server.port, kind, 6)
    try:
        _legit_put_lands(server.location)
        deadline = time.monotonic() + BOUND_S
        while crowd.open:  # the server closed every attacking connection, the two it never took too
            assert time.monotonic() < deadline, f"{crowd.open} {kind} connections still open"
            time.sleep(0.05)
    finally:
        crowd.close()


def test_at_the_cap_a_newcomer_evicts_an_idle_connection(server_factory: ServerFactory,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Every slot held by idle connections that no deadline will close while the client tries (idle and
    handshake timeouts above its deadline): the front closes one of them for the client's new connection."""
    caplog.set_level(logging.INFO, logger="reference.sync.front")
    server = server_factory(max_connections=4, idle_timeout_s=BOUND_S * 3, handshake_timeout_s=BOUND_S * 3)
    crowd = ConnectionCrowd("127.0.0.1", server.port, "idle", 4)
    try:
        _legit_put_lands(server.location)
        deadline = time.monotonic() + BOUND_S
        while crowd.open > 3:
            assert time.monotonic() < deadline, "no idle connection was closed"
            time.sleep(0.05)
        assert crowd.open == 3
        assert any("to make room for one from 127.0.0.1:" in r.getMessage() for r in caplog.records)
    finally:
        crowd.close()


def test_silent_streams_on_one_connection_hold_no_put_slot(server_factory: ServerFactory) -> None:
    server = server_factory(max_concurrent_puts=2, first_message_timeout_s=60)
    streams = SilentStreams(f"127.0.0.1:{server.port}", 70)
    try:
        _legit_put_lands(server.location)
        assert server.stats()["running_puts"] == 0 and streams.ended() == 0
    finally:
        streams.close()


def test_a_silent_stream_ends_at_the_first_message_timeout_naming_it(server_factory: ServerFactory) -> None:
    server = server_factory(first_message_timeout_s=0.5)
    streams = SilentStreams(f"127.0.0.1:{server.port}", 3)
    try:
        deadline = time.monotonic() + BOUND_S
        while server.stats()["silent_streams"] != 3:
            assert time.monotonic() < deadline, "the server never saw the three streams"
            time.sleep(0.01)
        clock_of(server).advance(0.5)
        for call in streams.calls:
            with pytest.raises(grpc.RpcError) as ended:
                list(call)
            assert ended.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
            assert "--first-message-timeout-s (0.5 s)" in ended.value.details()  # type: ignore[attr-defined]
    finally:
        streams.close()
