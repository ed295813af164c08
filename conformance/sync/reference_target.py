"""The reference sync server as the suite's ``reference`` target, declaring ``flush-control``.

``python -m conformance.sync.reference_target --store DIR`` serves this project's sync server
(``reference.sync.server``) on DIR, flushing after every put, on a clock that starts at 0 and
moves only when the runner says so, allowing clients the store location ``DIR/allowed``. It prints
``CAPABILITIES store restart flush-control watermark store-locations truncate put-slots connections drain put-bound
stream-deadlines machines decode settings row-groups`` and ``LISTENING <port>``, then
answers the runner's flush-control lines on stdin, one line each (the contract: :mod:`conformance.sync.suite`). The harness embeds the server's endpoint
(``spec.sync.server.SyncServerEndpoint``) and a clock that moves only when told
(``conformance.sync.clock.ManualClock``): ``POLICY`` reconfigures the endpoint and has the flusher
look again, ``ADVANCE`` moves the clock and returns once the server has done what fell due by the
deadlines it computed itself (``SyncServerEndpoint.next_deadline``, each stream's ``PutStream`` deadline: the
transport waits on the same clock), so a deadline computed late shows; a server that asks again and again to be
woken at a time already reached (a deadline computed at or before the time it falls due, so nothing is done at
it) is held asleep and ``ADVANCE`` answers ``ERROR`` (``conformance.sync.clock.SPIN_LIMIT``) rather than never.
The production server has no back door for either.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from dataclasses import fields, replace  # noqa: E402

from conformance.compact_bytes import CompactFormError  # noqa: E402
from conformance.sync.clock import ManualClock  # noqa: E402
from reference.sync.server import SyncServer  # noqa: E402
from reference.sync.store import DeltaStore  # noqa: E402
from spec.sync.server import SyncServerEndpoint, recorded_durable  # noqa: E402
from spec.sync.flush_failures import FlushFailures  # noqa: E402
from spec.sync.writer import RowGroupLimits, SyncSettings  # noqa: E402

CAPABILITIES = ("store", "restart", "flush-control", "watermark", "store-locations", "truncate", "put-slots",
                "connections", "drain", "put-bound", "stream-deadlines", "machines", "decode", "settings", "row-groups")
PUT_SLOTS = 4
"""The target's max_concurrent_puts (``put-slots``): few, so holding every slot costs a case little."""
HIGH_WATERMARK = 16 * 1024 * 1024
"""The target's own high-watermark (``put-bound``: one put's bytes at most, what it holds at most): small, so a case
passes it with two messages of a few MiB; above any other case's pending data."""
MAX_CONNECTIONS = 8
"""The target's max_connections (``connections``): above the put slots, so every slot can be held."""
SILENCE_TIMEOUT_S = 60.0
"""How long a connection may stay silent, before its handshake or without a stream: longer than any case, so the
silent connections a case holds at the cap are closed by an eviction only, never by these deadlines (the
server's defaults are 2 s each)."""
TARGET_SETTINGS = SyncSettings(max_replication_lag_s=0.0, high_watermark_bytes=HIGH_WATERMARK)
"""The target's own settings: flush after every put, its own high-watermark, the rest the server's defaults."""
BACKOFF_SETTINGS = ("initial_backoff_s", "max_backoff_s")
"""The failing tables' waits (``spec.sync.flush_failures.FlushFailures``), settings of the ``SETTINGS`` line too."""
SETTING_NAMES = tuple(f.name for f in fields(SyncSettings)) + BACKOFF_SETTINGS
"""Every setting the ``SETTINGS`` line names (capability ``settings``): the sync settings and the retry backoff."""
ROW_GROUP_SETTINGS = ("row_group_max_rows", "row_group_max_bytes")
"""The store's row-group limits (``spec.sync.writer.RowGroupLimits``), settings of the ``SETTINGS`` line too (capability
``row-groups``): what a reader of a flushed table sees of them is its files' row groups, which no walk reads, so the
settings walks leave them to the suite's derived row-group cases."""
ALLOWED_LOCATION = "allowed"
"""The store location a client may name (``store-locations``): ``{store}/allowed`` and what lies below it."""


def answer(endpoint: SyncServerEndpoint, clock: ManualClock, line: str, server: SyncServer | None = None) -> str:
    """The one-line answer to one flush-control line."""
    words = line.split()
    if words[:1] == ["MACHINES"]:  # a walk of calls on one of the spec's machines (conformance/sync/machines_target.py)
        try:
            from conformance.sync import machines_target  # imported when asked: a restart's time is the suite's

            return "MACHINES " + json.dumps(machines_target.run(json.loads(line.split(None, 1)[1])))
        except (ValueError, KeyError, TypeError, IndexError):
            return "ERROR a MACHINES line holds one walk as JSON"
    if words[:1] == ["DECODE"]:  # bytes for one of the spec's decoders (conformance/sync/decode.py)
        try:
            from conformance.sync import decode  # imported when asked, as MACHINES

            return "DECODE " + json.dumps(decode.answer(json.loads(line.split(None, 1)[1])))
        except CompactFormError as broken:
            return f"ERROR {broken}"
        except (ValueError, KeyError, TypeError, IndexError):
            return "ERROR a DECODE line holds one input as JSON"
    try:
        if words[:1] == ["POLICY"] and len(words) in (4, 5):
            lag, count, size = float(words[1]), int(words[2]), int(words[3])
            watermark = int(words[4]) if len(words) == 5 else None
            if lag < 0 or count < 1 or size < 1 or (watermark is not None and watermark < 0):
                return "ERROR thresholds must be lag >= 0, count >= 1, bytes >= 1, watermark >= 0"
            endpoint.reconfigure(replace(endpoint.settings, max_replication_lag_s=lag, max_syncs_per_url=count,
                                         max_in_memory_bytes=size,
                                         high_watermark_bytes=HIGH_WATERMARK if watermark is None else watermark))
            clock.ring_all()  # the flusher looks again under the new policy before the answer
            return "OK"
        if words[:1] == ["ADVANCE"] and len(words) == 2:
            seconds = float(words[1])
            if seconds < 0:
                return "ERROR the clock does not go back"
            clock.advance(seconds)  # the flusher wakes only at the deadline the server itself computed
            if clock.take_spun():  # else it would never have settled: a deadline not ahead of the time it was due
                return "ERROR the server asked again and again to be woken at a time already reached"
            return "OK"
        if words[:1] == ["SETTINGS"]:
            return _configure(endpoint, clock, server, words[1:])
        if words == ["PENDING"]:
            return f"PENDING {endpoint.pending_bytes}"
        if words == ["DRAIN"]:
            endpoint.start_draining()  # what a shutdown decides first; the transport keeps serving here
            return "OK"
        if words == ["SLOTS"] and server is not None:
            return f"SLOTS {server.limits.max_concurrent_puts} {server.stats()['running_puts']}"
        if words == ["PUTBOUND"] and server is not None:
            return f"PUTBOUND {server.limits.high_watermark}"
        if words == ["STREAMS"] and server is not None:
            stats = server.stats()
            return (f"STREAMS {server.limits.first_message_timeout_s!r} {server.limits.put_timeout_s!r} "
                    f"{stats['silent_streams']} {stats['running_puts']}")
        if words[:1] == ["STOP"] and len(words) == 2 and server is not None:
            grace = float(words[1])
            if grace < 0:
                return "ERROR the grace is at least 0"
            threading.Thread(target=server.shutdown, args=(grace,), name="sync-stop", daemon=True).start()
            return "OK" if _until(lambda: server.stopping) else "ERROR the server did not begin to stop"
        if words == ["CONNECTIONS"] and server is not None:
            return f"CONNECTIONS {server.limits.max_connections} {server.stats()['connections']}"
    except ValueError:
        pass
    return f"ERROR unknown line {line.strip()[:80]!r}"


def _configure(endpoint: SyncServerEndpoint, clock: ManualClock, server: SyncServer | None, words: list[str]) -> str:
    """``SETTINGS name=value ...``: the target's own settings with those named replaced, from now on (what a server
    started with them does; a ``POLICY`` set before is replaced too); ``SETTINGS`` alone: its own again."""
    given: dict[str, Any] = {}
    for word in words:
        name, _, value = word.partition("=")
        if name not in SETTING_NAMES + ROW_GROUP_SETTINGS or name in given:
            return f"ERROR settings are name=value, each once, of {' '.join(SETTING_NAMES + ROW_GROUP_SETTINGS)}"
        counted = name in ROW_GROUP_SETTINGS or isinstance(getattr(TARGET_SETTINGS, name, 0.0), int)
        given[name] = int(value) if counted else float(value)
        least = 1 if name in ("max_syncs_per_url", *ROW_GROUP_SETTINGS) else 0
        if not given[name] >= least or given[name] == float("inf"):
            return f"ERROR {name} must be a finite number, at least {least}"
    own_groups = RowGroupLimits()
    row_groups = RowGroupLimits(given.pop("row_group_max_rows", own_groups.max_rows),
                                given.pop("row_group_max_bytes", own_groups.max_bytes))
    settings = replace(TARGET_SETTINGS, **{n: v for n, v in given.items() if n not in BACKOFF_SETTINGS})
    own = FlushFailures()
    failures = endpoint.flush_failures
    failures.initial_backoff_s = given.get("initial_backoff_s", own.initial_backoff_s)
    failures.max_backoff_s = given.get("max_backoff_s", own.max_backoff_s)
    if server is not None:
        server.reconfigure(settings, row_groups)
    else:
        endpoint.reconfigure(settings)
    clock.ring_all()  # the flusher looks again under the new settings before the answer
    return "OK"


STOP_WAIT_S = 30.0
"""How long, in real seconds, ``STOP`` waits for the server to begin stopping (a bound, never reached when it works)."""


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + STOP_WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def serve(store_dir: str) -> tuple[SyncServer, SyncServerEndpoint, ManualClock]:
    """The target's server on ``store_dir``, with its endpoint and clock (also what the walk selection runs)."""
    clock = ManualClock(wakes_at_deadlines=True)
    store = DeltaStore(store_dir)
    store.check_writable()
    endpoint = SyncServerEndpoint(TARGET_SETTINGS, recorded_durable(store.recorded_durable()))
    server = SyncServer(store, endpoint=endpoint, clock=clock, maintenance_interval_s=0, max_concurrent_puts=PUT_SLOTS,
                        max_connections=MAX_CONNECTIONS, handshake_timeout_s=SILENCE_TIMEOUT_S,
                        idle_timeout_s=SILENCE_TIMEOUT_S,
                        allowed_locations=[os.path.join(store_dir, ALLOWED_LOCATION)])
    return server, endpoint, clock


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.sync.reference_target")
    parser.add_argument("--store", required=True)
    args = parser.parse_args()
    server, endpoint, clock = serve(args.store)
    print("CAPABILITIES " + " ".join(CAPABILITIES), flush=True)
    print(f"LISTENING {server.port}", flush=True)
    try:
        for line in sys.stdin:
            print(answer(endpoint, clock, line, server), flush=True)
    finally:
        server.shutdown(grace_s=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
