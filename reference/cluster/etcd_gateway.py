"""A small client for etcd v3's gRPC JSON gateway (``/v3/...``), as served by etcd 3.4.

Plain ``http.client`` with a timeout on every call: each request has a deadline, a watch stream
is cancelled by shutting its socket down, and every transport failure is ProviderUnavailable.
Keys and values travel base64-encoded; 64-bit numbers arrive as JSON strings.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import urlsplit

from spec.cluster.errors import ProviderUnavailable


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


class EtcdGateway:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname is None:
            raise ValueError(f"no host in etcd url {url!r}")
        self.host, self.port = parts.hostname, parts.port or 2379
        self.timeout = timeout

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("POST", f"/v3/{path}", json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ProviderUnavailable(f"etcd {path} at {self.host}:{self.port}: {exc}") from None
        finally:
            conn.close()
        try:
            decoded: dict[str, Any] = json.loads(data)
        except ValueError:
            raise ProviderUnavailable(f"etcd {path}: HTTP {response.status}, not JSON") from None
        if response.status != 200 or "error" in decoded:
            raise EtcdRequestFailed(path, response.status, str(decoded.get("error", decoded)))
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


class WatchStream:
    """One watch over a key prefix; iterate for (revision, events) groups, ``cancel`` to stop."""

    def __init__(self, gateway: EtcdGateway, prefix: str, start_revision: int) -> None:
        self._conn = http.client.HTTPConnection(gateway.host, gateway.port, timeout=gateway.timeout)
        self._lock = threading.Lock()
        self._cancelled = False
        body = {"create_request": {"key": b64(prefix), "range_end": b64(prefix_end(prefix)),
                                   "start_revision": str(start_revision)}}
        try:
            self._conn.request("POST", "/v3/watch", json.dumps(body), {"Content-Type": "application/json"})
            self._response = self._conn.getresponse()
            if self._conn.sock is not None:
                self._conn.sock.settimeout(None)  # idle watches are normal; cancel() ends them
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise ProviderUnavailable(f"etcd watch: {exc}") from None

    def __iter__(self) -> Iterator[list[WatchEvent]]:
        try:
            for line in self._lines():
                result = json.loads(line).get("result", {})
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


