"""A small client for etcd v3's gRPC JSON gateway (``/v3/...``), as served by etcd 3.4.

Plain ``http.client`` with a timeout on every call: each request has a deadline, a watch stream
is cancelled by shutting its socket down, and every transport failure is ProviderUnavailable.
Keys and values travel base64-encoded; 64-bit numbers arrive as JSON strings.

As deployed, etcd wants TLS (a CA to trust, often a client certificate and key) and users:
an :class:`EtcdEndpoint` carries both; with a user, the gateway authenticates
(``/v3/auth/authenticate``), sends the token in the ``Authorization`` header, and authenticates
again once when etcd reports the token invalid (tokens expire).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, unquote, urlsplit

from spec.cluster.errors import ProviderUnavailable, Unauthenticated


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    mod_revision: int
    create_revision: int
    lease: int


@dataclass(frozen=True, slots=True)
class WatchEvent:
    deleted: bool
    kv: KeyValue


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def prefix_end(prefix: str) -> str:
    """The range end that selects every key starting with ``prefix`` (ASCII prefixes)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _kv(item: dict[str, Any]) -> KeyValue:
    return KeyValue(base64.b64decode(item["key"]).decode(), base64.b64decode(item.get("value", "")),
                    int(item.get("mod_revision", 0)), int(item.get("create_revision", 0)),
                    int(item.get("lease", 0)))


@dataclass(frozen=True, slots=True)
class EtcdEndpoint:
    """Where etcd is and how to prove who we are.

    From ``http://HOST:PORT`` or ``https://HOST:PORT``, or the provider setting
    ``etcd://[USER[:PASSWORD]@]HOST:PORT[/NAMESPACE][?ca=PATH&cert=PATH&key=PATH&password_file=PATH]``
    (a CA or a client certificate means TLS; ``password_file`` keeps the password out of the
    setting).
    """

    host: str
    port: int = 2379
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str) -> EtcdEndpoint:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname is None:
            raise ValueError(f"no host in etcd url {parts.scheme}://{parts.hostname}")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"ca", "cert", "key", "password_file"}
        if unknown:
            raise ValueError(f"unknown etcd url options {sorted(unknown)}; expected ca, cert, key, password_file")
        password = None if parts.password is None else unquote(parts.password)
        if "password_file" in query:
            password = Path(query["password_file"]).read_text(encoding="utf-8").strip()
        tls = parts.scheme == "https" or "ca" in query or "cert" in query
        return cls(parts.hostname, parts.port or 2379, tls, query.get("ca"), query.get("cert"), query.get("key"),
                   None if parts.username is None else unquote(parts.username), password)

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        return f"{'https' if self.tls else 'http'}://{user}{self.host}:{self.port}"


class EtcdGateway:
    def __init__(self, endpoint: EtcdEndpoint | str, timeout: float = 5.0) -> None:
        self.endpoint = endpoint if isinstance(endpoint, EtcdEndpoint) else EtcdEndpoint.parse(endpoint)
        self.host, self.port = self.endpoint.host, self.endpoint.port
        self.timeout = timeout
        self._context = self.endpoint.ssl_context()
        self._token_lock = threading.Lock()
        self._token: str | None = None

    def connection(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def headers(self) -> dict[str, str]:
        """Request headers, with a valid auth token when the endpoint names a user."""
        headers = {"Content-Type": "application/json"}
        if self.endpoint.user is not None:
            headers["Authorization"] = self._auth_token()
        return headers

    def _auth_token(self, stale: str | None = None) -> str:
        with self._token_lock:
            if self._token is None or self._token == stale:
                reply = self._post("auth/authenticate", {"name": self.endpoint.user,
                                                         "password": self.endpoint.password or ""},
                                   {"Content-Type": "application/json"})
                self._token = str(reply["token"])
            return self._token

    def forget_token(self, token: str | None) -> None:
        """``token`` was rejected: the next request authenticates again."""
        with self._token_lock:
            if token is not None and self._token == token:
                self._token = None

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = self.headers()
        try:
            return self._post(path, body, headers)
        except EtcdRequestFailed as exc:
            if "Authorization" not in headers or not _token_rejected(exc.message):
                raise
        headers["Authorization"] = self._auth_token(stale=headers["Authorization"])
        return self._post(path, body, headers)

    def _post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        conn = self.connection()
        try:
            conn.request("POST", f"/v3/{path}", json.dumps(body), headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ProviderUnavailable(f"etcd {path} at {self.endpoint}: {exc}") from None
        finally:
            conn.close()
        try:
            decoded: dict[str, Any] = json.loads(data)
        except ValueError:
            raise ProviderUnavailable(f"etcd {path}: HTTP {response.status}, not JSON") from None
        if response.status != 200 or "error" in decoded:
            message = str(decoded.get("error", decoded))
            if path == "auth/authenticate":
                raise Unauthenticated(f"etcd at {self.endpoint} refused the credentials: {message}")
            raise EtcdRequestFailed(path, response.status, message)
        return decoded

    def range(self, key: str, *, prefix: bool = False) -> tuple[list[KeyValue], int]:
        body: dict[str, Any] = {"key": b64(key)}
        if prefix:
            body["range_end"] = b64(prefix_end(key))
        reply = self.call("kv/range", body)
        return [_kv(item) for item in reply.get("kvs", [])], int(reply["header"]["revision"])

    def txn(self, compare: list[dict[str, Any]], success: list[dict[str, Any]],
            failure: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]], int]:
        reply = self.call("kv/txn", {"compare": compare, "success": success, "failure": failure})
        return bool(reply.get("succeeded", False)), reply.get("responses", []), int(reply["header"]["revision"])

    def lease_grant(self, ttl: int) -> tuple[int, int]:
        reply = self.call("lease/grant", {"TTL": ttl})
        return int(reply["ID"]), int(reply["TTL"])

    def lease_keepalive(self, lease: int) -> int:
        """Remaining TTL after renewal; 0 when the lease has expired."""
        result = self.call("lease/keepalive", {"ID": str(lease)}).get("result", {})
        return int(result.get("TTL", 0))

    def lease_revoke(self, lease: int) -> None:
        self.call("lease/revoke", {"ID": str(lease)})

    def watch(self, prefix: str, start_revision: int) -> WatchStream:
        return WatchStream(self, prefix, start_revision)


class EtcdRequestFailed(ProviderUnavailable):
    """etcd answered with an error (not a transport failure)."""

    def __init__(self, path: str, status: int, message: str) -> None:
        super().__init__(f"etcd {path}: HTTP {status}: {message}")
        self.message = message


def _token_rejected(message: str) -> bool:
    """etcd's answer to an expired or unknown auth token."""
    return "invalid auth token" in message or "user name is empty" in message


class WatchStream:
    """One watch over a key prefix; iterate for (revision, events) groups, ``cancel`` to stop."""

    def __init__(self, gateway: EtcdGateway, prefix: str, start_revision: int) -> None:
        headers = gateway.headers()
        self._gateway, self._headers = gateway, headers
        self._conn = gateway.connection()
        self._lock = threading.Lock()
        self._cancelled = False
        body = {"create_request": {"key": b64(prefix), "range_end": b64(prefix_end(prefix)),
                                   "start_revision": str(start_revision)}}
        try:
            self._conn.request("POST", "/v3/watch", json.dumps(body), headers)
            self._response = self._conn.getresponse()
            if self._conn.sock is not None:
                self._conn.sock.settimeout(None)  # idle watches are normal; cancel() ends them
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise ProviderUnavailable(f"etcd watch: {exc}") from None

    def __iter__(self) -> Iterator[list[WatchEvent]]:
        try:
            for line in self._lines():
                decoded = json.loads(line)
                if "error" in decoded:
                    message = str(decoded["error"])
                    if _token_rejected(message):
                        self._gateway.forget_token(self._headers.get("Authorization"))
                    raise ProviderUnavailable(f"etcd refused the watch: {message}")
                result = decoded.get("result", {})
                if result.get("canceled") or result.get("compact_revision"):
                    raise ProviderUnavailable(f"etcd cancelled the watch: {result}")
                events = [WatchEvent(e.get("type") == "DELETE", _kv(e["kv"])) for e in result.get("events", [])]
                if events:
                    yield events
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
            # http.client raises AttributeError when its socket is torn down under a read
            if not self._cancelled:
                raise ProviderUnavailable(f"etcd watch broke: {exc!r}") from None
        finally:
            self._conn.close()

    def _lines(self) -> Iterator[bytes]:
        while True:
            line = self._response.readline()
            if not line:
                if not self._cancelled:
                    raise ProviderUnavailable("etcd closed the watch stream")
                return
            if line.strip():
                yield line

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            sock = self._conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


