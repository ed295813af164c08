"""Fresh identifiers every backend hands out: the spec's model takes them as inputs so that it
stays deterministic."""

from __future__ import annotations

import secrets
import uuid

from spec.cluster.types import ShardId


def new_shard_id() -> ShardId:
    return ShardId(f"s-{uuid.uuid4().hex[:16]}")


def new_session_token() -> str:
    """A takeover token: unguessable, so only the session's owner can hand it on."""
    return secrets.token_hex(16)
