"""The reference sync server as the suite's ``reference`` target, declaring ``flush-control``.

``python -m conformance.sync.reference_target --store DIR`` serves this project's sync server
(``reference.sync.server``) on DIR, flushing after every put, on a clock that starts at 0 and
moves only when the runner says so. It prints ``CAPABILITIES store restart flush-control`` and
``LISTENING <port>``, then answers the runner's flush-control lines on stdin, one line each
(the contract: :mod:`conformance.sync.suite`). The server decides everything itself; this only
hands it the runner's clock and thresholds.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from reference.sync.server import SyncServer  # noqa: E402
from reference.sync.store import DeltaStore  # noqa: E402
from spec.sync.writer import SyncSettings  # noqa: E402

CAPABILITIES = ("store", "restart", "flush-control")


class RunnerClock:
    """A clock that stands still until the runner advances it, so data ages by exactly what it says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def answer(server: SyncServer, clock: RunnerClock, line: str) -> str:
    """The one-line answer to one flush-control line."""
    words = line.split()
    try:
        if words[:1] == ["POLICY"] and len(words) == 4:
            lag, count, size = float(words[1]), int(words[2]), int(words[3])
            if lag < 0 or count < 1 or size < 1:
                return "ERROR thresholds must be lag >= 0, count >= 1, bytes >= 1"
            server.set_flush_thresholds(max_replication_lag_s=lag, max_syncs_per_url=count, max_in_memory_bytes=size)
            return "OK"
        if words[:1] == ["ADVANCE"] and len(words) == 2:
            seconds = float(words[1])
            if seconds < 0:
                return "ERROR the clock does not go back"
            clock.now += seconds
            server.run_policy()
            return "OK"
        if words == ["PENDING"]:
            return f"PENDING {server.stats()['in_memory_bytes']}"
    except ValueError:
        pass
    return f"ERROR unknown line {line.strip()[:80]!r}"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.sync.reference_target")
    parser.add_argument("--store", required=True)
    args = parser.parse_args()
    clock = RunnerClock()
    store = DeltaStore(args.store)
    store.check_writable()
    server = SyncServer(store, settings=SyncSettings(max_replication_lag_s=0.0), clock=clock,
                        maintenance_interval_s=0)
    print("CAPABILITIES " + " ".join(CAPABILITIES), flush=True)
    print(f"LISTENING {server.port}", flush=True)
    try:
        for line in sys.stdin:
            print(answer(server, clock, line), flush=True)
    finally:
        server.shutdown(grace_s=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
