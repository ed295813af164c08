"""The sync server's private directory: what a server killed with kill -9 left is removed by the next one to start,
and never a living server's, nor one still being made."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from reference.sync.private_dir import LOCK_NAME, PREFIX, PrivateDirectory

HOLDER = """
import sys, time
from reference.sync.private_dir import PrivateDirectory
held = PrivateDirectory(sys.argv[1])
print(held.path, flush=True)
time.sleep(600)
"""


def holder(parent: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process holding a private directory under ``parent``, as a running server does."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(parent)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_a_killed_servers_directory_is_removed_at_the_next_start_and_a_living_ones_kept(tmp_path: Path) -> None:
    killed, killed_dir = holder(tmp_path)
    living, living_dir = holder(tmp_path)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert killed_dir.is_dir() and (killed_dir / LOCK_NAME).exists()  # kill -9: nothing cleaned up
        started = PrivateDirectory(str(tmp_path))
        assert not killed_dir.exists()
        assert living_dir.is_dir() and Path(started.path).is_dir()
        started.remove()
        assert not Path(started.path).exists()
    finally:
        living.kill()
        living.wait()


def test_a_directory_without_its_lock_yet_is_left_alone(tmp_path: Path) -> None:
    """Another server between making its directory and naming its held lock: not taken for a dead one."""
    being_made = tmp_path / f"{PREFIX}being-made"
    being_made.mkdir()
    (being_made / f"{LOCK_NAME}.new").touch()
    started = PrivateDirectory(str(tmp_path))
    assert being_made.is_dir()
    started.remove()
