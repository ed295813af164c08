"""The sync server's gRPC transport: Arrow Flight's ``DoPut`` served on grpcio's asyncio server, with its limits held.

pyarrow's Flight server leaves gRPC's receive limit unlimited, gives every stream a thread of its
own with no cap and no deadline, and handles SIGTERM itself.  This transport serves the same
method (``arrow.flight.protocol.FlightService/DoPut``, ``spec.sync.flight``) so Flight clients
work unchanged, on a grpcio server whose limits are the sync server's.  Streams wait on one
event-loop thread; the rules are the spec's (``spec.sync.admission``: ``PutStream``, ``PutSlots``), and their
deadlines are read from and waited on the server's one clock (``reference.sync.clock``: the loop's own timer on
the real clock; under a harness, its clock's alarm, so a stream ends when that clock reaches its deadline):

- a stream whose first message does not arrive within ``first_message_timeout_s`` ends
  ``DEADLINE_EXCEEDED`` naming ``--first-message-timeout-s``; until then it holds no put slot
  and no thread;
- once its first message arrived a put takes one of ``max_concurrent_puts`` slots, and runs on
  one thread of a pool of that size; with every slot taken it is ``RESOURCE_EXHAUSTED``
  (``PutSlotsBusy``, which clients retry);
- a message above the receive limit is refused by gRPC from its length prefix, before it is
  buffered (``RESOURCE_EXHAUSTED``);
- a put still running ``put_timeout_s`` after its first message, unless it is being recorded,
  ends ``DEADLINE_EXCEEDED`` naming ``--put-timeout-s`` (its handler drops what it read);
- ``stop(grace)`` refuses new calls, lets running ones finish for ``grace`` seconds, then ends
  the rest ``UNAVAILABLE`` (``ServerDraining``).

Connections reach gRPC through the front (``reference.sync.front``), which owns accept on the public
address and relays each connection to gRPC's unix socket in a private directory: at
``max_connections`` a newcomer evicts the connection worth least (``spec.admission.ConnectionAdmission``),
which gRPC's own cap could only refuse; TLS ends in the front. gRPC's handshake, idle and stream limits
apply to each relayed connection as they did to the client's (on gRPC's own timers, the real clock).

Other Flight methods are ``UNIMPLEMENTED``.  Errors are ``SyncError`` s, sent as their status
with their one-line text and condition (``spec.sync.errors.wire_text``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, NoReturn, TypeVar

import grpc
import grpc.aio

from reference.sync.clock import Clock, LoopAlarm
from reference.sync.credentials import ServerSecurity, bearer_token_matches
from reference.sync.front import ConnectionFront, tls_context
from reference.sync.private_dir import PrivateDirectory
from spec.clock import after
from spec.sync.admission import PutLimits, PutSlots, PutStream
from spec.sync.errors import FlightDataError, InterruptedPut, PutSlotsBusy, SyncError, wire_text
from spec.sync.flight import DO_PUT_METHOD, FLIGHT_SERVICE, FlightData, decode_flight_data, encode_put_result

log = logging.getLogger(__name__)

INTERNAL_ERROR_TEXT = "Internal error while processing the put; the server log has the details"
FRAME_ALLOWANCE_BYTES = 64 * 1024
"""Receive limit above the largest Arrow body: room for a FlightData's IPC header and framing."""

STOP_MARGIN_S = 5.0
"""How long after a graceful stop's grace gRPC cancels calls still running (by then only puts being recorded)."""

T = TypeVar("T")

PutHandler = Callable[[Iterator[FlightData], Callable[[], bool]], bytes]
"""Takes a put's messages and its ``claim()`` (``_Call.claim``); returns the PutResult's ``app_metadata``."""


class BindError(Exception):
    """The transport could not listen as asked: on the address it was given, or with its TLS certificate and key."""


_END = object()
"""A stream's end, as the event loop hands it to the put's thread."""


class _Call:
    """One put's call between the event loop, which ends it at its deadline, and the put's thread,
    which reads its messages and claims it to record it, whichever comes first."""

    def __init__(self, loop: asyncio.AbstractEventLoop, requests: AsyncIterator[bytes],
                 context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        self._loop = loop
        self._requests = requests
        self._context = context
        self._at_end = False
        self._lock = threading.Lock()
        self._ended = False
        self._claimed = False
        self._reading: concurrent.futures.Future[object] | None = None

    async def _next(self) -> object:
        """The next message, or ``_END`` once the client half-closed the stream; raise InterruptedPut if it broke."""
        if self._at_end:
            return _END
        try:
            return await self._requests.__anext__()
        except StopAsyncIteration:
            pass
        # grpc's request iterator ends alike when the client half-closed the stream (END_STREAM after its
        # last message) and when the stream broke (RST_STREAM, connection lost, client killed); the
        # cancellation is reported apart, maybe later.  gRPC closed a broken stream both ways before it
        # ended the iterator, so the answer's headers cannot be sent on it; a half-closed stream takes them.
        try:
            await self._context.send_initial_metadata(())
        except grpc.aio.BaseError:
            raise InterruptedPut() from None
        self._at_end = True
        return _END

    def read(self) -> bytes | None:
        """The next message (None at the end of the stream), read on the event loop; InterruptedPut once ended."""
        with self._lock:
            if self._ended:
                raise InterruptedPut()
            self._reading = asyncio.run_coroutine_threadsafe(self._next(), self._loop)
        try:
            raw = self._reading.result()
        except (concurrent.futures.CancelledError, asyncio.CancelledError, grpc.RpcError):
            raise InterruptedPut() from None
        return None if raw is _END else raw  # type: ignore[return-value]

    def end(self) -> bool:
        """End the call unless its put is being recorded; False if it is (it then runs to its end)."""
        with self._lock:
            if self._claimed:
                return False
            self._ended = True
            if self._reading is not None:
                self._reading.cancel()
            return True

    def claim(self) -> bool:
        """True if the put may be recorded (the call is no longer ended at its deadline); False if it ended."""
        with self._lock:
            if self._ended:
                return False
            self._claimed = True
            return True


def _messages(call: _Call, first: bytes) -> Iterator[FlightData]:
    """A call's decoded messages, up to the client's half-close; a call that broke (ended, client gone) is an InterruptedPut."""
    raw: bytes | None = first
    while raw is not None:
        yield decode_flight_data(raw)
        raw = call.read()


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _nobody_waits(put: asyncio.Future[bytes]) -> None:
    """Take the outcome of a put whose client left: left untaken, asyncio logs it with its traceback from
    the garbage collector, wherever that runs (in 3.11, inside another ``ast.parse``, which then fails)."""
    if not put.cancelled():
        put.exception()


def _serve(handler: PutHandler, call: _Call, first: object) -> bytes:
    """Run the put on its thread, from its first message (``_END``: the stream had none)."""
    if not isinstance(first, bytes):
        raise FlightDataError("the stream ended before its first message")
    return handler(_messages(call, first), call.claim)


class FlightPutTransport:
    """A started grpcio asyncio server answering Flight ``DoPut`` with ``handler``."""

    def __init__(
        self, handler: PutHandler, *, host: str, port: int, limits: PutLimits, security: ServerSecurity, clock: Clock,
    ) -> None:
        """``clock``: what every stream's deadline is read from and waited on (the server's one clock)."""
        self._handler = handler
        self._limits = limits
        self._token = security.token
        self._slots = PutSlots(limits.max_concurrent_puts)
        self._pool = concurrent.futures.ThreadPoolExecutor(limits.max_concurrent_puts, thread_name_prefix="sync-put")
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="sync-transport", daemon=True)
        self._loop_thread.start()
        self._clock = clock
        self._silent_streams = 0
        self._stopping: asyncio.Future[None] | None = None
        self._stop_deadline = float("inf")
        self._stopped = threading.Event()
        self._private = PrivateDirectory()
        """gRPC's unix socket, behind the front, and nobody else's (mode 0700); what killed servers left is removed."""
        try:
            self._server, self._front, self.port = self._run(self._start(host, port, security))
        except BindError:
            self._close_loop()
            self._private.remove()
            raise

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _start(self, host: str, port: int, security: ServerSecurity) -> tuple[grpc.aio.Server, ConnectionFront, int]:
        self._stopping = self._loop.create_future()
        server = grpc.aio.server(
            handlers=[grpc.method_handlers_generic_handler(FLIGHT_SERVICE, {
                DO_PUT_METHOD: grpc.stream_stream_rpc_method_handler(self._do_put),
            })],
            options=[
                ("grpc.max_receive_message_length", self._limits.receive_limit + FRAME_ALLOWANCE_BYTES),
                ("grpc.so_reuseport", 0),
                ("grpc.server_handshake_timeout_ms", _ms(self._limits.handshake_timeout_s)),
                ("grpc.http2.settings_timeout", _ms(self._limits.handshake_timeout_s)),
                ("grpc.max_connection_idle_ms", _ms(self._limits.idle_timeout_s)),
                ("grpc.max_concurrent_streams", self._limits.max_streams_per_connection),
            ],
        )
        upstream = os.path.join(self._private.path, "grpc.sock")
        if server.add_insecure_port(f"unix:{upstream}") == 0:
            raise BindError(f"cannot listen on a unix socket in {tempfile.gettempdir()}")
        await server.start()
        try:
            tls = None
            if security.tls_cert is not None and security.tls_key is not None:
                tls = tls_context(security.tls_cert, security.tls_key, self._private.path)
            front = ConnectionFront(upstream, max_connections=self._limits.max_connections,
                                    max_streams=self._limits.max_streams_per_connection, tls=tls)
            return server, front, await front.listen(host, port)
        except ssl.SSLError as exc:
            await server.stop(None)
            raise BindError(f"cannot serve TLS with this certificate and key: {exc.reason or exc}") from None
        except OSError:
            await server.stop(None)
            raise BindError(f"cannot listen on {host}:{port}: the address is in use or not available here") from None

    def _authorized(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> bool:
        metadata = [(str(key), value) for key, value in context.invocation_metadata() or ()]
        return self._token is None or bearer_token_matches(metadata, self._token)

    async def _do_put(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        try:
            stream = PutStream.open(self._limits, self._clock.now(), authorized=self._authorized(context))
        except SyncError as exc:
            await self._refuse(context, exc)
        alarm = self._clock.loop_alarm()
        self._silent_streams += 1
        try:
            await self._serve(stream, alarm, _Call(self._loop, requests.__aiter__(), context), context)
        finally:
            alarm.close()

    async def _serve(self, stream: PutStream, alarm: LoopAlarm, call: _Call,
                     context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        """Serve one authorized stream: its first message, then its put on a thread, each until the stream ends."""
        arriving = asyncio.ensure_future(call._next())
        try:
            ending = await self._until_ending(arriving, stream, alarm)
        finally:
            self._silent_streams -= 1
            arriving.cancel()
        if ending is not None:
            await self._refuse(context, ending)
        try:
            first = arriving.result()
        except InterruptedPut as exc:
            await self._refuse(context, exc)
        try:
            stream.first_message(self._clock.now(), self._slots)
        except PutSlotsBusy as exc:
            await self._refuse(context, exc)
        put = self._loop.run_in_executor(self._pool, _serve, self._handler, call, first)
        put.add_done_callback(lambda _: self._slots.give_back())  # once the put's thread is done with it
        try:
            answer = await self._answer(put, call, stream, alarm)
        except asyncio.CancelledError:  # the client went away
            call.end()
            put.add_done_callback(_nobody_waits)
            raise
        except SyncError as exc:
            await self._refuse(context, exc)
        except Exception:
            log.exception("put failed")
            await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_ERROR_TEXT)
        await context.write(encode_put_result(answer))

    async def _until_ending(self, work: asyncio.Future[Any], stream: PutStream, alarm: LoopAlarm) -> SyncError | None:
        """Wait for ``work`` on the clock until the stream ends: None once it is done, else why the stream ended
        (``PutStream.ending``: its deadline, or a stop's grace)."""
        assert self._stopping is not None
        while not work.done():
            wakes: list[asyncio.Future[Any]] = [work]
            if not self._stopping.done():  # a stop moves the deadline
                wakes.append(self._stopping)
            await alarm.sleep_until(min(stream.deadline, self._stop_deadline), *wakes)
            ending = None if work.done() else stream.ending(self._clock.now(), self._stop_deadline)
            if ending is not None:
                return ending
        return None

    async def _answer(self, put: asyncio.Future[bytes], call: _Call, stream: PutStream, alarm: LoopAlarm) -> bytes:
        """The put's answer, or its refusal once past its deadline (or a stop's grace) and not being recorded."""
        ending = await self._until_ending(put, stream, alarm)
        if ending is not None and call.end():
            log.warning("a put ran past its deadline and was ended; nothing of it was kept")
            put.add_done_callback(_nobody_waits)
            raise ending
        return await put  # done, or being recorded: it runs to its end

    @staticmethod
    async def _refuse(context: grpc.aio.ServicerContext[bytes, bytes], error: SyncError) -> NoReturn:
        log.info("put refused (%s): %s", error.condition, error.message)
        await context.abort(grpc.StatusCode[error.status], wire_text(error))
        raise AssertionError("abort returned")

    @property
    def running_puts(self) -> int:
        """Puts holding a slot now (their first message arrived)."""
        return self._slots.in_use

    @property
    def stopping(self) -> bool:
        """Whether a stop began: no new call is taken, running ones have until its grace ends."""
        return self._stopping is not None and self._stopping.done()

    @property
    def silent_streams(self) -> int:
        """Streams open with no message yet (they hold no put slot)."""
        return self._silent_streams

    @property
    def connections(self) -> int:
        """Client connections held now (``max_connections`` at most)."""
        return len(self._front.admission)

    def wait(self) -> None:
        """Block until the server stopped."""
        self._stopped.wait()

    def stop(self, grace_s: float | None) -> None:
        """Refuse new calls, give running ones ``grace_s`` seconds (None: none), then end them; wait.

        A put not being recorded by the grace's end ends ``UNAVAILABLE`` (nothing of it is kept);
        gRPC cancels what is left ``STOP_MARGIN_S`` later, by then only puts past their reading.
        """
        if self._stopped.is_set():
            return
        self._run(self._stop(grace_s))
        self._close_loop()
        self._pool.shutdown(wait=False)
        self._stopped.set()

    async def _stop(self, grace_s: float | None) -> None:
        assert self._stopping is not None
        self._stop_deadline = after(self._clock.now(), grace_s or 0.0)
        self._stopping.set_result(None)
        self._front.stop_listening()
        await self._server.stop(None if grace_s is None else grace_s + STOP_MARGIN_S)
        self._front.close_all()
        self._private.remove()

    def _close_loop(self) -> None:
        """Stop the loop and close it (its selector and self-pipe), not left to the garbage collector: a process that
        starts and stops servers one after another (a test run, a walk selection) holds no descriptor of a stopped one."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(timeout=5)
        if not self._loop_thread.is_alive():
            self._loop.close()
