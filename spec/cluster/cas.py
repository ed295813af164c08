"""A compare-and-swap write retried on the revision found: the one policy of every runtime writer of
a shard-log or gossip key (the shuffle's directory, the pipeline's control plane).

Sans-IO: :class:`CasWrite` says which op to send and is told each conflict; the caller sends
(reference/cluster/cas.py). The value is decided from the entry the write expects (``change(current)``;
None: nothing to change), sent expecting that entry's revision (no entry: an insert), and after a
RevisionMismatch decided again from the entry actually found, so a writer never overwrites what it
did not see. After ``attempts`` conflicts in a row the key is contended beyond what a writer should
wait out: :class:`KeptChanging`.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Final

from spec.cluster.types import Entry, MetadataOp, Revision
from spec.errors import RuntimeFailure

CAS_ATTEMPTS: Final = 32
"""Writes sent per value at most: each conflict but the last is retried on the revision found."""


class KeptChanging(RuntimeFailure):
    """Every attempt met a revision newer than the one it expected."""

    condition: ClassVar[str] = "CLUSTER_CAS_KEPT_CHANGING"


class CasWrite:
    """One key's write: :meth:`next_op` to send, :meth:`written` or :meth:`conflict` with its answer."""

    def __init__(self, key: str, current: Entry | None, change: Callable[[Entry | None], bytes | None],
                 attempts: int = CAS_ATTEMPTS) -> None:
        self.key = key
        self._current = current
        self._change = change
        self._attempts = attempts
        self._conflicts = 0
        self._value = b""

    def next_op(self) -> MetadataOp | None:
        """The op to send now, or None when ``change`` finds nothing to change."""
        value = self._change(self._current)
        if value is None:
            return None
        self._value = value
        return MetadataOp(key=self.key, value=value, expected=None if self._current is None else self._current.revision)

    def written(self, revision: Revision) -> Entry:
        """The last op committed at ``revision``: the entry it wrote."""
        return Entry(key=self.key, value=self._value, revision=revision)

    def conflict(self, found: Entry | None) -> None:
        """The last op met ``found`` instead of what it expected; KeptChanging after ``attempts`` conflicts."""
        self._conflicts += 1
        if self._conflicts >= self._attempts:
            raise KeptChanging(f"{self.key} kept changing under {self._attempts} compare-and-swap attempts",
                               key=self.key, attempts=self._attempts)
        self._current = found
