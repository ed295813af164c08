"""Packets from a capture: pcap and pcapng files, a live AF_PACKET socket, and a pcap writer.

The monitor needs only timestamps and link-layer frames, so this is a small reader of both file
formats (no libpcap, no dependency) and a raw socket for live capture (Linux, root). Every length
read from a file is bounded before anything is allocated for it, since captures come from strangers.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import BinaryIO, Final, Iterator, Protocol

from conformance import bpf
from conformance.bpf import Endpoints

LINKTYPE_NULL: Final = 0
LINKTYPE_ETHERNET: Final = 1
LINKTYPE_RAW: Final = 101
LINKTYPE_LINUX_SLL: Final = 113
LINKTYPE_LINUX_SLL2: Final = 276
LINKTYPES: Final = frozenset({LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_LINUX_SLL,
                              LINKTYPE_LINUX_SLL2})
"""Link types whose frames this module can take the IP packet out of."""

MAX_RECORD: Final = 256 * 1024
"""Largest packet record accepted from a file (loopback MTU is 64 KiB; GSO captures stay below this)."""

_PCAP_MAGIC: Final = {b"\xd4\xc3\xb2\xa1": ("<", 10**6), b"\xa1\xb2\xc3\xd4": (">", 10**6),
                      b"\x4d\x3c\xb2\xa1": ("<", 10**9), b"\xa1\xb2\x3c\x4d": (">", 10**9)}
"""Magic -> byte order and timestamp ticks per second (microsecond or nanosecond pcap)."""
_PCAPNG_SHB: Final = b"\x0a\x0d\x0d\x0a"
ETH_P_ALL: Final = 0x0003
SO_ATTACH_FILTER: Final = 26
SO_RCVBUFFORCE: Final = 33
SOL_PACKET: Final = 263
PACKET_STATISTICS: Final = 6
RECEIVE_BUFFER: Final = 64 * 1024 * 1024
SO_TIMESTAMPNS: Final = 35
"""The kernel stamps each captured packet (ancillary data SCM_TIMESTAMPNS: int64 seconds, int64 ns)."""
_STAMP: Final = struct.Struct("qq")
"""The raw socket's buffer: what the kernel holds while the capture loop is busy (root may exceed rmem_max)."""


class CaptureError(Exception):
    """The capture cannot be read (not a capture, truncated, unsupported link type, no permission)."""


@dataclass(frozen=True, slots=True)
class Packet:
    """One captured link-layer frame."""

    time: float
    linktype: int
    data: bytes


def read_capture(stream: BinaryIO) -> Iterator[Packet]:
    """Every packet of a pcap or pcapng file, in file order."""
    magic = stream.read(4)
    if magic in _PCAP_MAGIC:
        yield from _read_pcap(stream, magic)
    elif magic == _PCAPNG_SHB:
        yield from _read_pcapng(stream)
    else:
        raise CaptureError("not a pcap or pcapng file")


def _exactly(stream: BinaryIO, size: int, what: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise CaptureError(f"truncated {what}: {len(data)} of {size} bytes")
    return data


def _read_pcap(stream: BinaryIO, magic: bytes) -> Iterator[Packet]:
    order, per_second = _PCAP_MAGIC[magic]
    _major, _minor, _zone, _sigfigs, _snaplen, linktype = struct.unpack(order + "HHiIII",
                                                                         _exactly(stream, 20, "pcap header"))
    linktype &= 0xFFFF
    _check_linktype(linktype)
    record = struct.Struct(order + "IIII")
    while header := stream.read(record.size):
        if len(header) != record.size:
            raise CaptureError("truncated pcap record header")
        seconds, fraction, captured, _original = record.unpack(header)
        if captured > MAX_RECORD:
            raise CaptureError(f"pcap record of {captured} bytes (at most {MAX_RECORD})")
        yield Packet(_seconds(seconds, fraction, per_second), linktype, _exactly(stream, captured, "pcap record"))


def _read_pcapng(stream: BinaryIO) -> Iterator[Packet]:
    """Section header, interface descriptions and (enhanced or simple) packet blocks; others skipped."""
    order = "<"
    interfaces: list[tuple[int, int]] = []
    block_type = _PCAPNG_SHB
    while True:
        if block_type == _PCAPNG_SHB:
            length_bytes = _exactly(stream, 4, "pcapng block")
            bom = _exactly(stream, 4, "pcapng byte-order magic")
            order = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else ""
            if not order:
                raise CaptureError("pcapng section without its byte-order magic")
            (length,) = struct.unpack(order + "I", length_bytes)
            body = _block_body(stream, length, 12)
            interfaces = []
        else:
            (kind,) = struct.unpack(order + "I", block_type)
            (length,) = struct.unpack(order + "I", _exactly(stream, 4, "pcapng block"))
            body = _block_body(stream, length, 8)
            if kind == 1:  # interface description
                (linktype,) = struct.unpack_from(order + "H", body)
                interfaces.append((linktype, _resolution(body[8:], order)))
            elif kind == 6:  # enhanced packet
                interface, high, low, captured, _original = struct.unpack_from(order + "IIIII", body)
                if interface >= len(interfaces) or captured > len(body) - 20:
                    raise CaptureError("pcapng packet names an unknown interface or overruns its block")
                linktype, per_second = interfaces[interface]
                _check_linktype(linktype)
                whole, ticks = divmod((high << 32) | low, per_second)
                yield Packet(_seconds(whole, ticks, per_second), linktype, body[20:20 + captured])
            elif kind == 3:  # simple packet
                if not interfaces:
                    raise CaptureError("pcapng simple packet before any interface")
                _check_linktype(interfaces[0][0])
                yield Packet(0.0, interfaces[0][0], body[4:])
        block_type = stream.read(4)
        if not block_type:
            return
        if len(block_type) != 4:
            raise CaptureError("truncated pcapng block")


def _block_body(stream: BinaryIO, length: int, read: int) -> bytes:
    """The rest of a block whose first ``read`` bytes were consumed, without its trailing length."""
    if length < read + 4 or length % 4 or length > MAX_RECORD + 64:
        raise CaptureError(f"pcapng block of {length} bytes")
    return _exactly(stream, length - read, "pcapng block")[:-4]


def _seconds(whole: int, ticks: int, per_second: int) -> float:
    """A timestamp computed the same way from both formats, so one capture reads alike in either."""
    return whole + ticks / per_second


def _resolution(options: bytes, order: str) -> int:
    """The interface's timestamp ticks per second from its if_tsresol option (default microseconds)."""
    offset = 0
    while offset + 4 <= len(options):
        code, size = struct.unpack_from(order + "HH", options, offset)
        if code == 0:
            break
        if code == 9 and size >= 1:
            value = options[offset + 4]
            return int(2 ** (value & 0x7F) if value & 0x80 else 10 ** value)
        offset += 4 + (size + 3) // 4 * 4
    return 10**6


def _check_linktype(linktype: int) -> None:
    if linktype not in LINKTYPES:
        raise CaptureError(f"unsupported link type {linktype} (supported: {sorted(LINKTYPES)})")


class PcapWriter:
    """Writes packets as a classic microsecond pcap file (what tshark and the monitor both read)."""

    def __init__(self, stream: BinaryIO, linktype: int = LINKTYPE_ETHERNET) -> None:
        self._stream = stream
        self.linktype = linktype
        stream.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, MAX_RECORD, linktype))

    def write(self, packet: Packet) -> None:
        seconds = int(packet.time)
        micros = min(int(round((packet.time - seconds) * 1e6)), 999_999)
        self._stream.write(struct.pack("<IIII", seconds, micros, len(packet.data), len(packet.data)))
        self._stream.write(packet.data)


class Stop(Protocol):
    """A flag another thread sets to end a live capture (``threading.Event`` is one)."""

    def is_set(self) -> bool: ...


class Ready(Protocol):
    """Told once the socket captures (``threading.Event`` is one)."""

    def set(self) -> None: ...


@dataclass
class CaptureStats:
    """What the kernel reported for a live capture once it ended."""

    dropped: int = 0
    """Packets the kernel dropped because the socket's buffer was full: connections they belonged to
    are seen incomplete."""


def live_capture(interface: str, duration_s: float | None, *, stop: Stop | None = None,
                 ready: Ready | None = None, only: Endpoints | None = None,
                 stats: CaptureStats | None = None) -> Iterator[Packet]:
    """Frames seen on ``interface`` (both directions) until ``duration_s`` passes or ``stop`` is set.

    ``only``: the kernel passes on only IPv4 TCP packets with an end on these hosts or ports
    (conformance/bpf.py). Loopback delivers every packet twice to a raw socket (outgoing and
    incoming); only the outgoing copy is kept, so each segment is seen once.
    """
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    except PermissionError:
        raise CaptureError("live capture needs root (CAP_NET_RAW)") from None
    except (AttributeError, OSError) as error:
        raise CaptureError(f"live capture unavailable: {error}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # first: the kernel turns stamping on lazily
        try:
            sock.bind((interface, 0))
        except OSError as error:
            raise CaptureError(f"cannot capture on {interface!r}: {error.strerror}") from None
        if only is not None:
            _attach(sock, bpf.encode(bpf.program(only)))
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        if ready is not None:
            ready.set()
        end = None if duration_s is None else time.monotonic() + duration_s
        loopback = interface == "lo"
        stopped_at: float | None = None
        """When the capture was told to stop (wall clock): what the kernel captured before it is still read,
        up to the first packet stamped after it (a busy link never goes quiet)."""
        while True:
            now = time.monotonic()
            if stopped_at is None and ((end is not None and now >= end) or (stop is not None and stop.is_set())):
                stopped_at = time.time()
            wait = 0.0 if stopped_at is not None else 0.1 if end is None else max(0.0, min(0.1, end - now))
            if not select.select([sock], [], [], wait)[0]:
                if stopped_at is not None:
                    break
                continue
            data, ancillary, _flags, address = sock.recvmsg(MAX_RECORD, socket.CMSG_SPACE(_STAMP.size))
            stamp = _stamp(ancillary)
            if stopped_at is not None and stamp > stopped_at:
                break
            if loopback and address[2] != socket.PACKET_OUTGOING:
                continue
            yield Packet(stamp, LINKTYPE_ETHERNET, data)
        if stats is not None:
            stats.dropped += _drops(sock)
    finally:
        sock.close()


def _stamp(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The kernel's capture time of a packet (now, if the kernel gave none)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            seconds, nanoseconds = _STAMP.unpack_from(data)
            return float(seconds + nanoseconds / 1e9)
    return time.time()


def _attach(sock: socket.socket, program: bytes) -> None:
    """SO_ATTACH_FILTER: the kernel copies the program, so the buffer only has to outlive the call."""
    buffer = ctypes.create_string_buffer(program)
    fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(buffer))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def _drops(sock: socket.socket) -> int:
    """PACKET_STATISTICS: packets dropped since the last ask (``struct tpacket_stats``)."""
    _packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    return int(drops)


def open_capture(path: str) -> BinaryIO:
    """A capture file opened for reading, with a one-line error when it cannot be."""
    try:
        return open(os.fspath(path), "rb")
    except OSError as error:
        raise CaptureError(f"cannot read {path}: {error.strerror}") from None
