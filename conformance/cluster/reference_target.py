"""This project's cluster target harness: ``exec:python -m conformance.cluster.reference_target``.

It embeds the cluster service (reference/cluster/service.py) on an in-process cluster journaled in a
temporary directory and handed a clock the runner can stop (conformance/cluster/clock.py; the
service judges its sessions' silence on it too), serving at most ``--max-sessions`` nodes, prints
``CAPABILITIES clock restart durable held sessions configure cas client inputs pause`` and the service's port, then answers the runner's
control lines on stdin (the contract: conformance/cluster/controls.py) until stdin closes. The service
decides everything itself and its port speaks only the production wire; this only hands it the
runner's clock and reports what it counts and its bound.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conformance.cluster.clock import DetectorClock
from conformance.cluster.controls import CAPABILITIES, Controls
from reference.cluster.memory import DEFAULT_POLICY, InProcessCluster
from reference.cluster.service import ClusterService, ServiceLimits
from spec.cluster.detector import FailurePolicy

HARNESS_SESSIONS = 32
"""The harness's session bound (the service's default is 1024): a case fills it with raw HELLOs in
milliseconds, and no other case holds more than a few nodes at once."""


@contextmanager
def harness(policy: FailurePolicy = DEFAULT_POLICY, max_sessions: int = HARNESS_SESSIONS) -> Iterator[Controls]:
    """The harness's cluster and service, journaled in a temporary directory, and the controls the
    runner's lines are carried out with (``controls.service`` is the service). The wire walks run on
    this in process (conformance/cluster/wire_walks.py), so what they select is what ``exec:`` serves."""
    with tempfile.TemporaryDirectory(prefix="streamwire-cluster-harness-") as scratch:
        clock = DetectorClock()
        cluster = InProcessCluster(policy, data_dir=Path(scratch), clock=clock)
        service = ClusterService(cluster, limits=ServiceLimits(max_sessions=max_sessions))
        controls = Controls(cluster, clock, service)
        try:
            yield controls
        finally:
            controls.unserve()
            service.close()
            cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.cluster.reference_target",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--heartbeat", type=float, default=DEFAULT_POLICY.heartbeat_interval)
    parser.add_argument("--fail-after", type=float, default=DEFAULT_POLICY.fail_after)
    parser.add_argument("--max-sessions", type=int, default=HARNESS_SESSIONS,
                        help="most nodes served at once (small, so a case can reach the bound)")
    args = parser.parse_args(argv)
    try:
        policy = FailurePolicy(heartbeat_interval=args.heartbeat, fail_after=args.fail_after)
        if args.max_sessions < 1:
            raise ValueError(f"--max-sessions must be at least 1, got {args.max_sessions}")
    except ValueError as refused:
        parser.exit(2, f"{parser.prog}: error: {refused}\n")
    sys.setswitchinterval(0.0005)  # as the service's own launcher does (reference/cluster/service.py)
    with harness(policy, args.max_sessions) as controls:
        assert controls.service is not None
        print("CAPABILITIES " + " ".join(CAPABILITIES), flush=True)
        print(controls.service.port, flush=True)
        for line in sys.stdin:
            print(controls.answer(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
