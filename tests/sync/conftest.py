"""In-process sync servers on a fresh store, shut down after the test, and raw puts against them.

A server runs on a ``ManualClock`` unless the test gives it another: its data ages, its transactions
time out and its flusher wakes only when the test moves that clock (``clock_of``, ``flush_pending``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conformance.sync.clock import ManualClock
from conformance.sync.suite import PutOutcome, do_put
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore
from spec.sync.messages import SyncCommand
from spec.sync.writer import SyncSettings

ServerFactory = Callable[..., SyncServer]


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[ServerFactory]:
    """``make(store=..., settings fields..., server keyword arguments...)`` starts a server."""
    servers: list[SyncServer] = []
    setting_names = set(SyncSettings.__dataclass_fields__)

    def make(store: Path | None = None, **kwargs: Any) -> SyncServer:
        settings = SyncSettings(**{k: v for k, v in kwargs.items() if k in setting_names})
        options = {k: v for k, v in kwargs.items() if k not in setting_names}
        options.setdefault("clock", ManualClock())
        server = SyncServer(DeltaStore(str(store or tmp_path / "store")), settings=settings, **options)
        threading.Thread(target=server.serve, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.shutdown()


def clock_of(server: SyncServer) -> ManualClock:
    """The manual clock a ``server_factory`` server runs on."""
    assert isinstance(server.clock, ManualClock), "a server given another clock"
    return server.clock


def flush_pending(server: SyncServer) -> bool:
    """Age what ``server`` holds past its replication lag on its manual clock: its flusher writes every
    table due (and discards a transaction past its timeout) before this returns.  True if a flush
    succeeded (another table may be failing)."""
    before = len(server.stats()["flush_seconds"])
    clock_of(server).advance(server.settings.max_replication_lag_s)
    return len(server.stats()["flush_seconds"]) > before


def raw_put(location: str, cmd: SyncCommand | bytes, batches: list[pa.Table] | None = None) -> PutOutcome:
    """One DoPut with ``cmd`` (or raw descriptor bytes) and ``batches`` written in order."""
    payload = cmd if isinstance(cmd, bytes) else cmd.to_descriptor_cmd()
    return do_put(location, payload, batches or [], timeout=60.0)
