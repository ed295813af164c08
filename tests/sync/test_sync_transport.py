"""The server's own Flight transport (grpcio): Flight's wire messages, and the bounds it holds on
streams and time (issue 24, reproduction 2; issue 37): a capped number of puts at once, each ending
at the put timeout with nothing of it kept, silent streams holding no put slot."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc.aio
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from conformance.sync.derived_streams import OpenStream
from conformance.sync.suite import _cmd, do_put, rows_batch
from conformance.sync.clock import ManualClock
from reference.sync.clock import MonotonicClock
from reference.sync.server import SyncServer
from reference.sync.transport import _Call
from spec.sync.errors import InterruptedPut
from spec.sync.flight import FlightDataMessage, FlightDescriptorMessage, decode_flight_data, descriptor_command
from tests.sync.conftest import ServerFactory, clock_of

PATIENCE_S = 30.0


def test_flight_data_decodes_as_flight_proto_encodes_it() -> None:
    descriptor: Any = FlightDescriptorMessage(type=2, cmd=b"\x01\x02")
    message: Any = FlightDataMessage(data_header=b"header", app_metadata=b"meta", data_body=b"body" * 100)
    message.flight_descriptor.CopyFrom(descriptor)
    raw = message.SerializeToString()
    # Field numbers of Flight.proto: descriptor 1, header 2, app_metadata 3, body 1000 (tag bytes c2 3e).
    assert raw.startswith(b"\x0a\x06\x08\x02\x12\x02\x01\x02\x12\x06header\x1a\x04meta\xc2\x3e\x90\x03")
    decoded = decode_flight_data(raw)
    assert decoded.descriptor is not None and descriptor_command(decoded.descriptor) == b"\x01\x02"
    assert bytes(decoded.header) == b"header" and bytes(decoded.body) == b"body" * 100


def _wait_for(condition: Any) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the expected state"
        time.sleep(0.01)


def test_puts_beyond_the_cap_are_resource_exhausted_and_stalled_ones_end_at_the_put_timeout(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(max_concurrent_puts=2, put_timeout_s=2.0)
    location = server.location
    stalled = _cmd("t", "A", None).to_descriptor_cmd()
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(do_put, location, stalled, [rows_batch([(None, i, "x")])], timeout=60, done=False)
                for i in range(2)]
        try:
            _wait_for(lambda: server.stats()["running_puts"] == 2)
            # Refused at once; served, it would wait for a thread the stalled puts hold: its deadline is short.
            third = do_put(location, _cmd("u", "B", 1).to_descriptor_cmd(), [rows_batch([(None, 1, "b")])], timeout=10)
        finally:
            # Neither stalled put ever completes: each is ended by the server at the put timeout on its clock,
            # not at the client's 60 s deadline, and nothing of it is kept.
            clock_of(server).advance(2.0)
            outcomes = [f.result() for f in held]
    assert third.response is None and "resource exhausted" in third.error_text.lower()
    # Issue 37, reproduction 4: DEADLINE_EXCEEDED naming the setting, not a bare CANCELLED.
    assert all(isinstance(o.error, flight.FlightTimedOutError) and "--put-timeout-s (2 s)" in o.error_text
               for o in outcomes), outcomes
    _wait_for(lambda: server.stats()["running_puts"] == 0)  # the handlers finish just after the cancel
    assert server.stats()["open_transactions"] == 0 and server.stats()["in_memory_bytes"] == 0
    after = do_put(location, _cmd("u", "B", 1).to_descriptor_cmd(), [rows_batch([(None, 1, "b")])], timeout=60)
    assert after.response is not None and after.response.accepted


class _LockWaitedByAPut:
    """The server's write lock, telling when a put's thread waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waited = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if threading.current_thread().name.startswith("sync-put"):
            self.waited.set()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_put_past_its_timeout_while_waiting_to_be_recorded_is_not_recorded(server_factory: ServerFactory) -> None:
    """The stream is complete but the write lock is held: the deadline ends the put, which must not be
    recorded once the lock comes free (the client was told DEADLINE_EXCEEDED).  (The flusher sleeps through the
    clock's move: its deadline is far, and it would wait for the lock.)"""
    server = server_factory(put_timeout_s=0.5, write_lock_timeout_s=60, clock=ManualClock(wakes_at_deadlines=True))
    lock = server._lock = _LockWaitedByAPut()  # type: ignore[assignment]
    with lock, ThreadPoolExecutor(1) as pool:
        put = pool.submit(do_put, server.location, _cmd("t", "A", 1).to_descriptor_cmd(),
                          [rows_batch([(None, 1, "a")])], timeout=60)
        assert lock.waited.wait(PATIENCE_S), "the put never waited for the write lock"
        clock_of(server).advance(0.5)
        out = put.result()
        assert isinstance(out.error, flight.FlightTimedOutError) and "--put-timeout-s" in out.error_text, out
        assert server._transport.running_puts == 1  # waiting for the lock
    _wait_for(lambda: server.stats()["running_puts"] == 0)
    probe = do_put(server.location, _cmd("", "A", None, ()).to_descriptor_cmd(), [], timeout=60)
    assert probe.response is not None and probe.response.memory_sequence_number is None
    assert server.stats()["in_memory_bytes"] == 0


def test_a_trickling_put_is_ended_at_the_put_timeout_with_nothing_kept(server_factory: ServerFactory) -> None:
    """On the real clock (production's loop timer): the put ends, whatever the client does, once its time is up."""
    server = server_factory(put_timeout_s=1.0, clock=MonotonicClock())
    client = flight.FlightClient(server.location)
    batch = rows_batch([(None, 1, "a")])
    writer, reader = client.do_put(flight.FlightDescriptor.for_command(_cmd("t", "A", 1).to_descriptor_cmd()),
                                   batch.schema, options=flight.FlightCallOptions(timeout=60))
    ended = threading.Event()
    error: list[BaseException] = []

    def trickle() -> None:
        try:
            while not ended.is_set():  # one row every 0.2 s, for ever: only the server can end it
                writer.write_table(batch)
                ended.wait(0.2)
        except (flight.FlightError, pa.ArrowException) as exc:
            error.append(exc)

    sender = threading.Thread(target=trickle)
    sender.start()
    sender.join(PATIENCE_S)
    ended.set()
    sender.join()
    client.close()
    assert error, "the server never ended the trickling put"
    assert server.stats()["open_transactions"] == 0 and server.stats()["in_memory_bytes"] == 0


@pytest.mark.parametrize("size", [4096, 400_000], ids=["checked-by-the-server", "refused-by-grpc-unread"])
def test_a_message_above_the_receive_limit_is_resource_exhausted(server_factory: ServerFactory, size: int) -> None:
    server = server_factory(max_message_bytes=1000)
    big = rows_batch([(None, i, "x" * 50) for i in range(size // 50)])
    out = do_put(server.location, _cmd("t", "A", 1).to_descriptor_cmd(), [big], timeout=60)
    assert out.response is None and "resource exhausted" in out.error_text.lower()
    assert "\n" not in out.error_text
    assert server.stats()["in_memory_bytes"] == 0


def test_a_message_above_the_high_watermark_is_refused_unread(server_factory: ServerFactory) -> None:
    """Issue 24, reproduction 1: a message under the message limit but above the high-watermark could
    never be kept; gRPC refuses it from its length prefix, so concurrent ones are not each buffered whole."""
    server = server_factory(high_watermark_bytes=100_000)
    big = rows_batch([(None, i, "x" * 50) for i in range(8_000)])
    out = do_put(server.location, _cmd("t", "A", 1).to_descriptor_cmd(), [big], timeout=60)
    assert out.response is None and "larger than max" in out.error_text, out.error_text
    assert server.stats()["in_memory_bytes"] == 0 and server.stats()["peak_held_bytes"] == 0


def _probe_on(client: flight.FlightClient) -> Exception | None:
    """A probe put on ``client``'s own connection, which stays open; the error, if any."""
    try:
        descriptor = flight.FlightDescriptor.for_command(_cmd("", "A", None).to_descriptor_cmd())
        writer, reader = client.do_put(descriptor, pa.schema([]), options=flight.FlightCallOptions(timeout=PATIENCE_S))
        writer.done_writing()
        reader.read()
        writer.close()
    except flight.FlightError as exc:
        return exc
    return None


def test_a_connection_beyond_the_cap_closes_the_one_idle_longest(server_factory: ServerFactory) -> None:
    """Each open connection costs memory whether or not it puts: their number is capped, and a newcomer
    at the cap takes the place of the connection idle longest (whose client reconnects when it next calls)."""
    server = server_factory(max_connections=2)
    held = [flight.FlightClient(server.location) for _ in range(2)]
    assert [_probe_on(client) for client in held] == [None, None]
    extra = flight.FlightClient(server.location)
    assert _probe_on(extra) is None
    assert server.stats()["connections"] == 2
    assert [_probe_on(client) for client in held] == [None, None]
    assert server.stats()["connections"] == 2
    for client in [*held, extra]:
        client.close()


class _Silent:
    """A request stream that never yields: a call whose reads the test never needs."""

    def __aiter__(self) -> "_Silent":
        return self

    async def __anext__(self) -> bytes:
        raise AssertionError("not read")


class _Sent:
    """A request stream that yields its messages, then ends as grpc's does: alike whether the client
    half-closed it or it broke."""

    def __init__(self, *messages: bytes) -> None:
        self._messages = list(messages)

    def __aiter__(self) -> "_Sent":
        return self

    async def __anext__(self) -> bytes:
        if not self._messages:
            raise StopAsyncIteration
        return self._messages.pop(0)


class _Answerable:
    """A call's context whose stream is still open towards the client (it half-closed its side)."""

    async def send_initial_metadata(self, metadata: Any) -> None:
        pass


class _Broken:
    """A call's context whose stream broke: gRPC fails the batch sending the answer's headers."""

    async def send_initial_metadata(self, metadata: Any) -> None:
        raise grpc.aio.UsageError("the batch failed")


def _read_all(requests: Any, context: Any) -> list[bytes | None]:
    """What a put's thread reads from a call: every message, then its end (read twice)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        call = _Call(loop, requests, context)
        return [call.read() for _ in range(4)]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=PATIENCE_S)
        loop.close()


def test_a_stream_that_broke_after_its_last_message_is_interrupted_not_complete() -> None:
    """Issue 37: grpc ends the request iterator alike on END_STREAM and on RST_STREAM or a lost connection,
    and reports the cancellation apart, sometimes after the put's thread recorded the put (a client killed
    after its last batch was then taken as a whole put).  The end counts only on a stream that still takes
    the answer's headers; the cancellation's timing no longer matters."""
    assert _read_all(_Sent(b"a", b"b"), _Answerable()) == [b"a", b"b", None, None]
    with pytest.raises(InterruptedPut):
        _read_all(_Sent(b"a", b"b"), _Broken())


def test_a_put_whose_call_ended_is_not_recorded_and_a_claimed_one_is_not_ended() -> None:
    """The race the deadline and the put's thread run: whoever comes first decides, and a put whose call
    ended (past its deadline, or its client went away) is never recorded nor read further."""
    loop = asyncio.new_event_loop()
    try:
        claimed = _Call(loop, _Silent(), _Answerable())
        assert claimed.claim()
        assert not claimed.end()  # the deadline passes while the put is being recorded: it runs to its end
        ended = _Call(loop, _Silent(), _Answerable())
        assert ended.end() and not ended.claim()
        with pytest.raises(InterruptedPut):
            ended.read()
    finally:
        loop.close()


def test_a_stop_ends_a_stalled_put_at_its_grace_saying_why(server_factory: ServerFactory) -> None:
    """A stop's grace shorter than the put timeout ends the stalled put at the grace, UNAVAILABLE
    ("shutting down": retry against the successor), not cut later by gRPC's own stop."""
    server = server_factory(put_timeout_s=120, clock=MonotonicClock())
    with ThreadPoolExecutor(1) as pool:
        stalled = pool.submit(do_put, server.location, _cmd("t", "A", None).to_descriptor_cmd(),
                              [rows_batch([(None, 1, "a")])], timeout=60, done=False)
        _wait_for(lambda: server.stats()["running_puts"] == 1)
        server.shutdown(grace_s=0.2)
        outcome = stalled.result()
    assert isinstance(outcome.error, flight.FlightUnavailableError) and "shutting down" in outcome.error_text, outcome


def _counted(server: SyncServer, silent: int, running: int) -> None:
    _wait_for(lambda: (server.stats()["silent_streams"], server.stats()["running_puts"]) == (silent, running))


def test_stream_deadlines_run_on_the_servers_clock_each_from_its_own_event(server_factory: ServerFactory) -> None:
    """Issue 43: a stream's deadlines are the server's clock's, not the event loop's: a tick before each the stream
    is still served, at it it ends naming its setting; the first message is due from the opening, the put from the
    first message (the fourth blind round's p4-put-timeout-from-stream-open counted it from the opening)."""
    tick = 1 / 1024
    server = server_factory(first_message_timeout_s=5.0, put_timeout_s=10.0, clock=ManualClock(wakes_at_deadlines=True))
    clock, address, probe = clock_of(server), f"127.0.0.1:{server.port}", _cmd("", "A", None, ())
    streams = [OpenStream(address, probe) for _ in range(3)]
    silent, early, late = streams
    try:
        _counted(server, 3, 0)
        clock.advance(4.0)
        early.send_first()
        late.send_first()
        _counted(server, 1, 2)
        clock.advance(1.0 - tick)
        assert server.stats()["silent_streams"] == 1
        clock.advance(tick)  # 5 s from the opening
        assert server.stats()["silent_streams"] == 0
        assert silent.outcome().startswith("error DEADLINE_EXCEEDED: No message arrived within "
                                           "--first-message-timeout-s (5 s)")
        clock.advance(9.0 - tick)  # a tick before 10 s from the first message (past 10 s from the opening)
        early.finish()
        assert early.outcome().startswith("accepted=True")
        clock.advance(tick)
        assert late.outcome().startswith("error DEADLINE_EXCEEDED: The put did not complete within --put-timeout-s")
    finally:
        for stream in streams:
            stream.close()
