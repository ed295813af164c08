"""A directory node's writes to its shard's log: each a compare-and-swap on the revision last seen,
retried on the revision actually found (spec/cluster/cas.py)."""

from __future__ import annotations

from typing import Callable

from reference.cluster.cas import write_with_cas
from reference.shuffle.directory_errors import ClusterCoordinationError
from reference.shuffle.shard_view import ShardView
from spec.cluster.cas import CasWrite, KeptChanging
from spec.cluster.errors import ClusterError
from spec.cluster.interface import ClusterProvider
from spec.cluster.types import Entry


def write_entry(provider: ClusterProvider, view: ShardView, key: str,
                change: Callable[[Entry | None], bytes | None]) -> None:
    """Write ``change(current)`` at ``key`` unless it is None (nothing to change).

    A committed write enters the node's view at once, not when its notification arrives: the
    next write (a writer failing right after it registered unregisters at once) must not
    decide on a view that lacks this node's own last write, or it changes nothing.
    """
    try:
        written = write_with_cas(CasWrite(key, view.entry(key), change), lambda op: provider.update_shard_log([op]))
    except KeptChanging as kept:
        raise ClusterCoordinationError(kept.message) from None
    except ClusterError as error:
        raise ClusterCoordinationError(f"update of {key}: {error}", clusterCondition=error.condition) from error
    if written is not None:
        view.remember(written)
