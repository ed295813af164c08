"""When a Delta commit of the sync store says it happened: never before the commit it follows.

The store stamps each commit (``commitInfo.timestamp``, the ``deletionTimestamp`` of its remove
actions, the commit file's modification time) from the server's wall clock, which an NTP step can
move back: a later version would then be stamped earlier than an older one, and a reader that
travels by timestamp would see them out of order.  Delta's in-commit timestamps settle it the same
way for every writer (PROTOCOL.md, "Writer Requirements for In-Commit Timestamps": the larger of
the time the writer attempted the commit and one millisecond after the previous commit's), so the
store follows that rule for every commit it stamps, whether or not the table enables the feature.
"""

from __future__ import annotations

COMMIT_STEP_MS = 1
"""How far a commit's stamp is at least ahead of the previous commit's (Delta's in-commit rule)."""


def commit_timestamp_ms(now_ms: int, previous_ms: int | None) -> int:
    """The timestamp of a commit attempted at wall-clock ``now_ms`` after a commit stamped ``previous_ms``
    (None: no previous stamp known, the table's first commit or its log cleaned up)."""
    return now_ms if previous_ms is None else max(now_ms, previous_ms + COMMIT_STEP_MS)
