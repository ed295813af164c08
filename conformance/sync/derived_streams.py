"""A put stream's deadlines at their exact boundaries, each measured from its own event (issue 43; docs/conformance.md,
"The sync checklist", row 72): the first message is due ``first_message_timeout_s`` after the stream opened, the
whole put ``put_timeout_s`` after its first message (``spec.sync.admission.PutStream``), and a stop's grace from the
stop (``PutStream.ending``).  One tick before each a stream is still served; at it, it ends with the spec's error:
DEADLINE_EXCEEDED naming its setting, or UNAVAILABLE (``ServerDraining``) at the grace's end.  The streams are opened on raw gRPC, so
a stream can stay without a message, and the target's clock (capability ``stream-deadlines``) moves only when told.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import grpc
import pyarrow as pa

from conformance import inexact
from conformance.framework import CaseContext, Verdict
from conformance.sync.derived import MS_S, TICK_S, _advance
from spec.clock import after
from spec.sync.flight import DO_PUT_PATH, DescriptorType, FlightDataMessage, PutResultMessage
from spec.sync.messages import SyncCommand, decode_response

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

STREAM_WAIT_S: Final = 20.0
"""How long the case waits, in real seconds, for the target to count the streams it opened (a bound, not a verdict)."""
END_WAIT_S: Final = 10.0
"""How long a stream's end may take, in real seconds, once it is owed: the answer to a completed put, or the error of
a stream whose deadline ``ADVANCE`` reached (which ended it before answering). A bound, never reached when it works."""

_END: Final = None


def first_message(cmd: SyncCommand) -> bytes:
    """A put's first ``FlightData``, as a Flight client sends it: the command's descriptor and an empty schema."""
    schema = pa.schema([]).serialize().to_pybytes()
    header_length = int.from_bytes(schema[4:8], "little")
    message: Any = FlightDataMessage(data_header=schema[8:8 + header_length])
    message.flight_descriptor.type = DescriptorType.CMD
    message.flight_descriptor.cmd = cmd.to_descriptor_cmd()
    return bytes(message.SerializeToString())


def _app_metadata(raw: bytes) -> bytes:
    result: Any = PutResultMessage.FromString(raw)
    return bytes(result.app_metadata)


class OpenStream:
    """A ``DoPut`` stream opened with no message: its first message and its end go when the caller says."""

    def __init__(self, address: str, cmd: SyncCommand) -> None:
        """``address``: HOST:PORT of a server without TLS or token."""
        self._cmd = cmd
        self._sent: queue.Queue[bytes | None] = queue.Queue()
        self._channel = grpc.insecure_channel(address)
        put: grpc.StreamStreamMultiCallable[bytes, bytes] = self._channel.stream_stream(DO_PUT_PATH)
        self._call: Any = put(self._requests(), timeout=STREAM_WAIT_S * 3)

    def _requests(self) -> Iterator[bytes]:
        while (message := self._sent.get()) is not _END:
            assert message is not None
            yield message

    def send_first(self) -> None:
        self._sent.put(first_message(self._cmd))

    def finish(self) -> None:
        """Half-close the stream: the put is complete."""
        self._sent.put(_END)

    def outcome(self) -> str:
        """What the stream ended with: the answer's numbers or ``error <STATUS>: <details>``, or ``still open`` after
        ``END_WAIT_S``."""
        ended: list[str] = []
        reader = threading.Thread(target=lambda: ended.append(self._read_to_end()), daemon=True)
        reader.start()
        reader.join(END_WAIT_S)
        return ended[0] if ended else f"still open {END_WAIT_S:g} s later"

    def _read_to_end(self) -> str:
        try:
            answers = [_app_metadata(raw) for raw in self._call]
        except grpc.RpcError as exc:
            return f"error {exc.code().name}: {exc.details()}"
        if len(answers) != 1:
            return f"{len(answers)} answers"
        r = decode_response(answers[0])
        return f"accepted={r.accepted} memory={r.memory_sequence_number} durable={r.durable_sequence_number}"

    def close(self) -> None:
        self._sent.put(_END)
        self._call.cancel()
        self._channel.close()


def _counts(t: SyncTarget) -> tuple[float, float, int, int]:
    """The target's (first-message timeout, put timeout, streams without a message, puts running) (``STREAMS``)."""
    words = t.control("STREAMS").split()
    try:
        if words[:1] == ["STREAMS"] and len(words) == 5:
            return float(words[1]), float(words[2]), int(words[3]), int(words[4])
    except ValueError:
        pass
    raise RuntimeError(f"'STREAMS' answered {' '.join(words)!r}, not STREAMS <first-message s> <put s> <silent> "
                       "<running>")


def _until_counted(t: SyncTarget, silent: int, running: int) -> bool:
    """Wait (bounded, real time) until the target counts ``silent`` streams without a message and ``running`` puts."""
    deadline = time.monotonic() + STREAM_WAIT_S
    while _counts(t)[2:] != (silent, running):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def stream_deadlines_at_their_bounds(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Two streams opened together without a message: one tick before the first-message timeout one sends its first
    message and is answered; at it the other ends naming ``--first-message-timeout-s``.  Two more opened together
    send their first message half a first-message timeout later: one tick before the put timeout from that message
    one is completed and answered, at it the other ends naming ``--put-timeout-s`` (a put timeout counted from the
    opening ends both earlier)."""
    return _stream_deadlines(t, ctx, TICK_S, None)


def stream_deadlines_at_inexact_instants(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """The same at whole-ms instants a ms apart: the streams opened, and the second two's first messages sent, at the
    first whole-ms instant from where the target's clock stands after which the timeout summed as float seconds lands
    past its instant (:func:`conformance.inexact.sum_late`)."""
    return _stream_deadlines(t, ctx, MS_S, inexact.sum_late)


def _stream_deadlines(t: SyncTarget, ctx: CaseContext, tick: float, aim: Callable[..., int] | None) -> Verdict:
    """:func:`stream_deadlines_at_their_bounds` a ``tick`` either side; with ``aim`` (``(timeout_ms, start, first_ms)``
    -> the whole ms on from ``start`` to the instant to aim at), each pair opened where its deadline's instant is
    the aimed one: the first pair's opening, the second's first messages."""
    from conformance.sync.suite import _cmd, _ids

    first_s, put_s, silent, running = _counts(t)
    if (silent, running) != (0, 0) and not _until_counted(t, 0, 0):
        return Verdict(False, "no stream open before the case", f"STREAMS says {_counts(t)}")
    if aim is not None:
        _advance(t, aim(round(first_s * 1000), t.now, first_ms=0) / 1000)
    origin, path = _ids()
    address = t.location.split("://", 1)[1]
    streams: list[OpenStream] = []
    got: list[str] = []

    def opened(count: int) -> list[OpenStream]:
        pair = [OpenStream(address, _cmd(path, origin, None, ())) for _ in range(count)]
        streams.extend(pair)
        return pair

    def counted(silent: int, running: int, when: str) -> bool:
        if _until_counted(t, silent, running):
            return True
        got.append(f"{when}: STREAMS says {_counts(t)}, not {silent} silent and {running} running")
        return False

    try:
        served, ended = opened(2)
        if not counted(2, 0, "two streams opened"):
            return _verdict(got)
        _advance(t, first_s - tick)
        served.send_first()
        served.finish()
        got.append(f"first message a tick before {first_s:g} s: {served.outcome()}")
        _advance(t, tick)
        got.append(f"no message at {first_s:g} s: {ended.outcome()}")
        if aim is not None:  # the first messages half a first-message timeout after the opening, at the aimed instant
            _advance(t, aim(round(put_s * 1000), after(t.now, first_s / 2), first_ms=0) / 1000)
        served, ended = opened(2)
        if not counted(2, 0, "two more opened"):
            return _verdict(got)
        _advance(t, first_s / 2)
        served.send_first()
        ended.send_first()
        if not counted(0, 2, "both sent their first message"):
            return _verdict(got)
        _advance(t, put_s - tick)
        served.finish()
        got.append(f"completed a tick before {put_s:g} s from its first message: {served.outcome()}")
        _advance(t, tick)
        got.append(f"running at {put_s:g} s from its first message: {ended.outcome()}")
    finally:
        for stream in streams:
            stream.close()
    return _verdict(got)


STOP_GRACE_S: Final = 5.0
"""The grace the case stops the target with (``STOP``): shorter than the put timeout, so the grace ends the put."""


def stop_grace_at_its_bound(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Two puts running when the target stops with a grace: one completed a tick before the grace ends is answered,
    the other, still running at its end, ends UNAVAILABLE (the server is shutting down); then the target restarts."""
    from conformance.sync.suite import _cmd, _ids

    first_s, put_s, silent, running = _counts(t)
    if (silent, running) != (0, 0) and not _until_counted(t, 0, 0):
        return Verdict(False, "no stream open before the case", f"STREAMS says {_counts(t)}")
    if put_s <= STOP_GRACE_S + TICK_S:
        raise RuntimeError(f"the target's put timeout ({put_s:g} s) must be longer than the case's grace")
    origin, path = _ids()
    address = t.location.split("://", 1)[1]
    streams = [OpenStream(address, _cmd(path, origin, None, ())) for _ in range(2)]
    served, ended = streams
    got: list[str] = []
    try:
        for stream in streams:
            stream.send_first()
        if not _until_counted(t, 0, 2):
            return Verdict(False, "two puts running", f"STREAMS says {_counts(t)}")
        t.command(f"STOP {STOP_GRACE_S!r}")
        _advance(t, STOP_GRACE_S - TICK_S)
        served.finish()
        got.append(f"completed a tick before the grace ends: {served.outcome()}")
        _advance(t, TICK_S)
        got.append(f"running at its end: {ended.outcome()}")
    finally:
        for stream in streams:
            stream.close()
        t.restart()
    ok = len(got) == 2 and got[0].split(": ", 1)[1].startswith("accepted=True") and got[1].split(": ", 1)[1].startswith(
        "error UNAVAILABLE")
    return Verdict(ok, f"a stop with a grace of {STOP_GRACE_S:g} s: a put completed a tick before its end answered; "
                   "one running at its end UNAVAILABLE", "; ".join(got))


_EXPECTED: Final = (("accepted=True",), ("error DEADLINE_EXCEEDED", "--first-message-timeout-s"), ("accepted=True",),
                    ("error DEADLINE_EXCEEDED", "--put-timeout-s"))
"""What each of the four streams must end with: the answer's start, or the status and the setting named."""


def _verdict(got: list[str]) -> Verdict:
    ok = len(got) == len(_EXPECTED) and all(
        g.split(": ", 1)[1].startswith(start) and all(w in g for w in rest) for g, (start, *rest) in zip(got, _EXPECTED))
    return Verdict(ok, "a tick before the first-message timeout: answered; at it: DEADLINE_EXCEEDED naming "
                   "--first-message-timeout-s; a tick before the put timeout from the first message: answered; at it: "
                   "DEADLINE_EXCEEDED naming --put-timeout-s", "; ".join(got))
