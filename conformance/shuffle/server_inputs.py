"""The connection-bound requests of the shuffle input corpus (``vectors/inputs.json``, capability
``inputs-admission``), drawn from a seed: the server policies of :mod:`spec.admission`, :mod:`spec.departure` and
:mod:`spec.http2_watch` walked step by step (a trace is one channel and never fills a server). The requests' form
and the spec's answers are :mod:`conformance.connection_policies`'.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Final

from conformance.connection_policies import STEPS
from spec.admission import ConnectionUse
from spec.http2_watch import ACK, DATA, END_STREAM, HEADERS, PADDED, PREFACE, RST_STREAM, SETTINGS

FUNCTIONS: Final = tuple(STEPS)

_BOUNDS: Final = (0, 1, 1, 2, 2, 2, 3, 3, 2**31 - 1, 2**31, -1)
_TIMES: Final = (0.0, -0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1.0, 1.0)


def _steps(rng: random.Random, function: str, timeout: float, size: int) -> list[list[Any]]:
    """Up to 14 steps on peers 0..3, time moving forward by 0, the timeout and a quarter either side."""
    now, steps = 0.0, []
    for _ in range(rng.randint(1, 14)):
        name = rng.choice(STEPS[function] + STEPS[function][:1] * 3 + STEPS[function][1:2])  # arrivals, proofs
        peer = rng.randint(0, 3)
        now += rng.choice((0.0, 0.0, 0.25, timeout, max(timeout - 0.25, 0.0), timeout + 0.25))
        if name == "expired":
            steps.append([name, now])
        elif name == "accepted" and function == "strangers":
            steps.append([name, peer, now])
        elif name == "leaving":
            queued = rng.choice((0, 1, size, size - 1, size + 1, 2**31 - 1, 2**31))
            steps.append([name, peer, max(queued, 0), now])
        elif name == "using":
            steps.append([name, peer, rng.choice([u.name for u in ConnectionUse])])
        elif name in ("deadline", "len"):
            steps.append([name])
        else:
            steps.append([name, peer])
    return steps


def _server_request(rng: random.Random) -> dict[str, Any]:
    function = rng.choice(FUNCTIONS[:3])  # the policies; the watch has its own shape
    size, timeout = rng.choice(_BOUNDS), rng.choice(_TIMES)
    request: dict[str, Any] = {"function": function}
    if function == "strangers":
        request.update(maxPending=size, bindTimeoutS=timeout)
    elif function == "departures":
        request.update(maxBytes=size, lingerS=timeout)
    else:
        request.update(maxConnections=size)
    request["steps"] = _steps(rng, function, timeout, size)
    if function == "strangers" and 0 < size <= 3 and rng.random() < 0.6:
        request["steps"][:0] = _full_house(rng, size)
    elif function == "connections" and 0 < size <= 3 and rng.random() < 0.6:
        request["steps"][:0] = _full_table(rng, size)
    return request


def _full_house(rng: random.Random, size: int) -> list[list[Any]]:
    """Every place held, some strangers proven (one perhaps closed and back), then a newcomer: who is evicted."""
    steps: list[list[Any]] = [["accepted", peer, 0.0] for peer in range(size)]
    for peer in rng.sample(range(size), rng.randint(1, size)):
        steps.append(["proven", peer])
    if rng.random() < 0.4:
        steps += [["closed", 0], ["accepted", 0, 0.0]]
    steps.append(["accepted", rng.choice((size, size, 0, size - 1)), 0.0])
    return steps


def _full_table(rng: random.Random, size: int) -> list[list[Any]]:
    """Every connection held, some entering a use (perhaps the one they are in: no younger for it), then a newcomer:
    whom it evicts, in which rank, the oldest of it."""
    steps: list[list[Any]] = [["accepted", peer] for peer in range(size)]
    for peer in rng.sample(range(size), rng.randint(1, size)):
        steps.append(["using", peer, rng.choice(("HANDSHAKE", "HANDSHAKE", "IDLE", "WAITING", "ENDING", "BUSY"))])
    steps.append(["accepted", size])
    return steps


def _frame(kind: int, flags: int, stream: int, payload: bytes, length: int | None = None) -> bytes:
    """An HTTP/2 frame: its 9-byte header (``length`` when it lies about its payload) and the payload."""
    size = len(payload) if length is None else length
    return size.to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload


def _grpc_data(rng: random.Random, stream: int) -> list[bytes]:
    """A stream's first gRPC message in one or two DATA frames: its 5-byte prefix, then as many bytes as it
    announces, one fewer or one more; now and then padded, or cut inside the prefix."""
    announced = rng.choice((0, 0, 1, 2, 3, 2**24 - 1, 2**24, 2**32 - 1))
    body = bytes(max(min(announced, 3) + rng.choice((0, 0, -1, 1)), 0))
    message = bytes((rng.choice((0, 0, 1)),)) + announced.to_bytes(4, "big") + body
    flags = PADDED if rng.random() < 0.1 else rng.choice((0, 0, END_STREAM))
    if rng.random() < 0.4:
        cut = rng.choice((1, 4, 5, 6, len(message) - 1, len(message)))
        return [_frame(DATA, flags, stream, message[:cut]), _frame(DATA, 0, stream, message[cut:])]
    return [_frame(DATA, flags, stream, message)]


def _client_frames(rng: random.Random) -> list[bytes]:
    """What a client sends after its preface: SETTINGS and its ack, HEADERS opening streams (0, odd ids, a
    repeated one, the reserved bit set), their first messages, RST_STREAM, and other frames' payloads skipped."""
    frames = [_frame(SETTINGS, 0, 0, bytes(rng.choice((0, 6))))]
    frames += [_frame(SETTINGS, ACK, 0, b"")] if rng.random() < 0.7 else []
    for _ in range(rng.randint(1, 6)):
        stream = rng.choice((1, 1, 3, 3, 5, 0, 2**31 + 1, 2**24 + 1, 2**31 - 1))
        shape = rng.choice(("ack", "open", "open", "open", "open", "data", "data", "data", "reset", "ping", "lying",
                            "other"))
        if shape == "ack":
            frames.append(_frame(SETTINGS, rng.choice((ACK, ACK, 0, 0xFF)), 0, b""))
        elif shape == "open":
            frames.append(_frame(HEADERS, rng.choice((4, 5)), stream, bytes(rng.choice((0, 3)))))
            frames += _grpc_data(rng, stream & 0x7FFFFFFF) if rng.random() < 0.6 else []
        elif shape == "data":
            frames += _grpc_data(rng, stream & 0x7FFFFFFF)
        elif shape == "reset":
            frames.append(_frame(RST_STREAM, 0, stream, bytes(4)))
        elif shape == "ping":
            frames.append(_frame(6, rng.choice((0, ACK)), 0, bytes(8)))
        elif shape == "other":  # PRIORITY, PUSH_PROMISE, WINDOW_UPDATE, CONTINUATION on a stream: nothing changes
            frames.append(_frame(rng.choice((2, 5, 8, 9)), 0, stream, bytes(4)))
        else:  # a header announcing more payload than follows: the rest of the bytes are skipped
            frames.append(_frame(rng.choice((DATA, HEADERS)), 0, stream, bytes(2), length=rng.choice((3, 9, 10))))
    return frames


def _server_frames(rng: random.Random) -> list[bytes]:
    """What a server sends: SETTINGS, its ack, response HEADERS and DATA, trailers (END_STREAM), RST_STREAM."""
    frames = [_frame(SETTINGS, 0, 0, b"")] if rng.random() < 0.7 else []
    for _ in range(rng.randint(0, 4)):
        stream = rng.choice((1, 1, 3, 5, 0))
        kind = rng.choice((HEADERS, HEADERS, DATA, RST_STREAM, SETTINGS))
        flags = rng.choice((END_STREAM, END_STREAM, 0, 4, END_STREAM | 4, PADDED | END_STREAM))
        frames.append(_frame(kind, flags, stream, bytes(rng.choice((0, 4)))))
    return frames


def _preface(rng: random.Random) -> bytes:
    """The client's preface: whole, cut short, or with one byte wrong (the connection is malformed)."""
    shape = rng.choice(("whole", "whole", "whole", "whole", "cut", "wrong"))
    if shape == "cut":
        return PREFACE[:rng.choice((0, 1, len(PREFACE) - 1))]
    if shape == "wrong":
        at = rng.choice((0, 5, len(PREFACE) - 1))
        return PREFACE[:at] + bytes((PREFACE[at] ^ 1,)) + PREFACE[at + 1:]
    return PREFACE


def _pieces(rng: random.Random, data: bytes) -> list[bytes]:
    """Bytes as relayed: whole, frame by frame, or cut at random points (inside a header or a prefix)."""
    if len(data) < 2 or rng.random() < 0.3:
        return [data]
    cuts = sorted(set(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 5)))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def _call(rng: random.Random, stream: int) -> list[tuple[str, bytes]]:
    """One gRPC call on ``stream`` as a relay sees it: HEADERS, the first message (whole, a byte short or past, in one
    or two DATA), perhaps more DATA and frames of other kinds, the server's response headers, then its end: the
    server's trailers or END_STREAM, a RST_STREAM from either side, or none (the call stays open)."""
    events = [("from_client", _frame(HEADERS, 4, stream, bytes(3)))]
    events += [("from_client", frame) for frame in _grpc_data(rng, stream)]
    if rng.random() < 0.4:  # more data once the first message came
        events.append(("from_client", _frame(DATA, 0, stream, bytes(rng.choice((1, 5, 9))))))
    if rng.random() < 0.3:  # PRIORITY, PUSH_PROMISE, WINDOW_UPDATE, CONTINUATION: nothing changes
        events.append(("from_client", _frame(rng.choice((2, 5, 8, 9)), 0, stream, bytes(4))))
    if rng.random() < 0.6:  # response headers (or data, PRIORITY, WINDOW_UPDATE), without END_STREAM
        events.append(("from_server", _frame(rng.choice((HEADERS, HEADERS, DATA, 2, 8)), 4, stream, bytes(2))))
    end = rng.choice(("trailers", "trailers", "server-reset", "client-reset", "data-end", "open"))
    if rng.random() < 0.2:  # the client's HEADERS again on the open stream (trailers): it stays the one stream
        events.append(("from_client", _frame(HEADERS, rng.choice((4, END_STREAM | 4)), stream, bytes(2))))
    if rng.random() < 0.2:  # the server's frame of another kind with the END_STREAM bit set: no end for it
        events.append(("from_server", _frame(rng.choice((2, 6, 8, 9)), END_STREAM, stream, bytes(4))))
    if end == "trailers":
        events.append(("from_server", _frame(HEADERS, END_STREAM | 4, stream, bytes(2))))
    elif end == "data-end":
        events.append(("from_server", _frame(DATA, END_STREAM, stream, bytes(1))))
    elif end != "open":
        events.append(("from_server" if end == "server-reset" else "from_client", _frame(RST_STREAM, 0, stream,
                                                                                         bytes(4))))
    return events


def _calls(rng: random.Random) -> dict[str, Any]:
    """A well-formed connection: the handshake, then one to three calls, the next often begun before the last ends,
    each event relayed whole or cut."""
    events = [("from_client", PREFACE + _frame(SETTINGS, 0, 0, b"")), ("from_server", _frame(SETTINGS, 0, 0, b""))]
    events += [("from_client", _frame(SETTINGS, ACK, 0, b""))] if rng.random() < 0.9 else []
    calls = [_call(rng, stream) for stream in rng.sample((1, 3, 5, 2**24 + 1), rng.randint(1, 3))]
    while calls:
        call = rng.choice(calls) if rng.random() < 0.4 else calls[0]
        events.append(call.pop(0))
        if not call:
            calls.remove(call)
    steps = [[side, piece.hex()] for side, data in events
             for piece in (_pieces(rng, data) if rng.random() < 0.2 else [data])]
    return {"function": "watch", "maxStreams": rng.choice((1, 2, 2, 3, 100)), "steps": steps}


def _watch_request(rng: random.Random) -> dict[str, Any]:
    """A gRPC connection as a relay sees it: calls in order (:func:`_calls`), or the client's bytes and the
    server's drawn apart and interleaved, each cut anywhere."""
    if rng.random() < 0.5:
        return _calls(rng)
    client = _pieces(rng, _preface(rng) + b"".join(_client_frames(rng)))
    server = _pieces(rng, b"".join(_server_frames(rng)))
    steps: list[list[Any]] = []
    while client or server:
        side = client if client and (not server or rng.random() < 0.6) else server
        steps.append(["from_client" if side is client else "from_server", side.pop(0).hex()])
    return {"function": "watch", "maxStreams": rng.choice((0, 1, 1, 2, 2, 3, 100)), "steps": steps}


SHAPES: Final[tuple[tuple[Callable[[random.Random], dict[str, Any]], int], ...]] = (
    (_server_request, 6), (_watch_request, 4))
"""The connection-bound request shapes with their weights among all the inputs' shapes."""
