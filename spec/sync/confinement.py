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


MAX_SEGMENT_BYTES = 255
MAX_NAME_BYTES = 1024
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def table_name(path: str) -> str:
    """The normalized relative name of ``path`` (``a//b/`` -> ``a/b``); raise InvalidTablePath.

    A name is segments of ASCII letters, digits, ``_`` and ``-``, none starting with ``_`` (Delta's
    ``_delta_log``, ``_change_data``) or ``.``, at most 255 bytes each and 1,024 in all: what every
    file system and object store keeps as is.  ``%`` is refused, so no encoded form (deltalake
    percent-decodes ``%2e%2e``) can name another place.
    """
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise InvalidTablePath(path, "control characters are not allowed")
    if "\\" in path:
        raise InvalidTablePath(path, "backslashes are not allowed")
    if path.startswith("/") or "://" in path or (len(path) >= _WINDOWS_DRIVE_LEN and path[1] == ":"):
        raise InvalidTablePath(path, "absolute paths are not allowed")
    segments = [s for s in path.split("/") if s != ""]
    if ".." in segments:
        raise InvalidTablePath(path, "'..' segments are not allowed")
    if not segments or segments == ["."]:
        raise InvalidTablePath(path, "the table path is empty")
    for segment in segments:
        if not set(segment) <= _NAME_CHARACTERS:
            raise InvalidTablePath(path, "a segment may hold only ASCII letters, digits, '_' and '-'")
        if segment.startswith("_"):
            raise InvalidTablePath(path, "a segment may not start with '_' or '.'")
        if len(segment) > MAX_SEGMENT_BYTES:
            raise InvalidTablePath(path, f"a segment is longer than {MAX_SEGMENT_BYTES} bytes")
    name = "/".join(segments)
    if len(name) > MAX_NAME_BYTES:
        raise InvalidTablePath(path, f"the name is longer than {MAX_NAME_BYTES} bytes")
    return name


def _prefix(location: str) -> str:
    return location.rstrip("/")


def check_store_location(store: StorageLocation | None, allowed: Sequence[str]) -> str | None:
    """The root a command's own ``store`` names, if an allowed location covers it; None for no store.

    ``allowed`` holds location prefixes; a location is covered when it equals one or lies
    below it (at a ``/`` boundary) without ``..`` segments anywhere (``/srv/allowed/../x://y``, a
    local path, leaves the allowed one before its ``://``).  Raises StoreLocationRefused.
    """
    if store is None or not store.location:
        return None
    location = _prefix(store.location)
    if ".." not in location.split("/") and any(
        location == _prefix(a) or location.startswith(_prefix(a) + "/") for a in allowed if a
    ):
        return location
    raise StoreLocationRefused(store.location)
