"""Typed errors of the cluster-provider interface, each with a condition name and a wire code.

An operation completes exactly once: it returns, or raises one of these. The wire service carries
(code, message) and the client re-raises the same class, so a Core cannot tell a remote provider
from a local one by its errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from spec.errors import ProtocolError

if TYPE_CHECKING:
    from spec.cluster.types import Entry


class ClusterError(ProtocolError):
    """Base of every provider error; ``condition`` is stable, the message is for people."""

    condition: ClassVar[str] = "CLUSTER_ERROR"
    code: ClassVar[int] = 1


class RevisionMismatch(ClusterError):
    """CAS failed: the whole batch was rejected; ``actual`` is the key's entry at that time."""

    condition = "CAS_REVISION_MISMATCH"
    code = 2

    def __init__(self, key: str, expected: int | None, actual: Entry | None) -> None:
        now = "absent" if actual is None else f"revision {actual.revision}"
        want = "absent" if expected is None else f"revision {expected}"
        super().__init__(f"key {key!r}: expected {want}, found {now}", key=key, expected=expected, actual=actual)
        self.key, self.expected, self.actual = key, expected, actual


class NotAMember(ClusterError):
    """The calling node is not (or no longer) in the cluster."""

    condition = "NOT_A_MEMBER"
    code = 3


class UnknownNode(ClusterError):
    condition = "UNKNOWN_NODE"
    code = 4


class UnknownShard(ClusterError):
    condition = "UNKNOWN_SHARD"
    code = 5


class InvalidBatch(ClusterError):
    """A batch broke a bound (size, key, value, duplicate key) and was not attempted."""

    condition = "INVALID_BATCH"
    code = 6


class InvalidIdentifier(ClusterError):
    condition = "INVALID_IDENTIFIER"
    code = 7

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(f"{kind} id {text[:60]!r} is not 1..128 bytes of [A-Za-z0-9._:-]", kind=kind, text=text[:60])


class ProviderUnavailable(ClusterError):
    """The backend could not be reached before the operation's deadline; the outcome is unknown."""

    condition = "PROVIDER_UNAVAILABLE"
    code = 8


class ProviderClosed(ClusterError):
    """The node handle was closed; no further operation or notification."""

    condition = "PROVIDER_CLOSED"
    code = 9


class MalformedMembership(ClusterError):
    condition = "MALFORMED_MEMBERSHIP"
    code = 10


class FrameTooLarge(ClusterError):
    """A wire frame announced more bytes than the bound; nothing was allocated."""

    condition = "FRAME_TOO_LARGE"
    code = 11


class MalformedMessage(ClusterError):
    condition = "MALFORMED_MESSAGE"
    code = 12


class NodeIdInUse(ClusterError):
    """A live session already holds this node id (principle: identities are claimed once).

    The id becomes free when that session ends (its handle closed, its connection closed, its
    lease expired); before that only a holder of the session's takeover token may claim it.
    """

    condition = "NODE_ID_IN_USE"
    code = 13


class Unauthenticated(ClusterError):
    """The peer did not present the shared secret the service requires."""

    condition = "UNAUTHENTICATED"
    code = 14


class InvalidAddress(ClusterError):
    """JoinCluster with an address longer than MAX_ADDRESS_BYTES; the node did not join."""

    condition = "INVALID_ADDRESS"
    code = 15


class ClusterFull(ClusterError):
    """JoinCluster by a new node when the cluster already has MAX_MEMBERS members."""

    condition = "CLUSTER_FULL"
    code = 16


ERRORS_BY_CODE: dict[int, type[ClusterError]] = {
    cls.code: cls for cls in (ClusterError, NotAMember, UnknownNode, UnknownShard, InvalidBatch,
                              InvalidIdentifier, ProviderUnavailable, ProviderClosed, MalformedMembership,
                              FrameTooLarge, MalformedMessage, NodeIdInUse, Unauthenticated, InvalidAddress,
                              ClusterFull)
}
"""Errors rebuilt from (code, message) on the wire, each as the class its code names (``session.error_from``:
the message as sent, a constructor's own fields left out); RevisionMismatch travels as CAS_ERROR, with its fields."""
