"""Bearer-token authentication and TLS for the sync server and its clients (both off by default).

Every call must carry Arrow Flight's standard ``authorization: Bearer <token>`` header;
a missing or wrong token is UNAUTHENTICATED before the call reaches the server.  TLS
uses pyarrow Flight's own support (``grpc+tls://``, a PEM certificate and key on the
server, a PEM CA file on the client).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.flight as flight

AUTHORIZATION = "authorization"
BEARER = "Bearer "


def read_token(path: str) -> str:
    """The token in ``path`` (surrounding whitespace removed); an empty file is an error."""
    token = Path(path).read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


class _Authenticated(flight.ServerMiddleware):  # type: ignore[misc]
    """Marks a call whose token was checked."""


class BearerTokenMiddleware(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Refuses every call whose ``authorization`` header is not ``Bearer <token>``."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._expected = (BEARER + token).encode()

    def start_call(self, info: Any, headers: dict[str, list[Any]]) -> _Authenticated:
        values = headers.get(AUTHORIZATION, [])
        given = values[0] if values else ""
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        if len(values) != 1 or not hmac.compare_digest(given_bytes, self._expected):
            raise flight.FlightUnauthenticatedError("A valid bearer token is required")
        return _Authenticated()


@dataclass(frozen=True)
class ClientSecurity:
    """What a client presents: a bearer token and the CA that signed the server's certificate."""

    token: str | None = None
    ca_file: str | None = None

    def call_headers(self) -> list[tuple[bytes, bytes]]:
        """Headers for every call."""
        return [(AUTHORIZATION.encode(), (BEARER + self.token).encode())] if self.token else []

    def connect(self, location: str) -> flight.FlightClient:
        """A Flight client for ``location`` trusting ``ca_file`` (for ``grpc+tls://`` locations)."""
        if self.ca_file is None:
            return flight.FlightClient(location)
        return flight.FlightClient(location, tls_root_certs=Path(self.ca_file).read_bytes())
