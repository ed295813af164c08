"""Valkey's modular-clustering cluster provider as data and pure code: the provider interface,
membership and metadata types, the semantic model, the failure detector, the service's bytes, both
ends of a service session as sans-IO machines, and the errors.

The names below are the surface a provider, a Core or a test needs; the modules hold the rest.
"""

from spec.cluster.detector import FailureDetector, FailurePolicy
from spec.cluster.errors import ClusterError, RevisionMismatch
from spec.cluster.interface import ClusterBackend, ClusterCore, ClusterProvider, FailureTiming
from spec.cluster.model import ClusterModel, GossipUpdate, MembershipUpdate, Notification, ShardLogUpdate
from spec.cluster.session import ClientSession, ServiceSession
from spec.cluster.types import (
    Entry,
    Membership,
    MetadataOp,
    NodeId,
    NodeInfo,
    NodeState,
    Revision,
    Scope,
    ShardId,
)

__all__ = [
    "ClientSession",
    "ClusterBackend",
    "ClusterCore",
    "ClusterError",
    "ClusterModel",
    "ClusterProvider",
    "Entry",
    "FailureDetector",
    "FailurePolicy",
    "FailureTiming",
    "GossipUpdate",
    "Membership",
    "MembershipUpdate",
    "MetadataOp",
    "NodeId",
    "NodeInfo",
    "NodeState",
    "Notification",
    "Revision",
    "RevisionMismatch",
    "Scope",
    "ServiceSession",
    "ShardId",
    "ShardLogUpdate",
]
