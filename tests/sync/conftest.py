"""In-process sync servers on a fresh store, shut down after the test, and raw puts against them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

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
        server = SyncServer(DeltaStore(str(store or tmp_path / "store")), settings=settings, **options)
        threading.Thread(target=server.serve, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.shutdown()


def raw_put(location: str, cmd: SyncCommand | bytes, batches: list[pa.Table] | None = None) -> PutOutcome:
    """One DoPut with ``cmd`` (or raw descriptor bytes) and ``batches`` written in order."""
    payload = cmd if isinstance(cmd, bytes) else cmd.to_descriptor_cmd()
    return do_put(location, payload, batches or [], timeout=60.0)
