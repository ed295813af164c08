"""``python -m benchmarks sync-availability [--json]``: a legitimate client's put latency during issue 37's attacks,
and what the connection front costs.

Each attack runs at full size against its own ``python -m reference.sync serve`` with the defaults
(``benchmarks.sync_attacks``, the crowds in a process of their own): ``idle`` (connections that complete the HTTP/2 handshake, answer
SETTINGS and PING, open no stream, and are reopened as soon as the server closes one: more than
``--max-connections`` of them), ``slow-loris`` (the preface and a partial HEADERS frame, never
acknowledging SETTINGS, likewise reopened), ``silent-streams`` (one connection opening ``DoPut``
streams that send nothing). Meanwhile one ``SyncClient`` sends one-put transactions back to back
for ``--seconds`` (pausing ``--pause-s`` between them: above the server's idle timeout, each put
opens a new connection and races the crowd for a free slot; ``--new-connection-per-put``: each put
through a client of its own, so on a connection of its own); each put's latency is measured from
the call to its acknowledgement (its retries included). The figure to read is the largest latency
and the count of failed puts.

``--throughput`` measures instead, on one ``serve`` and in alternating rounds, puts through the front
(the public address) and straight to gRPC (its private unix socket, found in ``/proc``): one-row puts
back to back, and puts of ``--throughput-put-mb`` MiB; the figure to read is the ratio front/direct.

``--connection-cost N`` measures instead what a held connection costs the server: its resident memory
(``/proc/PID/status``) before and after ``N`` connections of each crowd (idle, then slow-loris, each
on a fresh ``serve`` whose handshake and idle deadlines are set long, so none is closed meanwhile),
in KiB per connection.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow as pa

from benchmarks.sync_attacks import KINDS, ConnectionCrowd, SilentStreams
from conformance.sync.suite import DESCS, rows_batch
from reference.sync.client import SyncClient, SyncPut, SyncUnavailable

ATTACKS = ("idle", "slow-loris", "silent-streams")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=1100, help="attacking connections (idle, slow-loris)")
    parser.add_argument("--streams", type=int, default=70, help="silent streams on one connection")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each attack and the client's puts last")
    parser.add_argument("--pause-s", type=float, default=0.0,
                        help="the client's pause between puts (above --idle-timeout-s, each put needs a new connection)")
    parser.add_argument("--new-connection-per-put", action="store_true",
                        help="each put through a new client, so on a new connection")
    parser.add_argument("--attack", choices=ATTACKS, action="append", help="attacks to run (default: all)")
    parser.add_argument("--throughput", action="store_true",
                        help="no attack: put throughput through the front and straight to gRPC, side by side")
    parser.add_argument("--throughput-rounds", type=int, default=3, help="rounds of each path, alternating")
    parser.add_argument("--throughput-puts", type=int, default=200, help="one-row puts per round")
    parser.add_argument("--throughput-put-mb", type=int, default=8, help="size of each large put")
    parser.add_argument("--throughput-large-puts", type=int, default=8, help="large puts per round")
    parser.add_argument("--connection-cost", type=int, default=0, metavar="N",
                        help="no attack: the server's resident memory per connection with N idle, then N slow-loris")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server inherits it too


class _Refilled:
    """A connection crowd kept at ``count``: every connection the server closes is opened again at once."""

    def __init__(self, port: int, kind: str, count: int) -> None:
        self._port, self._kind, self._count = port, kind, count
        self._crowds: list[ConnectionCrowd] = []
        self._stop = threading.Event()
        self.reopened = 0
        self._thread = threading.Thread(target=self._refill, daemon=True)
        self._thread.start()

    def _refill(self) -> None:
        while not self._stop.wait(0.05):
            missing = self._count - sum(c.open for c in self._crowds)
            if missing > 0:
                try:
                    self._crowds.append(ConnectionCrowd("127.0.0.1", self._port, self._kind, missing))
                    self.reopened += missing
                except OSError:
                    pass

    @property
    def open(self) -> int:
        return sum(c.open for c in self._crowds)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for crowd in self._crowds:
            crowd.close()


def _crowd_in_its_own_process(port: int, kind: str, count: int) -> None:
    """Run a refilled crowd until stdin closes, then print how many it held open and reopened (JSON).

    A process of its own: in the client's, its thread would take the client's interpreter lock."""
    _raise_fd_limit()
    crowd = _Refilled(port, kind, count)
    sys.stdin.read()
    print(json.dumps({"open": crowd.open, "reopened": crowd.reopened}), flush=True)
    crowd.close()


class _CrowdProcess:
    """A ``_Refilled`` crowd in a child process."""

    def __init__(self, port: int, kind: str, count: int) -> None:
        code = f"from benchmarks.sync_availability import _crowd_in_its_own_process as c; c({port}, {kind!r}, {count})"
        self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)

    def close(self) -> dict[str, int]:
        """Stop the crowd; what it held open at the end and how many connections it reopened."""
        out, _ = self._proc.communicate("", timeout=60)
        return dict(json.loads(out.strip().splitlines()[-1]))


def _serve(root: str, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "reference.sync", "serve", "--store", root, "--port", "0", *options],
                            stdout=subprocess.PIPE, text=True)


def _put_once(location: str, sequence: int) -> None:
    """One put through a client of its own (a connection of its own)."""
    client = SyncClient(location, f"legit-{sequence}", deadline_s=60)
    try:
        client.send_transaction(1, [SyncPut("t", rows_batch([(None, sequence, "legit")]), DESCS)])
    finally:
        client.close()


def _attack(args: argparse.Namespace, kind: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="sync-availability-") as root:
        proc = _serve(root)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline().split()[1])
            attacker: _CrowdProcess | SilentStreams = (SilentStreams(f"127.0.0.1:{port}", args.streams)
                                                        if kind == "silent-streams"
                                                        else _CrowdProcess(port, kind, args.connections))
            time.sleep(1.0)  # let the crowd take its places
            location = f"grpc://127.0.0.1:{port}"
            client = SyncClient(location, "legit", deadline_s=args.seconds + 30)
            latencies: list[float] = []
            failures = 0
            started = time.monotonic()
            sequence = 0
            while time.monotonic() - started < args.seconds:
                sequence += 1
                began = time.monotonic()
                try:
                    if args.new_connection_per_put:
                        _put_once(location, sequence)
                    else:
                        client.send_transaction(sequence, [SyncPut("t", rows_batch([(None, sequence, "legit")]), DESCS)])
                    latencies.append(time.monotonic() - began)
                except SyncUnavailable:
                    failures += 1
                time.sleep(args.pause_s)
            client.close()
            if isinstance(attacker, _CrowdProcess):
                crowd = attacker.close()
                held, reopened = crowd["open"], crowd["reopened"]
            else:
                held, reopened = args.streams - attacker.ended(), 0
                attacker.close()
        finally:
            proc.kill()
            proc.wait()
    return {
        f"{kind}_puts": len(latencies), f"{kind}_failed": failures,
        f"{kind}_p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        f"{kind}_p99_ms": (round(statistics.quantiles(latencies, n=100, method="inclusive")[98] * 1000, 1)
                           if len(latencies) > 1 else None),
        f"{kind}_max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        f"{kind}_attackers_open_at_end": held, f"{kind}_reopened": reopened,
    }


def _private_socket(pid: int) -> str:
    """The unix socket ``pid`` listens on (its gRPC behind the front), from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    with open("/proc/net/unix", encoding="ascii") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if len(fields) == 8 and fields[6] in inodes and fields[7].endswith("/grpc.sock"):
                return fields[7]
    raise RuntimeError(f"process {pid} listens on no gRPC unix socket")


def _round(location: str, origin: str, table: str, batch: pa.Table, puts: int) -> float:
    """Seconds ``puts`` one-transaction puts of ``batch`` took, from one client, back to back."""
    client = SyncClient(location, origin, deadline_s=120)
    try:
        client.send_transaction(1, [SyncPut(table, rows_batch([(None, 0, "warm")]), DESCS)])  # connected
        began = time.monotonic()
        for sequence in range(2, puts + 2):
            client.send_transaction(sequence, [SyncPut(table, batch, DESCS)])
        return time.monotonic() - began
    finally:
        client.close()


def throughput(args: argparse.Namespace) -> dict[str, object]:
    """Puts per second (one row) and MiB per second (large puts) through the front and straight to gRPC."""
    rows = args.throughput_put_mb * 1024 * 1024 // 64
    large = rows_batch([(None, i, "x" * 48) for i in range(rows)])
    small = rows_batch([(None, 1, "one row")])
    seconds: dict[str, list[float]] = {f"{path}_{kind}": [] for path in ("front", "direct") for kind in ("small", "large")}
    with tempfile.TemporaryDirectory(prefix="sync-throughput-") as root:
        proc = _serve(root, "--max-replication-lag-s", "600", "--high-watermark-bytes", str(8 << 30))
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline().split()[1])
            paths = {"front": f"grpc://127.0.0.1:{port}", "direct": f"grpc+unix://{_private_socket(proc.pid)}"}
            for n in range(args.throughput_rounds):
                for path, location in (paths.items() if n % 2 == 0 else reversed(paths.items())):
                    seconds[f"{path}_small"].append(_round(location, f"{path}-small-{n}", "small", small, args.throughput_puts))
                    seconds[f"{path}_large"].append(
                        _round(location, f"{path}-large-{n}", "large", large, args.throughput_large_puts))
        finally:
            proc.kill()
            proc.wait()
    size_mb = large.nbytes / (1024 * 1024)
    results: dict[str, object] = {"throughput_rounds": args.throughput_rounds, "large_put_mb": round(size_mb, 1)}
    for path in ("front", "direct"):
        results[f"{path}_small_puts_per_s"] = [round(args.throughput_puts / s, 1) for s in seconds[f"{path}_small"]]
        results[f"{path}_large_mb_per_s"] = [round(args.throughput_large_puts * size_mb / s, 1)
                                             for s in seconds[f"{path}_large"]]
    for kind in ("small", "large"):
        front, direct = sum(seconds[f"front_{kind}"]), sum(seconds[f"direct_{kind}"])
        results[f"{kind}_ratio_front_to_direct"] = round(direct / front, 3)
    return results


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def connection_cost(count: int) -> dict[str, object]:
    """KiB of the server's resident memory per held connection, for each crowd."""
    results: dict[str, object] = {"cost_connections": count}
    for kind in KINDS:
        with tempfile.TemporaryDirectory(prefix="sync-connection-cost-") as root:
            proc = _serve(root, "--handshake-timeout-s", "600", "--idle-timeout-s", "600",
                          "--max-connections", str(count + 16))
            try:
                assert proc.stdout is not None
                port = int(proc.stdout.readline().split()[1])
                time.sleep(1.0)
                before = _rss_kib(proc.pid)
                crowd = ConnectionCrowd("127.0.0.1", port, kind, count)
                time.sleep(2.0)  # every handshake relayed and answered
                after, held = _rss_kib(proc.pid), crowd.open
                crowd.close()
            finally:
                proc.kill()
                proc.wait()
        results[f"{kind}_held"] = held
        results[f"{kind}_kib_per_connection"] = round((after - before) / count, 2)
    return results


def main(args: argparse.Namespace) -> int:
    _raise_fd_limit()
    results: dict[str, object] = {"connections": args.connections, "streams": args.streams, "seconds": args.seconds,
                                  "pause_s": args.pause_s}
    if args.throughput:
        results = throughput(args)
    elif args.connection_cost:
        results = connection_cost(args.connection_cost)
    else:
        for kind in args.attack or ATTACKS:
            results.update(_attack(args, kind))
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key}: {value}")
    return 0
