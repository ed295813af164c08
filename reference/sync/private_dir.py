"""The sync server's private directory (gRPC's unix socket behind the front), and what a killed server left.

A server stopped in any orderly way removes its directory; one killed with ``kill -9`` cannot, and a crash loop
would fill the temporary directory with them. So each directory holds a lock file its server keeps locked
(``flock``) for as long as it lives, and a server starting removes every directory of this kind whose lock nobody
holds. The lock, not a process id, says who is alive: it works across pid namespaces sharing one ``/tmp``, and the
file is locked before it takes its name, so a directory being made by another server is never taken for a dead one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "sync-grpc-"
LOCK_NAME = "alive.lock"


def _unheld(lock: Path) -> bool:
    """Whether nobody holds ``lock`` (False too when it cannot be opened: not ours to judge)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_abandoned(parent: Path) -> list[Path]:
    """Remove the private directories under ``parent`` that this user owns and no living server holds; the removed."""
    removed = []
    for entry in parent.glob(f"{PREFIX}*"):
        try:
            owned = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if owned and _unheld(entry / LOCK_NAME):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


class PrivateDirectory:
    """A directory only this process may use (mode 0700), held by a lock until :meth:`remove`."""

    def __init__(self, parent: str | None = None) -> None:
        parent_dir = Path(parent or tempfile.gettempdir())
        remove_abandoned(parent_dir)
        self.path = tempfile.mkdtemp(prefix=PREFIX, dir=parent_dir)
        staged = os.path.join(self.path, LOCK_NAME + ".new")
        self._lock = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        os.rename(staged, os.path.join(self.path, LOCK_NAME))  # named only once held

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1
