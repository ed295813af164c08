"""The sync server's connection table at its bound (``spec.admission.ConnectionAdmission``, capability ``connections``;
issue 43): which connection a newcomer at ``max_connections`` evicts, by the use each connection is in.

Each scenario fills the table with connections in given uses, in a given order, on raw HTTP/2 (so a connection can
stay in its handshake, idle, with a stream waiting for its first message, or carrying a request): every pair of
evictable uses in either order of age, a use entered anew (the youngest of its rank: idle after a put answered, idle
once the client reset its waiting stream), the same use reported again (a PING, a first message a byte short, the
SETTINGS of a handshake without their ACK: each keeps its place), the table one under its bound.
Then a newcomer (a probe over Flight) is answered, and each connection is asked whether it is still held (a PING
answered, or the end of its stream). The connection evicted, or none, is what the spec's own table says when told the
same events in the same order: the answer is never typed by hand.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from conformance.framework import CaseContext, Verdict
from conformance.sync.derived_streams import first_message
from spec.admission import ConnectionAdmission, ConnectionUse
from spec.http2_watch import ACK, DATA, END_STREAM, HEADERS, PREFACE, RST_STREAM, SETTINGS
from spec.sync.flight import DO_PUT_PATH

if TYPE_CHECKING:
    from conformance.sync.suite import SyncTarget

PING: Final = 0x6
CANCEL: Final = 0x8
"""RST_STREAM's error code CANCEL (RFC 9113 7)."""
END_HEADERS: Final = 0x4
ANSWER_WAIT_S: Final = 5.0
"""How long, in real seconds, a connection may take to answer a PING or show its end, whatever other frames it sends
meanwhile (a bound, not a verdict)."""
H, I, W, B = ConnectionUse.HANDSHAKE, ConnectionUse.IDLE, ConnectionUse.WAITING, ConnectionUse.BUSY
STEPS: Final = {H: (), I: (I,), W: (I, W), B: (I, W, B)}
"""The uses a connection goes through to reach its own (what the spec's table is told, in order); the front reports
a connection's use whenever it relays a frame, so a PING answered tells the table the same use again."""


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, its name new (RFC 7541 6.2.2), both under 127 bytes."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


class RawConnection:
    """A client connection written frame by frame: it enters each use only when told."""

    def __init__(self, address: tuple[str, int], answer_wait_s: float = ANSWER_WAIT_S) -> None:
        self.address = address
        self.answer_wait_s = answer_wait_s
        self.sock = socket.create_connection(address, timeout=answer_wait_s)
        self._pending = b""
        self.pinged = False
        self._read_frame()  # the server's SETTINGS: the target has taken the connection

    def _read_frame(self) -> tuple[int, int, int] | None:
        """The next frame's (kind, flags, stream) from the server; None at the connection's end."""
        while len(self._pending) < 9 or len(self._pending) < 9 + int.from_bytes(self._pending[:3], "big"):
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self._pending += chunk
        length = int.from_bytes(self._pending[:3], "big")
        kind, flags, stream = self._pending[3], self._pending[4], int.from_bytes(self._pending[5:9], "big") & 0x7FFFFFFF
        self._pending = self._pending[9 + length:]
        return kind, flags, stream

    def handshake(self) -> None:
        self.sock.sendall(PREFACE + _frame(SETTINGS, 0, 0) + _frame(SETTINGS, ACK, 0))

    def open_stream(self, stream: int) -> None:
        host, port = self.address
        headers = b"".join(_literal(n, v) for n, v in (
            (":method", "POST"), (":scheme", "http"), (":path", DO_PUT_PATH), (":authority", f"{host}:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers")))
        self.sock.sendall(_frame(HEADERS, END_HEADERS, stream, headers))

    def send_request(self, stream: int, message: bytes, end: bool = False, short: bool = False) -> None:
        """The stream's first gRPC message, whole (and the stream's end: a complete put), or ``short`` of its last
        byte (the stream still waits for it)."""
        whole = b"\x00" + len(message).to_bytes(4, "big") + message
        self.sock.sendall(_frame(DATA, END_STREAM if end else 0, stream, whole[:-1] if short else whole))

    def reset(self, stream: int) -> None:
        """RST_STREAM CANCEL: the client gives the stream up."""
        self.sock.sendall(_frame(RST_STREAM, 0, stream, CANCEL.to_bytes(4, "big")))

    def settings_without_ack(self) -> None:
        """The preface and SETTINGS, but not the ACK of the server's: the handshake is not done."""
        self.sock.sendall(PREFACE + _frame(SETTINGS, 0, 0))

    def _read_until(self, wanted: Callable[[int, int, int], bool], what: str) -> bool:
        """Read frames until one is ``wanted`` (True) or the connection ends (False), all within one
        ``answer_wait_s``: a target that keeps sending other frames fails the case with a ``TimeoutError`` naming
        ``what``, instead of holding it until the runner's case timeout."""
        deadline = time.monotonic() + self.answer_wait_s
        others = 0
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                if (frame := self._read_frame()) is None:
                    return False
                if wanted(*frame):
                    return True
                others += 1
        except TimeoutError:
            pass
        raise TimeoutError(f"no {what} within {self.answer_wait_s:g} s ({others} other frames read meanwhile)")

    def until_stream_ended(self, stream: int) -> bool:
        """Read until the server ends ``stream`` (its trailers); False at the connection's end."""
        return self._read_until(
            lambda kind, flags, at: at == stream and kind in (HEADERS, DATA) and bool(flags & END_STREAM),
            f"end of stream {stream}")

    def round_trip(self) -> bool:
        """A PING answered: the target has seen every frame sent before it; False at the connection's end."""
        self.sock.sendall(_frame(PING, 0, 0, b"roundtrp"))
        self.pinged = True
        return self._read_until(lambda kind, flags, _: kind == PING and bool(flags & ACK), "PING ACK")

    def held(self) -> bool:
        """Whether the target still holds the connection (a connection still in its handshake finishes it first); a
        connection neither answering nor ending within the wait raises ``TimeoutError`` (neither held nor closed)."""
        try:
            if not self.pinged:
                self.handshake()
            return self.round_trip()
        except TimeoutError:
            raise
        except OSError:
            return False

    def close(self) -> None:
        self.sock.close()


@dataclass(frozen=True)
class ConnectionScenario:
    """Connections opened in order, each brought to its use (``short``: the one whose waiting stream has its first
    message but its last byte), then ``after``: what one of them does once all were opened, in order (a key of
    :data:`AFTER` and the connection)."""

    label: str
    uses: tuple[ConnectionUse, ...]
    after: tuple[tuple[str, int], ...] = ()
    short: int | None = None


AFTER: Final = {"renew": (W, B, I, I), "ping": (), "cancel": (I, I), "settings": ()}
"""What each follow-up tells the spec's table besides the use the connection holds again (its PING answered): a put
on a new stream answered (renew: it is idle anew), a PING, the waiting stream reset by the client (cancel), the
preface and SETTINGS of an unfinished handshake without their ACK (settings: still in its handshake)."""


def scenarios(limit: int, slots: int) -> list[ConnectionScenario]:
    """Every pair of evictable uses in either order of age, one carrying a request older than one waiting, the rest
    carrying requests (a slot left for the newcomer's probe) or waiting, the table one under its bound, a use entered
    anew (idle after a request ended, waiting no more once the client reset its stream), the same use reported again
    (a PING; a first message a byte short; a handshake's SETTINGS without their ACK); each at ``limit`` connections."""
    def filled(*front: ConnectionUse) -> tuple[ConnectionUse, ...]:
        rest = limit - len(front)
        busy = max(min(slots - 1 - sum(u is B for u in front), rest), 0)
        return (*front, *(B,) * busy, *(W,) * (rest - busy))

    out = []
    for older, younger in ((H, I), (I, H), (H, W), (W, H), (I, W), (W, I)):
        out.append(ConnectionScenario(f"{older.name.lower()} older than {younger.name.lower()}",
                                      filled(older, younger)))
    out.append(ConnectionScenario("waiting only: the oldest", filled(W, W)))
    out.append(ConnectionScenario("carrying a request older than waiting", filled(B, W)))
    out.append(ConnectionScenario("one under the bound", filled(H, I)[:limit - 1]))
    out.append(ConnectionScenario("idle entered anew after a handshake", filled(I, H), (("renew", 0),)))
    out.append(ConnectionScenario("idle reported again by the older", filled(I, I), (("ping", 0),)))
    out.append(ConnectionScenario("idle anew after its request ended, beside waiting", filled(I, W), (("renew", 0),)))
    out.append(ConnectionScenario("waiting stream reset by the younger", filled(W, W), (("cancel", 1),)))
    out.append(ConnectionScenario("waiting a byte short of its first message, the older", filled(W, W), short=0))
    out.append(ConnectionScenario("handshake sent without its ACK after a younger idle", filled(H, I),
                                  (("settings", 0),)))
    return out


def expected_eviction(limit: int, scenario: ConnectionScenario) -> tuple[bool, int | None]:
    """The spec's table told the scenario's events: whether the newcomer is admitted, and whom it evicts."""
    table: ConnectionAdmission[int] = ConnectionAdmission(limit)
    for i, use in enumerate(scenario.uses):
        table.accepted(i)
        for step in (*STEPS[use], use):  # then the same again: its PING answered
            table.using(i, step)
    for action, i in scenario.after:
        for step in AFTER[action] or (scenario.uses[i],):
            table.using(i, step)
    verdict = table.accepted(-1)
    return verdict.admitted, verdict.evicted


def _open(address: tuple[str, int], use: ConnectionUse, cmd_bytes: bytes, short: bool = False) -> RawConnection:
    conn = RawConnection(address)
    if use is not H:
        conn.handshake()
    if use in (W, B):
        conn.open_stream(1)
    if use is B:
        conn.send_request(1, cmd_bytes)
    if short:
        conn.send_request(1, cmd_bytes, short=True)
    if use is not H and not conn.round_trip():
        raise ConnectionError(f"a connection brought to {use.name} was closed")
    return conn


def connection_ranks_at_their_bound(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Each scenario at the bound: the probe of a newcomer answered, and the one connection the spec's table evicts
    (or none) is the one the target closed."""
    from conformance.sync.derived_axes import _connections, _silent, _slots, _until_held, _until_in_use
    from conformance.sync.suite import _cmd, _ids, _numbers

    limit = _connections(t)[0]
    slots = int(t.control("SLOTS").split()[1])
    host, port = t.location.split("://", 1)[1].rsplit(":", 1)
    address = (host, int(port))
    want, got = [], []
    for scenario in scenarios(limit, slots):
        admitted, evicted = expected_eviction(limit, scenario)
        want.append(f"{scenario.label}: {'answered' if admitted else 'refused'}, evicted {evicted}")
        # Connections of earlier cases go first: a table full of silent ones evicts them, then those are closed.
        crowd = [sock for _ in range(limit) if (sock := _silent(t)) is not None]
        for sock in crowd:
            sock.close()
        # The puts the last scenario's connections carried give their slots back only once their threads end, which
        # may be after the connections are gone: a slot still held would refuse this scenario's puts as busy.
        if not (_until_held(t, 0) and _until_in_use(t, 0)):
            got.append(f"{scenario.label}: {_connections(t)[1]} connections and {_slots(t)[1]} puts still held "
                       "before it")
            continue
        origin, path = _ids()
        conns: list[RawConnection] = []
        try:
            for i, use in enumerate(scenario.uses):
                conns.append(_open(address, use, first_message(_cmd(path, f"{origin}-{i}", None, ())),
                                   short=i == scenario.short))
            for action, i in scenario.after:
                if action == "renew":
                    conns[i].open_stream(3)
                    conns[i].send_request(3, first_message(_cmd(path, origin, None, ())), end=True)
                    conns[i].until_stream_ended(3)
                elif action == "cancel":
                    conns[i].reset(1)
                elif action == "settings":
                    conns[i].settings_without_ack()
                conns[i].round_trip()
            answer = _numbers(t.put(ctx, _cmd(path, origin, None, ())))
            closed = [i for i, conn in enumerate(conns) if not conn.held()]
        except OSError as exc:
            got.append(f"{scenario.label}: {type(exc).__name__}: {exc}")
            continue
        finally:
            for conn in conns:
                conn.close()
        state = "answered" if answer.startswith("accepted=True") else answer
        got.append(f"{scenario.label}: {state}, evicted {closed[0] if len(closed) == 1 else closed or None}")
    return Verdict(want == got, "; ".join(want), "; ".join(got))
