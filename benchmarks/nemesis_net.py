"""The nemesis's world: one network namespace per host on a bridge (lab N: 198.18.N.0/24, bridge ``nmbrN``),
the faults it can put on the network (a partition between two hosts, a slow link) and a small tmpfs a store
can fill. Labs of different numbers never meet, so two runs (or a run and the suite's short nemesis) can share
the machine.

Every change is undone by :meth:`Lab.close` (namespaces, bridge, mounts), also after a failure.
Partitions are ``tc`` classes of 8 bit/s on both hosts (no iptables here; a blackhole route would fail
sends at once with EINVAL instead of losing them): packets between the two vanish.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

HOSTS: Final = {"pg": 2, "sync": 3, "cdc": 4, "etcd": 5, "master": 6, "worker1": 7, "worker2": 8, "driver": 9}
"""Host name -> last byte of its address; the root namespace (workload, checker) is .1 on the bridge."""


_lab = 0
"""The lab this process runs (:func:`use_lab`)."""


def use_lab(number: int) -> None:
    global _lab
    _lab = number


def prefix() -> str:
    return f"198.18.{_lab}"


def bridge() -> str:
    return f"nmbr{_lab}"


def ip_of(host: str) -> str:
    return f"{prefix()}.{HOSTS[host]}"


def netns(host: str) -> str:
    return f"nemesis{_lab or ''}-{host}"


def unavailable() -> str | None:
    """Why the lab cannot be built here (one line), or None: it needs root, iproute2's ``ip`` and ``tc``, gcc
    (the wall-clock jump) and namespaces the kernel lets it add."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, a tmpfs)"
    missing = [tool for tool in ("ip", "tc", "gcc", "psql") if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} on PATH"
    probe = subprocess.run(["ip", "netns", "add", netns("probe")], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"`ip netns add` is not permitted here: {probe.stderr.strip()}"
    run("ip", "netns", "del", netns("probe"), check=False)
    return None


def run(*argv: str, check: bool = True) -> None:
    subprocess.run(argv, check=check, capture_output=True, timeout=30)


class Lab:
    """Namespaces, the bridge and the store's tmpfs; ``close`` removes all of them."""

    def __init__(self, store: Path, store_mb: int, hosts: tuple[str, ...]) -> None:
        self.hosts = hosts
        self.store = store
        self.store_mb = store_mb
        self._mounted = False
        self._filler = store / "nemesis-filler"

    def open(self) -> None:
        self.close()  # what a killed earlier run may have left
        run("ip", "link", "add", bridge(), "type", "bridge")
        run("ip", "addr", "add", f"{prefix()}.1/24", "dev", bridge())
        run("ip", "link", "set", bridge(), "up")
        for host in self.hosts:
            ns, veth, last = netns(host), f"nmv{_lab or ''}-{host}", HOSTS[host]
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", veth, "master", bridge(), "up")
            run("ip", "-n", ns, "addr", "add", f"{prefix()}.{last}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        self.store.mkdir(parents=True, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", f"size={self.store_mb}m", "tmpfs", str(self.store))
        self._mounted = True

    def close(self) -> None:
        if self._mounted or os.path.ismount(self.store):
            run("umount", "-l", str(self.store), check=False)
            self._mounted = False
        for host in HOSTS:
            self._kill_left(netns(host))
            run("ip", "netns", "del", netns(host), check=False)
        run("ip", "link", "del", bridge(), check=False)

    @staticmethod
    def _kill_left(ns: str) -> None:
        """Kill what is still running in our namespace ``ns`` (only this lab's processes run there: a Spark
        worker's executors, say, outlive a killed worker's process group)."""
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass

    # -- faults -------------------------------------------------------------------------------
    def partition(self, a: str, b: str, on: bool) -> None:
        """Lose every packet between hosts ``a`` and ``b`` (both directions), or stop: on each side what it
        sends to the other is classified (u32) into an htb class of 8 bit/s with a one-packet queue, so
        connections hang as in a real partition (this kernel has no drop action, netem or prio)."""
        for here, there in ((a, b), (b, a)):
            tc = ("ip", "netns", "exec", netns(here), "tc")
            if not on:
                run(*tc, "qdisc", "del", "dev", "eth0", "root", check=False)
                continue
            run(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "20")
            run(*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "8bit",
                "ceil", "8bit")
            run(*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit")
            run(*tc, "qdisc", "add", "dev", "eth0", "parent", "1:10", "handle", "10:", "pfifo", "limit", "1")
            run(*tc, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "u32", "match", "ip", "dst",
                f"{ip_of(there)}/32", "flowid", "1:10")

    def slow(self, host: str, kbit: int, on: bool) -> None:
        """Shape what ``host`` sends to ``kbit`` kbit/s (a token bucket, queueing up to 400 ms; this kernel has
        no netem), or stop."""
        if on:
            run("ip", "netns", "exec", netns(host), "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                f"{kbit}kbit", "burst", "1600", "latency", "400ms")
        else:
            run("ip", "netns", "exec", netns(host), "tc", "qdisc", "del", "dev", "eth0", "root", check=False)

    def fill_disk(self, on: bool) -> None:
        """Fill the store's tmpfs to the last byte with one file, or delete it."""
        if not on:
            self._filler.unlink(missing_ok=True)
            return
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (1 << 20, 1 << 12, 1):  # bounded: the mount holds store_mb MiB
                for _ in range(self.store_mb * 256 + 1):
                    try:
                        os.write(fd, bytes(size))
                    except OSError:
                        break
        finally:
            os.close(fd)
