"""TCP connections out of captured packets: both byte streams of each, in order, once.

A passive observer sees segments as the wire carried them: out of order, retransmitted, overlapping
(a retransmission may cover more or less than the original). Each direction keeps the next sequence
number it expects and holds early segments until the gap before them fills; bytes already delivered
are never delivered again, and a copy whose bytes differ from the ones delivered (or held) for the same
sequence numbers is a conflict, reported with its sequence number: the first copy is used, so the
verdict on that connection rests on bytes another copy contradicts. What a stranger's capture can make
this hold is bounded: segments too far ahead are dropped, a direction that holds too much is marked as
having a gap (the capture missed bytes) and delivers nothing more, and at most ``max_connections`` are
tracked at once: beyond that the oldest half-open one (no byte carried yet) is evicted, or, with none,
the new connection is ignored; both are counted, never silent.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Callable, Final, Iterable, Protocol

from conformance.capture import (
    LINKTYPE_ETHERNET,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    Packet,
)

Address = tuple[str, int]

SEQ_SPACE: Final = 2**32
MAX_AHEAD: Final = 16 * 1024 * 1024
"""Bytes beyond the next expected one a segment may start at and still be held."""
MAX_HELD: Final = 32 * 1024 * 1024
"""Out-of-order bytes one direction may hold; beyond that the capture is taken to have missed bytes."""
MAX_CONNECTIONS: Final = 65_536
"""Connections tracked at once (by default); then half-open ones are evicted, or new ones ignored."""
MAX_CONFLICTS: Final = 64
"""Conflicts recorded per direction (one is enough to distrust its verdict)."""
COMPARED: Final = 256 * 1024
"""Delivered bytes each direction keeps to compare retransmissions with (far more than a TCP window holds
unacknowledged on the links watched)."""

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
_ETHERTYPE_IPV4, _ETHERTYPE_IPV6, _ETHERTYPE_VLAN = 0x0800, 0x86DD, 0x8100
_TCP: Final = 6


@dataclass(frozen=True, slots=True)
class Segment:
    """One TCP segment as captured."""

    time: float
    src: Address
    dst: Address
    seq: int
    flags: int
    payload: bytes


def segment_of(packet: Packet) -> Segment | None:
    """The TCP segment a link-layer frame carries over IPv4 or IPv6; None for anything else."""
    data = packet.data
    if packet.linktype == LINKTYPE_ETHERNET:
        ethertype, offset = _ethernet(data)
    elif packet.linktype == LINKTYPE_LINUX_SLL:
        ethertype, offset = (struct.unpack_from(">H", data, 14)[0], 16) if len(data) >= 16 else (0, 0)
    elif packet.linktype == LINKTYPE_LINUX_SLL2:
        ethertype, offset = (struct.unpack_from(">H", data, 0)[0], 20) if len(data) >= 20 else (0, 0)
    elif packet.linktype == LINKTYPE_NULL:
        family = struct.unpack_from("<I", data)[0] if len(data) >= 4 else 0
        ethertype, offset = (_ETHERTYPE_IPV4 if family == 2 else _ETHERTYPE_IPV6, 4)
    elif packet.linktype == LINKTYPE_RAW:
        version = data[0] >> 4 if data else 0
        ethertype, offset = (_ETHERTYPE_IPV4 if version == 4 else _ETHERTYPE_IPV6, 0)
    else:
        return None
    if ethertype == _ETHERTYPE_IPV4:
        return _ipv4(packet.time, data, offset)
    if ethertype == _ETHERTYPE_IPV6:
        return _ipv6(packet.time, data, offset)
    return None


def _ethernet(data: bytes) -> tuple[int, int]:
    if len(data) < 14:
        return 0, 0
    ethertype, offset = struct.unpack_from(">H", data, 12)[0], 14
    while ethertype == _ETHERTYPE_VLAN and len(data) >= offset + 4:
        ethertype, offset = struct.unpack_from(">H", data, offset + 2)[0], offset + 4
    return ethertype, offset


def _ipv4(time: float, data: bytes, offset: int) -> Segment | None:
    if len(data) < offset + 20:
        return None
    header_length = (data[offset] & 0x0F) * 4
    total_length, fragment = struct.unpack_from(">H2xH", data, offset + 2)
    if data[offset + 9] != _TCP or fragment & 0x3FFF:  # fragments are not reassembled
        return None
    end = offset + total_length if total_length else len(data)  # 0: segmentation offload, whole frame
    src = str(ipaddress.IPv4Address(data[offset + 12:offset + 16]))
    dst = str(ipaddress.IPv4Address(data[offset + 16:offset + 20]))
    return _tcp(time, data, offset + header_length, min(end, len(data)), src, dst)


def _ipv6(time: float, data: bytes, offset: int) -> Segment | None:
    if len(data) < offset + 40 or data[offset + 6] != _TCP:  # extension headers are not followed
        return None
    (payload_length,) = struct.unpack_from(">H", data, offset + 4)
    src = str(ipaddress.IPv6Address(data[offset + 8:offset + 24]))
    dst = str(ipaddress.IPv6Address(data[offset + 24:offset + 40]))
    return _tcp(time, data, offset + 40, min(offset + 40 + payload_length, len(data)), src, dst)


def _tcp(time: float, data: bytes, offset: int, end: int, src: str, dst: str) -> Segment | None:
    if end < offset + 20:
        return None
    sport, dport, seq, _ack, data_offset, flags = struct.unpack_from(">HHIIBB", data, offset)
    start = offset + (data_offset >> 4) * 4
    if start > end:
        return None
    return Segment(time, (src, sport), (dst, dport), seq, flags, bytes(data[start:end]))


@dataclass(slots=True)
class Direction:
    """One direction's reassembly: the next sequence number expected and the segments held before it."""

    next_seq: int | None = None
    held: dict[int, bytes] = field(default_factory=dict)
    held_bytes: int = 0
    fin_seq: int | None = None
    gap: bool = False
    """The capture missed bytes of this direction: nothing after them can be delivered."""
    recent: bytearray = field(default_factory=bytearray)
    """The last delivered bytes (up to 2 x COMPARED), ending at ``next_seq``."""
    conflicts: list[int] = field(default_factory=list)
    """Sequence numbers where a copy's bytes differed from the first copy's (the first of each copy)."""

    def accept(self, segment: Segment) -> bytes:
        """The bytes ``segment`` makes contiguous, in order (empty when it adds nothing new)."""
        seq = segment.seq
        if segment.flags & SYN:
            self.next_seq = (seq + 1) % SEQ_SPACE
            seq = (seq + 1) % SEQ_SPACE
        elif self.next_seq is None:
            if not segment.payload and not segment.flags & FIN:
                return b""
            self.next_seq = seq
        if segment.flags & FIN:
            self.fin_seq = (seq + len(segment.payload)) % SEQ_SPACE
        if not segment.payload or self.gap:
            return b""
        ahead = (seq - self.next_seq) % SEQ_SPACE
        if ahead and ahead < SEQ_SPACE // 2:
            held = self.held.get(seq, b"")
            self._compare(seq, held, segment.payload)
            if ahead <= MAX_AHEAD and len(segment.payload) > len(held):
                self.held_bytes += len(segment.payload) - len(held)
                self.held[seq] = segment.payload
                if self.held_bytes > MAX_HELD:
                    self.gap, self.held, self.held_bytes = True, {}, 0
            return b""
        out = [self._take(seq, segment.payload)]
        while self.held:
            usable = [s for s in self.held if not 0 < (s - self.next_seq) % SEQ_SPACE < SEQ_SPACE // 2]
            if not usable:
                break
            for s in usable:
                payload = self.held.pop(s)
                self.held_bytes -= len(payload)
                out.append(self._take(s, payload))
        return b"".join(out)

    def _take(self, seq: int, payload: bytes) -> bytes:
        """The part of a segment at or before ``next_seq`` that is new, advancing ``next_seq`` past it."""
        assert self.next_seq is not None
        behind = (self.next_seq - seq) % SEQ_SPACE
        if behind:
            known = len(self.recent)
            skipped = max(0, behind - known)  # older than the bytes kept: not compared
            self._compare((seq + skipped) % SEQ_SPACE, self.recent[known - behind + skipped:],
                          payload[skipped:behind])
        if behind >= len(payload):
            return b""
        fresh = payload[behind:]
        self.next_seq = (self.next_seq + len(fresh)) % SEQ_SPACE
        self.recent += fresh
        if len(self.recent) > 2 * COMPARED:
            del self.recent[:len(self.recent) - COMPARED]
        return fresh

    def _compare(self, seq: int, first: bytes | bytearray, again: bytes) -> None:
        """Two copies of the bytes from ``seq`` on: the first byte where they differ is a conflict."""
        common = min(len(first), len(again))
        if first[:common] != again[:common] and len(self.conflicts) < MAX_CONFLICTS:
            differs = next(i for i in range(common) if first[i] != again[i])
            self.conflicts.append((seq + differs) % SEQ_SPACE)

    @property
    def finished(self) -> bool:
        """Every byte up to the FIN was delivered."""
        return self.fin_seq is not None and (self.gap or self.next_seq == self.fin_seq)


@dataclass(frozen=True, slots=True)
class Flow:
    """A connection's two ends: ``client`` opened it (sent the SYN) when ``handshake_seen``, otherwise
    it is the end seen sending first."""

    client: Address
    server: Address
    handshake_seen: bool


class StreamSink(Protocol):
    """What a connection's bytes go to (the protocol observer)."""

    def data(self, from_client: bool, data: bytes, time: float) -> None: ...

    def closed(self, time: float, reset: bool, gap: bool) -> None:
        """Both directions ended (FIN each way or RST); ``gap``: the capture missed bytes."""


@dataclass(slots=True)
class _Connection:
    flow: Flow
    sink: StreamSink
    directions: tuple[Direction, Direction] = field(default_factory=lambda: (Direction(), Direction()))


Conflict = Callable[[Flow, Address, int], None]
"""Told of a conflicting copy: the connection, the end that sent it, the sequence number where it differs."""


class TcpTracker:
    """Feeds each accepted connection's in-order bytes to a sink made for it, and tells it when it ends."""

    def __init__(self, sink_for: Callable[[Flow], StreamSink], accept: Callable[[Address, Address], bool],
                 conflict: Conflict = lambda flow, sender, seq: None, max_connections: int = MAX_CONNECTIONS) -> None:
        self._sink_for = sink_for
        self._accept = accept
        self._conflict = conflict
        self._max_connections = max_connections
        self._connections: dict[tuple[Address, Address], _Connection] = {}
        self._half_open: dict[tuple[Address, Address], None] = {}
        """Tracked connections that have carried no byte yet, oldest first: the first evicted at the cap."""
        self.evicted = 0
        """Half-open connections dropped to make room at the cap."""
        self.ignored = 0
        """New connections not tracked because the cap was reached and none was half-open (each counted
        once while fewer than the cap are remembered, so never fewer than there were)."""
        self._ignored_keys: set[tuple[Address, Address]] = set()

    def packets(self, packets: Iterable[Packet]) -> None:
        for packet in packets:
            segment = segment_of(packet)
            if segment is not None:
                self.segment(segment)

    def segment(self, segment: Segment) -> None:
        key = (segment.src, segment.dst) if segment.src <= segment.dst else (segment.dst, segment.src)
        connection = self._connections.get(key)
        if connection is not None and segment.flags & (SYN | ACK) == SYN:
            # a new opening on the same ends: the old connection's end was not captured
            self._end(key, segment.time, False, True)
            connection = None
        if connection is None:
            if segment.flags & RST or not self._accept(segment.src, segment.dst):
                return
            if not segment.payload and not segment.flags & SYN:
                return  # a bare ack of a connection seen mid-way says nothing yet
            if len(self._connections) >= self._max_connections and not self._evict(segment.time):
                if key not in self._ignored_keys:
                    self.ignored += 1
                    if len(self._ignored_keys) < self._max_connections:
                        self._ignored_keys.add(key)
                return
            opened = bool(segment.flags & SYN)
            client, server = ((segment.dst, segment.src) if opened and segment.flags & ACK
                              else (segment.src, segment.dst))
            flow = Flow(client, server, opened)
            connection = self._connections[key] = _Connection(flow, self._sink_for(flow))
            self._half_open[key] = None
        from_client = segment.src == connection.flow.client
        direction = connection.directions[0 if from_client else 1]
        conflicts = len(direction.conflicts)
        data = direction.accept(segment)
        for seq in direction.conflicts[conflicts:]:
            self._conflict(connection.flow, segment.src, seq)
        if data:
            self._half_open.pop(key, None)
            connection.sink.data(from_client, data, segment.time)
        if segment.flags & RST or all(d.finished for d in connection.directions):
            self._end(key, segment.time, bool(segment.flags & RST), any(d.gap for d in connection.directions))

    def _end(self, key: tuple[Address, Address], time: float, reset: bool, gap: bool) -> None:
        connection = self._connections.pop(key)
        self._half_open.pop(key, None)
        connection.sink.closed(time, reset, gap)

    def _evict(self, time: float) -> bool:
        """Make room by ending the oldest half-open connection (it carried nothing); False when none is."""
        if not self._half_open:
            return False
        key = next(iter(self._half_open))
        self._end(key, time, False, True)
        self.evicted += 1
        return True

    @property
    def open_flows(self) -> list[Flow]:
        """Connections that had not ended when the capture did."""
        return [c.flow for c in self._connections.values()]
