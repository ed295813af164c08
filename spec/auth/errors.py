"""Typed errors of Spark's AuthEngine handshake and of its transport ciphers.

Spark reports most of these as an ``IllegalArgumentException`` or a ``GeneralSecurityException``
("Authentication failed."); here each cause has its own condition, so a test or a peer in another
language can tell a wrong secret from a wrong application id, a replay or a forged segment.
"""

from __future__ import annotations

from typing import ClassVar

from spec.errors import ProtocolError


class AuthError(ProtocolError):
    """Base of every authentication and transport-encryption error."""

    condition: ClassVar[str] = "AUTHENTICATION_ERROR"


class WrongSecret(AuthError):
    """The peer's sealed public key does not open under this side's secret (Spark: AEADBadTagException)."""

    condition = "AUTH_WRONG_SECRET"

    def __init__(self, sealed_by: str) -> None:
        super().__init__(f"the {sealed_by}'s key does not open with this secret: the secrets differ "
                         f"(or the message was altered)", sealedBy=sealed_by)


class AppIdMismatch(AuthError):
    """The peer names another application (Spark: "appId is different.")."""

    condition = "AUTH_APP_ID_MISMATCH"

    def __init__(self, expected: str, actual: str) -> None:
        super().__init__(f"appId is different: expected {expected!r}, received {actual!r}",
                         expected=expected, actual=actual)


class MalformedHandshake(AuthError):
    """A handshake frame or ``AuthMessage`` that does not decode (Spark: "Unknown challenge message.")."""

    condition = "AUTH_MALFORMED_MESSAGE"

    def __init__(self, reason: str) -> None:
        super().__init__(f"malformed handshake message: {reason}", reason=reason)


class ReplayedChallenge(AuthError):
    """A challenge this server already answered (same salt): a recording played back.

    Spark answers a replayed challenge with a fresh key pair (the replayer cannot use the session);
    this server refuses it outright."""

    condition = "AUTH_REPLAYED_CHALLENGE"

    def __init__(self, salt: bytes) -> None:
        super().__init__(f"challenge with salt {salt.hex()} was already answered", salt=salt.hex())


class UnauthenticatedFrame(AuthError):
    """A frame other than the handshake's before authentication completed
    (Spark: "Unauthenticated call to receive()")."""

    condition = "AUTH_UNAUTHENTICATED_FRAME"

    def __init__(self, message_type: int) -> None:
        super().__init__(f"frame of transport type {message_type} before authentication", messageType=message_type)


class HandshakeRejected(AuthError):
    """The server answered the challenge with an RpcFailure (Spark: "Authentication failed.")."""

    condition = "AUTH_REJECTED_BY_PEER"

    def __init__(self, reason: str) -> None:
        super().__init__(f"the server rejected the handshake: {reason}", reason=reason)


class HandshakeIncomplete(AuthError):
    """The connection ended before the handshake completed."""

    condition = "AUTH_HANDSHAKE_INCOMPLETE"

    def __init__(self, role: str) -> None:
        super().__init__(f"the connection closed before the {role}'s handshake completed", role=role)


class TagMismatch(AuthError):
    """A transport segment failed its AES-GCM tag, or its framing is impossible: forged or corrupted."""

    condition = "AUTH_TRANSPORT_TAG_MISMATCH"

    def __init__(self, reason: str) -> None:
        super().__init__(f"encrypted transport message rejected: {reason}", reason=reason)
