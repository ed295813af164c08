"""``python -m benchmarks cluster-writes [--json]``: what a write costs as the cluster grows.

For each backend (in-process; etcd, started on loopback) and each cluster size N, N nodes join
and then:

- CAS race: ``--writers`` nodes race compare-and-swap chains on one GLOBAL gossip key for
  ``--seconds``; every committed write must reach all N nodes. Reported: committed CAS per
  second, and this process's CPU per committed write (all threads: callers, fan-out, every
  node's callbacks; the idle CPU of the same wall time, measured just before, subtracted),
  counted until every node was notified of the last write. etcd's own CPU is not included.
- fan-out: one node writes ``--fanout-writes`` times, each time waiting until all N were told;
  p50/p99 of the time from the call to each node's notification, and the CPU per write without
  contention (the write plus telling N nodes).

Every write must be told to all N nodes, so linear growth of CPU per write with N is the floor;
the fitted exponents over N (1: linear) say whether a backend stays there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.growth import exponent
from reference.cluster.etcd import EtcdCluster, EtcdSettings
from conformance.cluster.etcd_server import EtcdServer
from reference.cluster.memory import InProcessCluster
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import ClusterError, RevisionMismatch
from spec.cluster.interface import ClusterBackend, ClusterProvider
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, Revision, Scope, ShardId

KEY = "bench"
HANG_GUARD = 120.0
# Slow health timing: a loaded machine must not turn nodes FAIL mid-run (that is not the cost measured).
QUIET_MEMORY = FailurePolicy(heartbeat_interval=1.0, fail_after=120.0)
QUIET_ETCD = EtcdSettings(lease_ttl=30, heartbeat_interval=5.0, request_timeout=30.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the benchmark's options."""
    parser.add_argument("--nodes", default="2,8,32,128", help="cluster sizes, comma-separated")
    parser.add_argument("--backends", default="memory,etcd", help="memory and/or etcd")
    parser.add_argument("--writers", type=int, default=4, help="nodes racing CAS (at most N)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of the CAS race")
    parser.add_argument("--fanout-writes", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class Arrivals:
    """A Core that records when each revision of the benchmark key arrived."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seen: dict[int, float] = {}
        self.latest = 0

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        now = time.perf_counter()
        with self._cond:
            for entry in entries:
                if entry.key == KEY:
                    self.seen.setdefault(entry.revision, now)
                    self.latest = max(self.latest, entry.revision)
            self._cond.notify_all()

    def wait_for(self, revision: int) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.latest >= revision, HANG_GUARD):
                raise TimeoutError(f"revision {revision} not notified within {HANG_GUARD} s")

    def update_membership(self, snapshot: Membership) -> None:
        pass

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        pass

    def cluster_heartbeat(self, ttl: float) -> None:
        pass

    def cluster_down(self) -> None:
        pass


def _race(writers: Sequence[ClusterProvider], seconds: float) -> tuple[int, int]:
    """Writers race CAS on KEY until ``seconds`` pass; (committed, highest revision)."""
    end = time.perf_counter() + seconds
    wins: list[int] = []
    top: list[int] = [0]
    lock = threading.Lock()

    def write(node: ClusterProvider) -> None:
        known: Revision | None = None
        won = 0
        while time.perf_counter() < end:
            try:
                known = node.update_gossip([MetadataOp(key=KEY, value=b"v", expected=known)], Scope.GLOBAL)
                won += 1
            except RevisionMismatch as exc:
                known = None if exc.actual is None else exc.actual.revision
        with lock:
            wins.append(won)
            top[0] = max(top[0], known or 0)

    threads = [threading.Thread(target=write, args=(n,)) for n in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    return sum(wins), top[0]


def measure(backend: ClusterBackend, nodes: int, writers: int, seconds: float, fanout_writes: int) -> dict[str, Any]:
    cores = [Arrivals() for _ in range(nodes)]
    handles = [backend.open_node(NodeId(f"n{i}"), core) for i, core in enumerate(cores)]
    try:
        for handle in handles:
            handle.join_cluster("127.0.0.1:1")
        first = handles[0].update_gossip([MetadataOp(key=KEY, value=b"start")], Scope.GLOBAL)
        for core in cores:
            core.wait_for(first)

        idle_wall, idle_cpu = time.perf_counter(), time.process_time()
        time.sleep(min(1.0, seconds))
        idle_rate = (time.process_time() - idle_cpu) / (time.perf_counter() - idle_wall)

        wall, cpu = time.perf_counter(), time.process_time()
        committed, last = _race(handles[:max(1, min(writers, nodes))], seconds)
        race_wall = time.perf_counter() - wall
        for core in cores:
            core.wait_for(last)
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu - idle_rate * wall

        latencies: list[float] = []
        known = Revision(last)
        fan_wall, fan_cpu = time.perf_counter(), time.process_time()
        for _ in range(fanout_writes):
            started = time.perf_counter()
            known = handles[0].update_gossip([MetadataOp(key=KEY, value=b"f", expected=known)], Scope.GLOBAL)
            for core in cores:
                core.wait_for(known)
            latencies += [core.seen[known] - started for core in cores]
        fan_cpu = time.process_time() - fan_cpu - idle_rate * (time.perf_counter() - fan_wall)
        latencies.sort()
        return {
            "nodes": nodes,
            "cas_committed_per_s": round(committed / race_wall, 1),
            "cpu_us_per_write": round(cpu / max(committed, 1) * 1e6, 1),
            "cpu_us_per_write_per_node": round(cpu / max(committed, 1) / nodes * 1e6, 2),
            "uncontended_cpu_us_per_write": round(fan_cpu / fanout_writes * 1e6, 1),
            "fanout_p50_ms": round(statistics.median(latencies) * 1000, 3),
            "fanout_p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000, 3),
        }
    finally:
        for handle in handles:
            handle.close()


@contextmanager
def _backend(name: str, workdir: Path) -> Iterator[Callable[[], ClusterBackend]]:
    """A factory of fresh clusters of one backend kind."""
    if name == "memory":
        yield lambda: InProcessCluster(QUIET_MEMORY)
    elif name == "etcd":
        server = EtcdServer(workdir / "etcd")
        server.start()
        counter = iter(range(1_000_000))
        try:
            yield lambda: EtcdCluster(server.url, f"bench-{next(counter)}", QUIET_ETCD)
        finally:
            server.stop()
    else:
        raise ValueError(f"unknown backend {name!r}: expected memory or etcd")


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its figures."""
    sizes = [int(n) for n in args.nodes.split(",")]
    figures: dict[str, Any] = {"sizes": sizes, "backends": {}, "exponents": {}}
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        for name in args.backends.split(","):
            rows = []
            with _backend(name, Path(tmp)) as new_cluster:
                for nodes in sizes:
                    cluster = new_cluster()
                    try:
                        rows.append(measure(cluster, nodes, args.writers, args.seconds, args.fanout_writes))
                    except (ClusterError, TimeoutError) as exc:
                        rows.append({"nodes": nodes, "error": str(exc)})
                    finally:
                        cluster.close()
                    if not args.json:
                        print(f"{name:>6} {json.dumps(rows[-1])}", flush=True)
            figures["backends"][name] = rows
            done = [r for r in rows if "error" not in r]
            figures["exponents"][name] = {
                metric: exponent([r["nodes"] for r in done], [r[metric] for r in done])
                for metric in ("cpu_us_per_write", "uncontended_cpu_us_per_write", "fanout_p50_ms", "fanout_p99_ms", "cas_committed_per_s")}
    if args.json:
        print(json.dumps(figures))
    else:
        for name, fitted in figures["exponents"].items():
            print(f"{name:>6} exponents over N (1 = linear): {fitted}")
    return 0
