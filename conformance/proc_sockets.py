"""The TCP endpoints of a process tree, from ``/proc`` (Linux): what ``streamwire monitor --pid`` watches.

A process's sockets are the ``socket:[inode]`` links in ``/proc/PID/fd``; ``/proc/net/tcp`` and
``/proc/net/tcp6`` give each inode's local address and state. A connection belongs to the tree when one
of its ends is a local address of one of the tree's sockets, or a port one of them listens on (a
listener on the wildcard address takes the port on every address). A job opens connections as it runs
(a streaming shuffle's writers start servers every batch), so the endpoints are read again when a
connection matches none of them and the last reading is older than the packet that asks (its sockets
were open then), and every ``interval_s`` on a thread of its own: a monitor behind a busy link judges
a connection after its sockets may have closed, so every endpoint ever seen is kept. Reading
/proc/net/tcp costs ~75 ms on a host with 6,000 sockets, so the monitor asks once per connection, when
its first frame arrives, not for every packet.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from pathlib import Path
from typing import Callable, Final

Address = tuple[str, int]

PROC: Final = Path("/proc")
LISTEN: Final = "0A"
"""``st`` of a listening socket in /proc/net/tcp*."""
INTERVAL_S: Final = 0.5


class ProcessGone(Exception):
    """The process named is not running (or /proc cannot be read)."""


def process_tree(pid: int, proc: Path = PROC) -> set[int]:
    """``pid`` and every descendant running now."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    tree, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in tree:
            tree.add(current)
            todo.extend(children.get(current, []))
    return tree


def socket_inodes(pids: set[int], proc: Path = PROC) -> set[int]:
    """Inodes of the sockets the processes hold open."""
    inodes = set()
    for pid in pids:
        try:
            fds = list((proc / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def _address(hex_address: str) -> Address:
    """``0100007F:1F90`` (little-endian words, as the kernel prints them) as ("127.0.0.1", 8080)."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def tcp_endpoints(inodes: set[int], proc: Path = PROC) -> tuple[set[Address], set[int]]:
    """The local addresses of those of ``inodes`` that are TCP sockets, and the ports listened on the
    wildcard address."""
    local: set[Address] = set()
    wildcard_ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or int(fields[9]) not in inodes:
                continue
            address = _address(fields[1])
            if fields[3] == LISTEN and ipaddress.ip_address(address[0]).is_unspecified:
                wildcard_ports.add(address[1])
            else:
                local.add(address)
    return local, wildcard_ports


class ProcessConnections:
    """``matches(src, dst)``: whether a connection has an end on the process tree of ``pid``."""

    def __init__(self, pid: int, proc: Path = PROC, clock: Callable[[], float] = time.time,
                 interval_s: float | None = INTERVAL_S) -> None:
        """``clock``: the wall clock captured packets are stamped with; ``interval_s``: how often a thread
        reads the endpoints while the process runs (None: only when asked)."""
        if not (proc / str(pid)).is_dir():
            raise ProcessGone(f"no process {pid}")
        self.pid, self._proc, self._clock = pid, proc, clock
        self._lock = threading.Lock()
        self._local: set[Address] = set()
        self._ports: set[int] = set()
        self._scanned = float("-inf")
        self._scan()
        if interval_s is not None:
            threading.Thread(target=self._keep_scanning, args=(interval_s,), name="monitor-proc-scan",
                             daemon=True).start()

    def _keep_scanning(self, interval_s: float) -> None:
        while self.alive:
            time.sleep(interval_s)
            self._scan()

    @property
    def alive(self) -> bool:
        """The process still runs (a zombie, exited but not yet waited for, does not)."""
        try:
            stat = (self._proc / str(self.pid) / "stat").read_text()
        except OSError:
            return False
        return stat[stat.rindex(")") + 2] not in "ZX"

    def _scan(self) -> None:
        started = self._clock()
        local, ports = tcp_endpoints(socket_inodes(process_tree(self.pid, self._proc), self._proc), self._proc)
        with self._lock:
            self._local |= local
            self._ports |= ports
            self._scanned = max(self._scanned, started)

    def _known(self, src: Address, dst: Address) -> bool:
        with self._lock:
            return src in self._local or dst in self._local or src[1] in self._ports or dst[1] in self._ports

    def matches(self, src: Address, dst: Address, at: float) -> bool:
        """Whether the connection has an end on the tree, as a packet captured at ``at`` shows it."""
        if self._known(src, dst):
            return True
        if self._scanned < at:
            self._scan()
            return self._known(src, dst)
        return False
