"""The sync server's front: it owns accept, so that at ``--max-connections`` a newcomer can push out the
connection worth least instead of being refused (grpcio can only refuse it).

The front listens on the public address; gRPC listens on a unix socket in a private directory. Each
client connection gets a private connection of its own, opened as it is accepted, and the bytes are
relayed both ways unchanged: gRPC's handshake, idle and first-message deadlines run on the private
connection as they did on the client's, and whatever ends one side ends the other (an end of stream
is passed on as one, a reset as a reset). TLS is terminated here (ALPN ``h2``); gRPC's side is plain.

The front decides nothing: it tells ``spec.admission.ConnectionAdmission`` what each connection is
doing (``spec.http2_watch.ConnectionWatch`` reads it from the HTTP/2 frame headers going by) and
closes what the policy returns; a newcomer the policy refuses is closed at once (its client retries).

What a stranger can make the front hold, by construction: each direction of a connection queues at
most ``RELAY_HIGH_WATER_BYTES`` (a read takes only the room left below it, and a full queue stops
reading from its source until the other side took three quarters), plus with TLS one TLS record
being decrypted (``TLS_RECORD_BYTES``); one read buffer is shared by every connection, as the loop
reads one socket at a time; a connection counts against ``--max-connections`` from its accept until
both of its sockets are closed (docs/sync.md, "Memory").
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import struct
from typing import cast

from spec.admission import ConnectionAdmission, ConnectionUse
from spec.http2_watch import ConnectionWatch

log = logging.getLogger(__name__)

RELAY_HIGH_WATER_BYTES = 32 * 1024
"""Bytes queued at most in one direction of one connection (then its source is not read)."""
TLS_RECORD_BYTES = 16 * 1024 + 256
"""One TLS record, the most decrypted at once beyond the room a read was given."""
_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: closing sends a reset."""


class _Side(asyncio.BufferedProtocol):
    """One socket of a relay: the client's or gRPC's."""

    __slots__ = ("relay", "transport", "other", "lost", "eof")

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.other: _Side
        self.lost = False
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=RELAY_HIGH_WATER_BYTES - 1, low=RELAY_HIGH_WATER_BYTES // 4)
        self.relay.connected(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.relay.front.read_buffer(self.other.queued())

    def buffer_updated(self, nbytes: int) -> None:
        self.relay.received(self, self.relay.front.take(nbytes))

    def eof_received(self) -> bool:
        self.eof = True
        self.relay.ended(self)
        return True  # the other direction goes on until it ends too

    def pause_writing(self) -> None:
        self.other.pause_reading()

    def resume_writing(self) -> None:
        self.other.resume_reading()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.lost:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if (self.transport is not None and not self.lost and not self.transport.is_reading()
                and self.relay.may_read(self)):
            self.transport.resume_reading()

    def queued(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def write(self, data: bytes) -> None:
        if data and self.transport is not None and not self.lost:
            self.transport.write(data)

    def write_eof(self) -> None:
        if self.transport is not None and not self.lost and self.transport.can_write_eof():
            self.transport.write_eof()

    def close(self) -> None:
        """Close after what is queued."""
        if self.transport is not None and not self.lost:
            self.transport.close()

    def abort(self, reset: bool = False) -> None:
        """Close at once, dropping what is queued (``reset``: with a TCP reset, where there is one)."""
        if self.transport is None or self.lost:
            return
        sock = self.transport.get_extra_info("socket")
        if reset and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.relay.closed(self, exc)


class _Tls:
    """TLS on the client's side of a relay, in memory: ciphertext in and out, plaintext to relay."""

    __slots__ = ("_incoming", "_outgoing", "_tls", "handshaken", "closed_by_client")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshaken = False
        self.closed_by_client = False

    def receive(self, ciphertext: bytes) -> bytes:
        """The plaintext ``ciphertext`` completes (raise ssl.SSLError on a bad handshake or record)."""
        self._incoming.write(ciphertext)
        if not self.handshaken:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshaken = True
        plain = []
        while True:
            try:
                plain.append(self._tls.read(TLS_RECORD_BYTES))
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the client's close_notify: its end of stream
                self.closed_by_client = True
                break
        return b"".join(plain)

    def send(self, plaintext: bytes) -> None:
        if plaintext:
            self._tls.write(plaintext)

    def close(self) -> None:
        """Say close_notify (the server's end of stream), if the handshake is done."""
        if self.handshaken:
            try:
                self._tls.unwrap()
            except ssl.SSLError:  # the client's close_notify has not come: ours is in ``outgoing`` anyway
                pass

    def outgoing(self) -> bytes:
        return self._outgoing.read()


class _Relay:
    """One client connection and its private connection to gRPC, relayed both ways."""

    __slots__ = ("front", "client", "upstream", "watch", "peer", "tls", "_connecting")

    def __init__(self, front: ConnectionFront) -> None:
        self.front = front
        self.client = _Side(self)
        self.upstream = _Side(self)
        self.client.other, self.upstream.other = self.upstream, self.client
        self.watch = ConnectionWatch(front.max_streams)
        self.peer = "?"
        self.tls = _Tls(front.tls) if front.tls is not None else None
        self._connecting: asyncio.Task[object] | None = None

    def connected(self, side: _Side) -> None:
        if side is self.client:
            self.peer = _address(side)
            self.client.pause_reading()  # until gRPC's side is there
            if self.front.admit(self):
                self._connecting = asyncio.ensure_future(self.front.connect_upstream(self))
        elif self.client.lost:
            self.upstream.abort()
        else:
            if not self.may_read(self.upstream):
                self.upstream.pause_reading()  # gRPC's SETTINGS wait for the client's TLS handshake
            self.client.resume_reading()

    def may_read(self, side: _Side) -> bool:
        """Whether ``side`` may be read: gRPC's only once the client's TLS handshake is done."""
        return side is self.client or self.tls is None or self.tls.handshaken

    def connecting_done(self) -> None:
        """The connection to gRPC is made or failed: its task (and the frames it holds) may go."""
        self._connecting = None

    def upstream_unreachable(self) -> None:
        log.warning("could not reach the gRPC server for a connection from %s; closed", self.peer)
        self.client.abort()

    def received(self, side: _Side, data: bytes) -> None:
        try:
            if side is self.client:
                self._from_client(data)
            else:
                self._from_upstream(data)
        except ssl.SSLError as exc:
            log.info("TLS failed on the connection from %s: %s", self.peer, exc.reason or exc)
            self.evict()

    def _from_client(self, data: bytes) -> None:
        if self.tls is not None:
            handshaken = self.tls.handshaken
            data = self.tls.receive(data)
            self.client.write(self.tls.outgoing())
            if self.tls.handshaken and not handshaken:
                self.upstream.resume_reading()
        self.watch.from_client(data)
        self._report_use()
        self.upstream.write(data)
        if self.tls is not None and self.tls.closed_by_client:
            self.ended(self.client)

    def _from_upstream(self, data: bytes) -> None:
        self.watch.from_server(data)
        self._report_use()
        if self.tls is not None:
            self.tls.send(data)
            data = self.tls.outgoing()
        self.client.write(data)

    def _report_use(self) -> None:
        """Every use the watch reads, each time it reads one: what a report changes is the policy's to decide."""
        self.front.admission.using(self, self.watch.use)

    def ended(self, side: _Side) -> None:
        """``side`` sent its end of stream: pass it on; once both did, close both."""
        if side is self.client:
            self.upstream.write_eof()
        else:
            if self.tls is not None:
                self.tls.close()
                self.client.write(self.tls.outgoing())
            self.client.write_eof()
        if (self.client.eof or (self.tls is not None and self.tls.closed_by_client)) and self.upstream.eof:
            self.client.close()
            self.upstream.close()

    def closed(self, side: _Side, exc: Exception | None) -> None:
        """``side`` is closed: close the other, after what it has queued (at once, with a reset, if ``side`` broke)."""
        if side is self.upstream and not self.client.lost:
            self.front.admission.using(self, ConnectionUse.ENDING)  # only gRPC's last bytes are left to write
        if exc is None:
            side.other.close()
        else:
            side.other.abort(reset=True)
        if self._connecting is not None and side is self.client:
            self._connecting.cancel()
        if self.client.lost and (self.upstream.lost or self.upstream.transport is None):
            self.front.closed(self)
        if self.client.lost and self.upstream.lost:  # no callback comes any more
            del self.client.relay, self.upstream.relay  # no cycle left: freed now, not by the cycle collector

    def evict(self) -> None:
        """Close both sockets at once (the client sees its connection end, as at gRPC's idle timeout)."""
        self.client.abort()
        self.upstream.abort()


def _address(side: _Side) -> str:
    assert side.transport is not None
    name = side.transport.get_extra_info("peername")
    return f"{name[0]}:{name[1]}" if isinstance(name, tuple) else str(name)


class ConnectionFront:
    """Accepts the public connections on the running loop and relays each to gRPC at ``upstream`` (a unix socket)."""

    def __init__(self, upstream: str, *, max_connections: int, max_streams: int, tls: ssl.SSLContext | None) -> None:
        self.upstream = upstream
        self.max_streams = max_streams
        self.tls = tls
        self.admission: ConnectionAdmission[_Relay] = ConnectionAdmission(max_connections)
        self._buffer = memoryview(bytearray(RELAY_HIGH_WATER_BYTES))
        """The one read buffer: the loop reads one socket at a time, and each read is copied out at once."""
        self._server: asyncio.Server | None = None
        self._relays: set[_Relay] = set()

    def read_buffer(self, queued: int) -> memoryview:
        """Where to read, as much as the room left below the high-water mark of the far side's queue."""
        return self._buffer[:max(1, RELAY_HIGH_WATER_BYTES - queued)]

    def take(self, nbytes: int) -> bytes:
        """The ``nbytes`` just read (a copy: the buffer is the next read's)."""
        return bytes(self._buffer[:nbytes])

    async def listen(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (raise OSError); the port listened on."""
        loop = asyncio.get_running_loop()
        # A long accept queue: a crowd connecting at once must not make the kernel drop a client's SYN
        # (retried after 1 s, then 3 s) before the front could make room for it.
        self._server = await loop.create_server(self._accepted, host, port, backlog=socket.SOMAXCONN)
        return cast(int, self._server.sockets[0].getsockname()[1])

    def _accepted(self) -> _Side:
        relay = _Relay(self)
        self._relays.add(relay)
        return relay.client

    def admit(self, relay: _Relay) -> bool:
        """Carry out the policy's verdict on a newcomer: evict whom it says, or close the newcomer."""
        verdict = self.admission.accepted(relay)
        if not verdict.admitted:
            log.info("refused a connection from %s: every one of %d connections carries a request",
                     relay.peer, self.admission.max_connections)
            relay.client.abort()
            return False
        if verdict.evicted is not None:
            log.info("closed the connection from %s (%s) to make room for one from %s",
                     verdict.evicted.peer, verdict.evicted.watch.use.name.lower(), relay.peer)
            verdict.evicted.evict()
        return True

    async def connect_upstream(self, relay: _Relay) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_unix_connection(lambda: relay.upstream, self.upstream)
        except OSError:
            relay.upstream_unreachable()
        finally:
            relay.connecting_done()

    def closed(self, relay: _Relay) -> None:
        """Both sockets of ``relay`` are closed: it holds nothing any more."""
        self.admission.closed(relay)
        self._relays.discard(relay)

    def stop_listening(self) -> None:
        """Take no new connection; those open go on."""
        if self._server is not None:
            self._server.close()

    def close_all(self) -> None:
        """End every relayed connection at once."""
        for relay in list(self._relays):
            relay.evict()


def tls_context(cert: bytes, key: bytes, directory: str) -> ssl.SSLContext:
    """A server TLS context for ``cert`` and ``key`` (PEM; the ssl module loads files, so they pass through
    ``directory``, which only this process may read, and are gone once loaded); raise ssl.SSLError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # HTTP/2 over TLS needs 1.2 at least (RFC 9113 9.2)
    context.set_alpn_protocols(["h2"])
    paths = [os.path.join(directory, name) for name in ("cert.pem", "key.pem")]
    try:
        for path, pem in zip(paths, (cert, key)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
                file.write(pem)
        context.load_cert_chain(paths[0], paths[1])
    finally:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    return context
