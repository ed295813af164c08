"""A directory node's writes to its shard's log: each a compare-and-swap on the revision last seen,
retried on the revision actually found."""

from __future__ import annotations

from typing import Callable, Final

from reference.shuffle.directory_errors import ClusterCoordinationError
from reference.shuffle.shard_view import ShardView
from spec.cluster.errors import ClusterError, RevisionMismatch
from spec.cluster.interface import ClusterProvider
from spec.cluster.types import Entry, MetadataOp

CAS_ATTEMPTS: Final = 32
"""Writes retried against the revision actually found; more conflicts than this is a coordination error."""


def write_entry(provider: ClusterProvider, view: ShardView, key: str,
                change: Callable[[Entry | None], bytes | None]) -> None:
    """Write ``change(current)`` at ``key`` unless it is None (nothing to change).

    A committed write enters the node's view at once, not when its notification arrives: the
    next write (a writer failing right after it registered unregisters at once) must not
    decide on a view that lacks this node's own last write, or it changes nothing.
    """
    current = view.entry(key)
    for _ in range(CAS_ATTEMPTS):
        value = change(current)
        if value is None:
            return
        try:
            revision = provider.update_shard_log(
                [MetadataOp(key=key, value=value, expected=None if current is None else current.revision)])
            view.remember(Entry(key=key, value=value, revision=revision))
            return
        except RevisionMismatch as mismatch:
            current = mismatch.actual
        except ClusterError as error:
            raise ClusterCoordinationError(f"update of {key}: {error}", clusterCondition=error.condition) from error
    raise ClusterCoordinationError(f"{key} kept changing under {CAS_ATTEMPTS} compare-and-swap attempts")
