"""The sync server's gRPC transport: Arrow Flight's ``DoPut`` served on grpcio, with its limits held.

pyarrow's Flight server leaves gRPC's receive limit unlimited, gives every stream a thread of its
own with no cap and no deadline, and handles SIGTERM itself.  This transport serves the same
method (``arrow.flight.protocol.FlightService/DoPut``, ``spec.sync.flight``) so Flight clients
work unchanged, on a grpcio server whose limits are the sync server's:

- at most ``max_concurrent_puts`` calls at once, each on one thread of a pool of that size; the
  next call is answered ``RESOURCE_EXHAUSTED`` by gRPC before it is read;
- a message above the receive limit is refused by gRPC from its length prefix, before it is
  buffered (``RESOURCE_EXHAUSTED``);
- a call still running ``put_timeout_s`` after it began is cancelled by one watchdog thread
  (the client sees ``CANCELLED``; the put's handler drops what it read);
- ``stop(grace)`` refuses new calls, lets running ones finish for ``grace`` seconds, then
  cancels the rest.

Other Flight methods are ``UNIMPLEMENTED``.  Errors are ``SyncError`` s, sent as their status
with their one-line text.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc

from reference.sync.auth import ServerSecurity, bearer_token_matches
from spec.sync.errors import FlightDataError, InterruptedPut, SyncError, one_line
from spec.sync.flight import DO_PUT_METHOD, FLIGHT_SERVICE, FlightData, decode_flight_data, encode_put_result

log = logging.getLogger(__name__)

INTERNAL_ERROR_TEXT = "Internal error while processing the put; the server log has the details"
FRAME_ALLOWANCE_BYTES = 64 * 1024
"""Receive limit above the largest Arrow body: room for a FlightData's IPC header and framing."""

STOP_MARGIN_S = 5.0
"""How long after a graceful stop's grace gRPC cancels calls the watchdog has not ended."""

PutHandler = Callable[[Iterator[FlightData], Callable[[], bool]], bytes]
"""Takes a put's messages and its ``claim()`` (``_Call.claim``); returns the PutResult's ``app_metadata``."""


class BindError(Exception):
    """The transport could not listen on the address it was given."""


@dataclass(frozen=True)
class TransportLimits:
    """What the transport holds for the server: concurrent calls, message size, time per call."""

    max_concurrent_puts: int
    max_message_bytes: int
    put_timeout_s: float
    max_connections: int
    """Open client connections at most (each costs gRPC about 18 KiB); more are refused when they connect."""


_HEAP_SLACK = 64


class _Call:
    """One put's call: ended by the watchdog, or claimed by the handler to record it, whichever comes first."""

    def __init__(self, context: grpc.ServicerContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._ended = False
        self._claimed = False

    def expire(self) -> None:
        """The put timeout passed: end the call unless its put is being recorded."""
        with self._lock:
            if self._claimed:
                return
            self._ended = True
        log.warning("a put ran past its time limit and was cancelled; nothing of it was kept")
        self._context.cancel()

    def claim(self) -> bool:
        """True if the put may be recorded (the call is no longer ended by the watchdog); False if it ended."""
        with self._lock:
            if self._ended or not self._context.is_active():
                return False
            self._claimed = True
            return True

    @property
    def expired(self) -> bool:
        with self._lock:
            return self._ended


class _Watchdog:
    """One thread that cancels each call still running at its deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._cancel: dict[int, Callable[[], object]] = {}
        self._ids = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="sync-put-watchdog", daemon=True)
        self._thread.start()

    def watch(self, cancel: Callable[[], object], timeout_s: float) -> int:
        with self._cond:
            key = next(self._ids)
            self._cancel[key] = cancel
            heapq.heappush(self._heap, (time.monotonic() + timeout_s, key))
            self._cond.notify()
            return key

    def shorten(self, timeout_s: float) -> None:
        """Every call watched now ends within ``timeout_s`` at the latest."""
        with self._cond:
            until = time.monotonic() + timeout_s
            for key in self._cancel:
                heapq.heappush(self._heap, (until, key))
            self._cond.notify()

    def forget(self, key: int) -> None:
        with self._cond:
            self._cancel.pop(key, None)
            if len(self._heap) > 2 * len(self._cancel) + _HEAP_SLACK:  # drop finished calls' deadlines
                self._heap = [entry for entry in self._heap if entry[1] in self._cancel]
                heapq.heapify(self._heap)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                while self._heap and (self._heap[0][0] <= now or self._heap[0][1] not in self._cancel):
                    _, key = heapq.heappop(self._heap)
                    cancel = self._cancel.pop(key, None)
                    if cancel is not None:
                        cancel()
                self._cond.wait(self._heap[0][0] - now if self._heap else None)


def _messages(requests: Iterator[bytes], call: _Call) -> Iterator[FlightData]:
    """A call's decoded messages; a call that broke (cancelled, timed out, client gone) is an InterruptedPut."""
    try:
        for raw in requests:
            yield decode_flight_data(raw)
        # The end of a stream looks the same whether the client half-closed it or its connection
        # broke: grpcio reports the broken call as cancelled by a separate event.  Asking for one
        # more message is one more round through the server's completion queue, after that event:
        # a broken call then raises, a half-closed one ends again at once.
        for _ in requests:
            raise FlightDataError("a message arrived after the end of the stream")
    except grpc.RpcError:
        raise InterruptedPut() from None
    if call.expired:  # a call the server cancelled just ends its stream
        raise InterruptedPut()


class FlightPutTransport:
    """A started grpcio server answering Flight ``DoPut`` with ``handler``."""

    def __init__(
        self, handler: PutHandler, *, host: str, port: int, limits: TransportLimits, security: ServerSecurity
    ) -> None:
        self._handler = handler
        self._limits = limits
        self._token = security.token
        self._watchdog = _Watchdog()
        self._running = 0
        self._running_lock = threading.Lock()
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=limits.max_concurrent_puts, thread_name_prefix="sync-put"),
            handlers=[grpc.method_handlers_generic_handler(FLIGHT_SERVICE, {
                DO_PUT_METHOD: grpc.stream_stream_rpc_method_handler(self._do_put),
            })],
            maximum_concurrent_rpcs=limits.max_concurrent_puts,
            options=[
                ("grpc.max_receive_message_length", limits.max_message_bytes + FRAME_ALLOWANCE_BYTES),
                ("grpc.so_reuseport", 0),
                ("grpc.max_allowed_incoming_connections", limits.max_connections),
            ],
        )
        address = f"{host}:{port}"
        try:
            if security.tls_cert is not None and security.tls_key is not None:
                credentials = grpc.ssl_server_credentials([(security.tls_key, security.tls_cert)])
                self.port = self._server.add_secure_port(address, credentials)
            else:
                self.port = self._server.add_insecure_port(address)
        except RuntimeError:
            self.port = 0
        if self.port == 0:
            self._watchdog.stop()
            raise BindError(f"cannot listen on {address}: the address is in use or not available here")
        self._server.start()

    def _authorized(self, context: grpc.ServicerContext) -> bool:
        return self._token is None or bearer_token_matches(context.invocation_metadata() or (), self._token)

    def _do_put(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        if not self._authorized(context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "A valid bearer token is required")
        call = _Call(context)
        watch = self._watchdog.watch(call.expire, self._limits.put_timeout_s)
        with self._running_lock:
            self._running += 1
        try:
            answer = self._handler(_messages(requests, call), call.claim)
        except SyncError as exc:
            log.info("put refused (%s): %s", exc.condition, exc.message)
            context.abort(grpc.StatusCode[exc.status], one_line(exc.message))
        except Exception:
            log.exception("put failed")
            context.abort(grpc.StatusCode.INTERNAL, INTERNAL_ERROR_TEXT)
        finally:
            self._watchdog.forget(watch)
            with self._running_lock:
                self._running -= 1
        yield encode_put_result(answer)

    @property
    def running_puts(self) -> int:
        """Calls being served now."""
        with self._running_lock:
            return self._running

    def wait(self) -> None:
        """Block until the server stopped."""
        self._server.wait_for_termination()

    def stop(self, grace_s: float | None) -> None:
        """Refuse new calls, give running ones ``grace_s`` seconds (None: none), then cancel them; wait.

        The watchdog ends a call still running at the grace's end (nothing of it is kept); gRPC
        cancels what is left ``STOP_MARGIN_S`` later, by then only puts past their reading.
        """
        if grace_s is not None:
            self._watchdog.shorten(grace_s)
        self._server.stop(None if grace_s is None else grace_s + STOP_MARGIN_S).wait()
        self._watchdog.stop()
