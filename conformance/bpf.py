"""A classic BPF program for a live capture: the kernel passes on only the packets a watcher wants.

On a busy loopback a capture in Python cannot read every packet of every process; what it does not
read in time the kernel drops, and a dropped SYN or segment blinds the monitor to a connection.
Attached to the raw socket, this program lets through only IPv4 TCP packets with an end on one of the
given hosts or ports, so the socket buffer holds nothing else. It is a prefilter: the monitor still
applies its own filter to what passes.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Final

_LD_H_ABS, _LD_W_ABS, _LD_B_ABS, _LD_H_IND = 0x28, 0x20, 0x30, 0x48
_LDX_B_MSH, _JEQ_K, _JSET_K, _RET_K = 0xB1, 0x15, 0x45, 0x06
_ETHERTYPE_IPV4: Final = 0x0800
_ETHERNET: Final = 14
SNAP_LENGTH: Final = 0x40000
"""Bytes of an accepted packet handed to the socket (all of any loopback packet)."""


@dataclass(frozen=True)
class Endpoints:
    """Hosts (IPv4) and ports of which a watched packet has at least one end."""

    hosts: frozenset[str] = frozenset()
    ports: frozenset[int] = frozenset()


def program(endpoints: Endpoints) -> list[tuple[int, int, int, int]]:
    """The instructions (code, jt, jf, k) accepting IPv4 TCP over Ethernet with an end in ``endpoints``."""
    body: list[tuple[int, str | None, int]] = [(_LD_H_ABS, None, 12), (_JEQ_K, "next|drop", _ETHERTYPE_IPV4),
                                               (_LD_B_ABS, None, _ETHERNET + 9), (_JEQ_K, "next|drop", 6)]
    for host in sorted(endpoints.hosts):
        value = int(ipaddress.IPv4Address(host))
        body += [(_LD_W_ABS, None, _ETHERNET + 12), (_JEQ_K, "accept|next", value),
                 (_LD_W_ABS, None, _ETHERNET + 16), (_JEQ_K, "accept|next", value)]
    if endpoints.ports:
        body += [(_LD_H_ABS, None, _ETHERNET + 6), (_JSET_K, "drop|next", 0x1FFF), (_LDX_B_MSH, None, _ETHERNET)]
        for port in sorted(endpoints.ports):
            body += [(_LD_H_IND, None, _ETHERNET), (_JEQ_K, "accept|next", port),
                     (_LD_H_IND, None, _ETHERNET + 2), (_JEQ_K, "accept|next", port)]
    drop, accept = len(body), len(body) + 1
    out = []
    for index, (code, jumps, k) in enumerate(body):
        jt = jf = 0
        if jumps is not None:
            targets = {"next": index + 1, "drop": drop, "accept": accept}
            on_true, on_false = jumps.split("|")
            jt, jf = targets[on_true] - index - 1, targets[on_false] - index - 1
        out.append((code, jt, jf, k))
    return out + [(_RET_K, 0, 0, 0), (_RET_K, 0, 0, SNAP_LENGTH)]


def encode(instructions: list[tuple[int, int, int, int]]) -> bytes:
    """``struct sock_filter`` array, as SO_ATTACH_FILTER takes it."""
    if len(instructions) > 4096 or any(not 0 <= jt <= 255 or not 0 <= jf <= 255 for _, jt, jf, _ in instructions):
        raise ValueError("too many hosts and ports for one BPF program")
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in instructions)
