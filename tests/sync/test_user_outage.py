"""A sync server that cannot be reached is said on the console while the client rides it out: a
warning every few seconds naming the server (a batch that takes 9 s says why), then one line
when it answers again, or the client's error at its deadline."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from spec.sync.client import OUTAGE_WARNING_EVERY_S

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import sys
    from reference.sync.client import SyncClient, SyncUnavailable

    client = SyncClient(sys.argv[1], "payments", deadline_s=float(sys.argv[2]))
    try:
        client.probe()
    except SyncUnavailable as error:
        print(error)
""")


def test_an_unreachable_server_is_named_every_few_seconds_until_the_deadline(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        location = f"grpc://127.0.0.1:{probe.getsockname()[1]}"
    deadline_s = OUTAGE_WARNING_EVERY_S + 1.9
    done = subprocess.run([sys.executable, "-c", PROBE, location, str(deadline_s)], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [warning] = done.stderr.splitlines()
    assert warning.startswith(f"sync server {location} has not accepted a put of origin payments for over 5 s "
                              f"(retrying for up to {deadline_s:g} s): "), warning
    assert done.stdout.startswith(f"sync server {location} did not accept a put of origin payments within"), done.stdout
