"""The connection front as a relay (reference/sync/front.py), in front of a plain unix-socket server instead of
gRPC: bytes arrive unchanged both ways, an end of stream and a reset are passed on, and a side that does
not read makes the front stop reading the other instead of queueing more than its high-water mark, and a
closed relay is freed at once (a crowd's churn leaves nothing for the cycle collector)."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

from reference.sync.front import RELAY_HIGH_WATER_BYTES, ConnectionFront, _Relay

PATIENCE_S = 20.0
"""How long a step may take before the test fails (a bound for a hung relay, not a measured time)."""

Upstream = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _run(tmp_path: Path, upstream: Upstream, client: Callable[[asyncio.StreamReader, asyncio.StreamWriter,
                                                               ConnectionFront], Awaitable[None]]) -> None:
    """Serve ``upstream`` on a unix socket, a front before it, and run ``client`` through the front."""
    async def main() -> None:
        path = str(tmp_path / "upstream.sock")
        server = await asyncio.start_unix_server(upstream, path)
        front = ConnectionFront(path, max_connections=4, max_streams=16, tls=None)
        port = await front.listen("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.wait_for(client(reader, writer, front), PATIENCE_S)
        finally:
            writer.close()
            front.stop_listening()
            front.close_all()
            server.close()
    asyncio.run(main())


def test_bytes_arrive_unchanged_and_an_end_of_stream_is_passed_on_each_way(tmp_path: Path) -> None:
    payload = os.urandom(3 * 1024 * 1024 + 17)

    async def echo_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until the client's end of stream came through
        writer.write(data[::-1])
        await writer.drain()
        writer.close()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, front: ConnectionFront) -> None:
        writer.write(payload)
        writer.write_eof()  # half-closed: the answer still comes back
        assert await reader.read() == payload[::-1]  # and then the upstream's end of stream

    _run(tmp_path, echo_then_close, client)


def test_a_client_reset_reaches_the_upstream_as_a_broken_connection(tmp_path: Path) -> None:
    seen: asyncio.Queue[bytes | Exception] = asyncio.Queue()

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            seen.put_nowait(await reader.readexactly(5))
            seen.put_nowait(await reader.read())
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            seen.put_nowait(exc)

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, front: ConnectionFront) -> None:
        writer.write(b"hello")
        assert await seen.get() == b"hello"
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # a reset, not an end of stream
        ending = await seen.get()
        assert ending == b"" or isinstance(ending, ConnectionError)  # a unix socket has no reset: it closes
        while len(front.admission):
            await asyncio.sleep(0.01)

    _run(tmp_path, record, client)


def test_an_upstream_that_does_not_read_stops_the_front_reading_the_client(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        writer.close()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, front: ConnectionFront) -> None:
        writer.transport.set_write_buffer_limits(high=1 << 30)
        writer.write(b"x" * (32 << 20))  # far more than the kernel buffers between the client and the upstream
        (relay,) = front._relays
        while relay.client.transport is None or relay.client.transport.is_reading():
            await asyncio.sleep(0.01)
        assert relay.upstream.queued() <= RELAY_HIGH_WATER_BYTES
        assert writer.transport.get_write_buffer_size() > 0  # the rest waits with the client
        release.set()

    _run(tmp_path, stall, client)


def test_a_relay_closed_both_ways_is_freed_without_the_cycle_collector(tmp_path: Path) -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, front: ConnectionFront) -> None:
        assert await reader.read() == b""  # the upstream's end of stream came through
        writer.close()
        while front._relays:
            await asyncio.sleep(0.01)
        for _ in range(3):
            await asyncio.sleep(0)  # the sockets' last callbacks
        assert not [o for o in gc.get_objects() if isinstance(o, _Relay)]  # cyclic garbage would still be listed

    gc.collect()
    gc.disable()
    try:
        _run(tmp_path, close_at_once, client)
    finally:
        gc.enable()
