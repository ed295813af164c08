"""Hosts as Linux network namespaces: each host its own stack and address, joined by a bridge.

A lab is one run's set of namespaces, named after a random run id so that concurrent runs never
meet: a hub namespace holding the bridge, and one namespace per host with a veth ``eth0`` plugged
into it, addressed from 198.18.0.0/15 (the benchmarking range, RFC 2544). Nothing is added to the
caller's own namespace. ``close`` kills every process left in the lab's namespaces (they can only
be the lab's) and deletes them, which destroys their links and the bridge; it runs whatever happens.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import IO, Mapping, Sequence

SUBNET = "198.18.0"
"""A /24 of the benchmarking range; every lab has its own hub, so labs never share an address."""

KILL_WAIT_S = 10.0


def unavailable() -> str | None:
    """Why namespaces cannot be used here, or None."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"swprobe{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str


class NetLab:
    """``hosts`` get 198.18.0.1, .2, ... in order; use as a context manager."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.run_id = uuid.uuid4().hex[:6]
        self._hub = f"sw{self.run_id}hub"
        self.hosts = {name: Host(name, f"sw{self.run_id}{name}", f"{SUBNET}.{i}")
                      for i, name in enumerate(hosts, start=1)}
        self._made: list[str] = []
        self._processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> NetLab:
        try:
            self._add_namespace(self._hub)
            _ip("-n", self._hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self._hub, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts.values()):
                self._add_namespace(host.namespace)
                port = f"port{i}"
                _ip("-n", self._hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
                _ip("-n", self._hub, "link", "set", port, "master", "br0", "up")
                _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
                _ip("-n", host.namespace, "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")  # Spark and PySpark talk to themselves on loopback

    def start(self, host: str, argv: Sequence[str], env: Mapping[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
        """Run ``argv`` on ``host`` (its output to ``log``); killed by ``close`` if still running."""
        process = subprocess.Popen(["ip", "netns", "exec", self.hosts[host].namespace, *argv], env=dict(env),
                                   stdout=log, stderr=subprocess.STDOUT)
        self._processes.append(process)
        return process

    def run(self, host: str, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.hosts[host].namespace, *argv], env=dict(env),
                              capture_output=True, text=True, timeout=timeout_s)

    def link_down(self, host: str) -> None:
        """Take the host's only link down: it can reach nobody and nobody can reach it."""
        _ip("-n", self.hosts[host].namespace, "link", "set", "eth0", "down")

    def processes(self, host: str) -> list[int]:
        """Every process living in the host's namespace."""
        listed = subprocess.run(["ip", "netns", "pids", self.hosts[host].namespace], capture_output=True, text=True)
        return [int(pid) for pid in listed.stdout.split()]

    def close(self) -> None:
        """Kill whatever still runs in the lab, then delete its namespaces (with their links)."""
        hosts = [h for h in self.hosts.values() if h.namespace in self._made]
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline:
            alive = [pid for host in hosts for pid in self.processes(host.name)]
            if not alive:
                break
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for process in self._processes:
            try:
                process.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        for name in reversed(self._made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._made.clear()

    def namespaces_left(self) -> list[str]:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return [line.split()[0] for line in listed.splitlines() if line.startswith(f"sw{self.run_id}")]
