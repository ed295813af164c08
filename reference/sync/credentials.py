"""The sync server's and its clients' credentials: a bearer token and TLS (both off by default).

Not Spark's AuthEngine (``spec.auth``, the shuffle's handshake): a sync call carries a token in a header.

Every call must carry Arrow Flight's standard ``authorization: Bearer <token>`` header;
a missing or wrong token is UNAUTHENTICATED before the put is read (``reference.sync.transport``).
No token (None) turns this off; an empty or whitespace-only token is refused (``spec.shared_secret``).
TLS is gRPC's (``grpc+tls://``, a PEM certificate and key on the server, a PEM CA file on
pyarrow's Flight client).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.flight as flight

from spec.shared_secret import configured_secret

AUTHORIZATION = "authorization"
BEARER = "Bearer "


@dataclass(frozen=True)
class ServerSecurity:
    """Bearer token and TLS certificate/key (PEM bytes) of a server; all off by default."""

    token: str | None = None
    tls_cert: bytes | None = None
    tls_key: bytes | None = None

    def __post_init__(self) -> None:
        configured_secret(self.token, "the sync server's bearer token")


def bearer_token_matches(metadata: Sequence[tuple[str, str | bytes]], token: str) -> bool:
    """Whether a call's metadata carries exactly one ``authorization`` header, ``Bearer <token>``."""
    values = [value for key, value in metadata if key.lower() == AUTHORIZATION]
    if len(values) != 1:
        return False
    given = values[0].encode() if isinstance(values[0], str) else bytes(values[0])
    return hmac.compare_digest(given, (BEARER + token).encode())


@dataclass(frozen=True)
class ClientSecurity:
    """What a client presents: a bearer token and the CA that signed the server's certificate."""

    token: str | None = None
    ca_file: str | None = None

    def __post_init__(self) -> None:
        configured_secret(self.token, "the bearer token")

    def call_headers(self) -> list[tuple[bytes, bytes]]:
        """Headers for every call."""
        return [(AUTHORIZATION.encode(), (BEARER + self.token).encode())] if self.token else []

    def connect(self, location: str) -> flight.FlightClient:
        """A Flight client for ``location`` trusting ``ca_file`` (for ``grpc+tls://`` locations)."""
        if self.ca_file is None:
            return flight.FlightClient(location)
        return flight.FlightClient(location, tls_root_certs=Path(self.ca_file).read_bytes())
