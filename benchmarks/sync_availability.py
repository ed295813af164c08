"""``python -m benchmarks sync-availability [--json]``: a legitimate client's put latency during issue 37's attacks.

Each attack runs at full size against its own ``python -m reference.sync serve`` with the defaults
(``benchmarks.sync_attacks``): ``idle`` (connections that complete the HTTP/2 handshake, answer
SETTINGS and PING, open no stream, and are reopened as soon as the server closes one: more than
``--max-connections`` of them), ``slow-loris`` (the preface and a partial HEADERS frame, never
acknowledging SETTINGS, likewise reopened), ``silent-streams`` (one connection opening ``DoPut``
streams that send nothing). Meanwhile one ``SyncClient`` sends one-put transactions back to back
for ``--seconds`` (pausing ``--pause-s`` between them: above the server's idle timeout, each put
opens a new connection and races the crowd for a free slot); each put's latency is measured from the call to its acknowledgement (its
retries included). The figure to read is the largest latency and the count of failed puts.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks.sync_attacks import ConnectionCrowd, SilentStreams
from conformance.sync.suite import DESCS, rows_batch
from reference.sync.client import SyncClient, SyncPut, SyncUnavailable

ATTACKS = ("idle", "slow-loris", "silent-streams")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=1100, help="attacking connections (idle, slow-loris)")
    parser.add_argument("--streams", type=int, default=70, help="silent streams on one connection")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each attack and the client's puts last")
    parser.add_argument("--pause-s", type=float, default=0.0,
                        help="the client's pause between puts (above --idle-timeout-s, each put needs a new connection)")
    parser.add_argument("--attack", choices=ATTACKS, action="append", help="attacks to run (default: all)")
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


def _attack(args: argparse.Namespace, kind: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="sync-availability-") as root:
        proc = subprocess.Popen([sys.executable, "-m", "reference.sync", "serve", "--store", root, "--port", "0"],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline().split()[1])
            attacker: _Refilled | SilentStreams = (SilentStreams(f"127.0.0.1:{port}", args.streams)
                                                    if kind == "silent-streams" else _Refilled(port, kind, args.connections))
            time.sleep(1.0)  # let the crowd take its places
            client = SyncClient(f"grpc://127.0.0.1:{port}", "legit", deadline_s=args.seconds + 30)
            latencies: list[float] = []
            failures = 0
            started = time.monotonic()
            sequence = 0
            while time.monotonic() - started < args.seconds:
                sequence += 1
                began = time.monotonic()
                try:
                    client.send_transaction(sequence, [SyncPut("t", rows_batch([(None, sequence, "legit")]), DESCS)])
                    latencies.append(time.monotonic() - began)
                except SyncUnavailable:
                    failures += 1
                time.sleep(args.pause_s)
            held = attacker.open if isinstance(attacker, _Refilled) else args.streams - attacker.ended()
            reopened = attacker.reopened if isinstance(attacker, _Refilled) else 0
            client.close()
            attacker.close()
        finally:
            proc.kill()
            proc.wait()
    return {
        f"{kind}_puts": len(latencies), f"{kind}_failed": failures,
        f"{kind}_p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        f"{kind}_max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        f"{kind}_attackers_open_at_end": held, f"{kind}_reopened": reopened,
    }


def main(args: argparse.Namespace) -> int:
    _raise_fd_limit()
    results: dict[str, object] = {"connections": args.connections, "streams": args.streams, "seconds": args.seconds,
                                  "pause_s": args.pause_s}
    for kind in args.attack or ATTACKS:
        results.update(_attack(args, kind))
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key}: {value}")
    return 0
