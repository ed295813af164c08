"""The driver's sync server process: a stopped one stays stopped, and nothing it started outlives it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reference.pipeline.syncserver import SyncServerFailed, SyncServerProcess


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_restart_after_stop_starts_nothing_and_stop_reaps_the_group(tmp_path: Path) -> None:
    server = SyncServerProcess(str(tmp_path / "store"), tmp_path / "server.log")
    server.start()
    first = server._proc
    assert first is not None and os.getpgid(first.pid) == first.pid  # it leads its own process group
    server.kill()  # the chaos restart's first half
    assert first.returncode is not None
    server.start()
    second = server._proc
    assert second is not None and server.generation == 2
    server.stop()
    assert second.returncode is not None and not _alive(second.pid)
    with pytest.raises(SyncServerFailed, match="stopping"):
        server.start()  # a restart racing the end of the run
    assert server._proc is None and server.generation == 2
