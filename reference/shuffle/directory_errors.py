"""Errors of the shuffle's directory on the cluster provider: a task's node declared FAIL, this
task's own node cut off, a provider operation that failed."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from spec.cluster.errors import ClusterError
from spec.shuffle.coordination import CoordinationError, ShuffleKey
from spec.shuffle.errors import ShuffleError


class WriterNodeFailed(ShuffleError):
    """A registered writer's cluster node was declared FAIL: its streams can never complete."""

    condition = "STREAMING_SHUFFLE_WRITER_NODE_FAILED"

    def __init__(self, key: ShuffleKey, writer_id: int, node: str, executor: str) -> None:
        super().__init__(
            f"writer {writer_id} of shuffle {key.shuffle_id} (attempt {key.attempt}) ran on cluster node "
            f"{node} (executor {executor}), which the cluster provider declared FAIL; its streams cannot complete",
            shuffleId=key.shuffle_id, attempt=key.attempt, writerId=writer_id, node=node, executor=executor)
        self.key, self.writer_id, self.node, self.executor = key, writer_id, node, executor


class ReaderNodeFailed(ShuffleError):
    """A joined reader's cluster node was declared FAIL: the writers can never complete its stream."""

    condition = "STREAMING_SHUFFLE_READER_NODE_FAILED"

    def __init__(self, key: ShuffleKey, reader_id: int, node: str) -> None:
        super().__init__(
            f"reader {reader_id} of shuffle {key.shuffle_id} (attempt {key.attempt}) ran on cluster node "
            f"{node}, which the cluster provider declared FAIL; no writer can complete its stream",
            shuffleId=key.shuffle_id, attempt=key.attempt, readerId=reader_id, node=node)
        self.key, self.reader_id, self.node = key, reader_id, node


class ClusterUnreachable(ShuffleError):
    """This task's own node has been cut off from the cluster provider for longer than the others
    need to declare it FAIL: they have stopped, and no failure report can reach it any more."""

    condition = "STREAMING_SHUFFLE_CLUSTER_UNREACHABLE"

    def __init__(self, node: str, seconds: float, fail_bound: float) -> None:
        super().__init__(
            f"cluster node {node} has had no renewal from the cluster provider for {seconds:.1f} s, longer "
            f"than the provider's failure bound ({fail_bound:.1f} s): the other tasks consider this one failed",
            node=node, secondsCutOff=round(seconds, 3), failBound=fail_bound)
        self.node = node


class ClusterCoordinationError(CoordinationError):
    """A cluster-provider operation failed (its condition is in the message)."""

    condition = "STREAMING_SHUFFLE_COORDINATION_CLUSTER_ERROR"


@contextmanager
def provider_errors(what: str) -> Iterator[None]:
    """Raise a cluster provider's error in the block as a coordination error saying ``what`` failed."""
    try:
        yield
    except ClusterError as error:
        raise ClusterCoordinationError(f"{what}: {error}", clusterCondition=error.condition) from error
