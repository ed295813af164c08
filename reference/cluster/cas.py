"""Carries out a compare-and-swap write (spec/cluster/cas.py) on a provider."""

from __future__ import annotations

from typing import Callable

from spec.cluster.cas import CasWrite
from spec.cluster.errors import RevisionMismatch
from spec.cluster.types import Entry, MetadataOp, Revision


def write_with_cas(write: CasWrite, send: Callable[[MetadataOp], Revision]) -> Entry | None:
    """Send ``write``'s ops until one commits: the entry written, or None when there was nothing to
    change. A RevisionMismatch goes back to ``write``, which raises KeptChanging when it gives up;
    any other error of ``send`` propagates."""
    while (op := write.next_op()) is not None:
        try:
            return write.written(send(op))
        except RevisionMismatch as mismatch:
            write.conflict(mismatch.actual)
    return None
