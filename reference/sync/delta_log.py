"""The store's own Delta log entries, for what deltalake's transaction API cannot express.

deltalake 1.x commits add and remove actions without a ``deletionVector`` field, so commits
that put deletion vectors on files are written here: the JSON of the next log version,
created only if absent (a hard link of a fully written temporary file, which fails when the
version exists), so a concurrent writer's commit is never overwritten and a reader never sees
half a commit.  The DV descriptors of the live files, which deltalake does not expose, are
read back from the log (last checkpoint, then the commits after it), and so are the DVs
of its tombstones, which vacuum must keep while the tombstones last.  Local tables only:
object stores need their own put-if-absent, which deltalake does not expose to Python.  Like
deltalake's own local writes, nothing is fsynced: a killed process loses nothing it committed,
a power loss may.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq

from spec.delta.deletion_vectors import DeletionVectorDescriptor

LOG_DIR = "_delta_log"
_COMMIT_NAME = re.compile(r"[0-9]{20}\.json")


class CommitConflict(Exception):
    """Another writer created the log version this commit wanted."""


def local_dir(uri: str) -> Path | None:
    """The directory of a local table URI (a path or ``file://``), None for an object store."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(uri) if not parsed.scheme or len(parsed.scheme) == 1 else None


def log_entry(table_dir: Path, version: int) -> Path:
    """The JSON file of log version ``version``."""
    return table_dir / LOG_DIR / f"{version:020d}.json"


def write_file(table_dir: Path, name: str, data: bytes) -> None:
    """A new file of the table (a DV file), written before any commit names it."""
    (table_dir / name).write_bytes(data)


def write_commit(table_dir: Path, version: int, actions: Iterable[Mapping[str, Any] | str],
                 stamped_ms: int | None = None) -> None:
    """Create log version ``version`` holding ``actions`` (objects, or their JSON text), modified at
    ``stamped_ms`` if given (the commit's timestamp, which readers without in-commit timestamps take
    from the file); ``CommitConflict`` if it exists."""
    log = table_dir / LOG_DIR
    temp = log / f".{version:020d}.json.{uuid.uuid4()}.tmp"
    temp.write_text("".join((a if isinstance(a, str) else json.dumps(a, separators=(",", ":"))) + "\n"
                            for a in actions))
    if stamped_ms is not None:
        os.utime(temp, ns=(stamped_ms * 1_000_000, stamped_ms * 1_000_000))
    try:
        os.link(temp, log_entry(table_dir, version))
    except FileExistsError:
        raise CommitConflict(f"log version {version} was written by another writer") from None
    finally:
        temp.unlink()


def commit_timestamp(table_dir: Path, version: int) -> int | None:
    """The ``commitInfo.timestamp`` of log version ``version`` (None: no such entry, or it has none)."""
    try:
        with open(log_entry(table_dir, version), encoding="utf-8") as entry:
            for line in entry:
                if line.startswith('{"commitInfo"'):
                    stamp = json.loads(line)["commitInfo"].get("timestamp")
                    return stamp if isinstance(stamp, int) else None
    except FileNotFoundError:
        return None
    return None


def latest_commit_info(table_dir: Path) -> Mapping[str, Any] | None:
    """The ``commitInfo`` of the table's latest log version (None: no log entry, or no commitInfo in it).

    One directory listing and one small file, however long the log: every writer creates a log entry
    whole (put-if-absent of a fully written file), so the newest entry listed is a complete commit."""
    log = table_dir / LOG_DIR
    try:
        latest = max((name for name in os.listdir(log) if _COMMIT_NAME.fullmatch(name)), default=None)
        text = None if latest is None else (log / latest).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in (text or "").split("\n"):
        info = json.loads(line).get("commitInfo") if line.startswith('{"commitInfo"') else None
        if isinstance(info, dict):
            return info
    return None


def _checkpoint(log: Path, version: int) -> tuple[int, list[Path]]:
    """The newest classic checkpoint at or below ``version`` and its part files ((-1, []) without one)."""
    best: tuple[int, list[Path]] = (-1, [])
    for part in log.glob("*.checkpoint*.parquet"):
        v = int(part.name.split(".", 1)[0])
        if best[0] < v <= version:
            best = (v, [])
        if v == best[0]:
            best[1].append(part)
    return best


def _descriptor(action: Mapping[str, Any]) -> DeletionVectorDescriptor | None:
    dv = action.get("deletionVector")
    return DeletionVectorDescriptor.from_json(dict(dv)) if dv else None


@dataclass
class LogFiles:
    """The data files of one log version as the store needs them."""

    live: dict[str, DeletionVectorDescriptor | None] = field(default_factory=dict)
    """Path (decoded, relative) -> the DV of each live file (None: no DV)."""
    removed: list[tuple[DeletionVectorDescriptor, int]] = field(default_factory=list)
    """The DV and deletion time (ms) of every remove action still in the log (tombstones)."""


def replay(table_dir: Path, version: int) -> LogFiles:
    """The files of ``version``: the last checkpoint at or below it, then the commits after it."""
    log = table_dir / LOG_DIR
    start, parts = _checkpoint(log, version)
    files = LogFiles()
    for part in parts:
        actions = pq.read_table(part, columns=["add", "remove"])
        for add in actions.column("add").to_pylist():
            if add is not None:
                files.live[unquote(add["path"])] = _descriptor(add)
        for remove in actions.column("remove").to_pylist():
            dv = None if remove is None else _descriptor(remove)
            if dv is not None:
                files.removed.append((dv, int(remove.get("deletionTimestamp") or 0)))
    for v in range(start + 1, version + 1):
        adds: list[Mapping[str, Any]] = []
        # A commit is JSON lines cut at "\n" only: splitlines() also cuts inside names holding U+0085 or U+2028.
        for line in log_entry(table_dir, v).read_text(encoding="utf-8").split("\n"):
            action = json.loads(line) if line.strip() else {}
            if "remove" in action:
                remove = action["remove"]
                files.live.pop(unquote(remove["path"]), None)
                dv = _descriptor(remove)
                if dv is not None:
                    files.removed.append((dv, int(remove.get("deletionTimestamp") or 0)))
            elif "add" in action:
                adds.append(action["add"])
        for add in adds:  # an add and a remove of one path in a commit: the add is the live file
            files.live[unquote(add["path"])] = _descriptor(add)
    return files
