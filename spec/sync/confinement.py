"""Where a put may write: table paths are relative names inside the store root.

Seafowl joins the command's ``path`` to its store root; taken literally, ``..``
segments, absolute paths and an empty path write outside the store or at its root.
This module turns a wire path into a normalized relative name or refuses it, and
decides whether a client-supplied ``StorageLocation`` is covered by the operator's
allow-list (none is allowed by default).
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.sync.errors import InvalidTablePath, StoreLocationRefused
from spec.sync.messages import StorageLocation

_WINDOWS_DRIVE_LEN = 2


def table_name(path: str) -> str:
    """The normalized relative name of ``path`` (``a//b/`` -> ``a/b``); raise InvalidTablePath."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise InvalidTablePath(path, "control characters are not allowed")
    if "\\" in path:
        raise InvalidTablePath(path, "backslashes are not allowed")
    if path.startswith("/") or "://" in path or (len(path) >= _WINDOWS_DRIVE_LEN and path[1] == ":"):
        raise InvalidTablePath(path, "absolute paths are not allowed")
    segments = [s for s in path.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise InvalidTablePath(path, "'..' segments are not allowed")
    if not segments:
        raise InvalidTablePath(path, "the table path is empty")
    return "/".join(segments)


def _prefix(location: str) -> str:
    return location.rstrip("/")


def check_store_location(store: StorageLocation | None, allowed: Sequence[str]) -> str | None:
    """The root a command's own ``store`` names, if an allowed location covers it; None for no store.

    ``allowed`` holds location prefixes; a location is covered when it equals one or lies
    below it (at a ``/`` boundary) without ``..`` segments.  Raises StoreLocationRefused.
    """
    if store is None or not store.location:
        return None
    location = _prefix(store.location)
    below = location.split("://", 1)[-1].split("/")
    if ".." not in below and any(
        location == _prefix(a) or location.startswith(_prefix(a) + "/") for a in allowed if a
    ):
        return location
    raise StoreLocationRefused(store.location)
