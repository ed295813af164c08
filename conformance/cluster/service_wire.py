"""The cluster service's own wire (spec/cluster/wire.py) as the runner speaks it: raw connections for
the cases that send frames no provider client would (one byte short or long, at a size bound, a
resumed HELLO)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from conformance.framework import CaseTimeout
from spec.cluster import wire
from spec.cluster.errors import ClusterError
from spec.cluster.wire import ServiceKind, ServiceMessage
from spec.shared_secret import configured_secret


@dataclass(frozen=True, slots=True)
class ServiceAddress:
    host: str
    port: int
    secret: str

    @staticmethod
    def parse(url: str) -> ServiceAddress:
        parts = urlsplit(url)
        if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
            raise ValueError("cluster service url must be tcp://[:SECRET@]HOST:PORT")
        secret = configured_secret(None if parts.password is None else unquote(parts.password), "the url's secret")
        return ServiceAddress(parts.hostname, parts.port, secret or "")


class RawConnection:
    """One TCP connection to the service; reads whole messages, or learns that it was closed."""

    def __init__(self, address: ServiceAddress, timeout: float = 5.0) -> None:
        self.address = address
        self.timeout = timeout
        self._sock = socket.create_connection((address.host, address.port), timeout=timeout)
        self._frames = wire.FrameReader()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_at_most(self, seconds: float) -> None:
        """From now on a read waits at most ``seconds`` for the next message."""
        self.timeout = seconds
        self._sock.settimeout(seconds)

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def request(self, kind: ServiceKind, request_id: int = 1, **payload: Any) -> None:
        self.send(wire.encode(kind, request_id, **payload))

    def hello(self, node_id: str, takeover: str = "", resume_after: int | None = None) -> bytes:
        """A HELLO frame for ``node_id`` with this service's secret."""
        return wire.encode(ServiceKind.HELLO, 1, node_id=node_id, secret=self.address.secret, takeover=takeover,
                           resume=resume_after is not None, resume_after=resume_after or 0)

    def join(self, hello: bytes, address: str = "127.0.0.1:7000") -> str | None:
        """Send ``hello``, then JOIN_CLUSTER (request id 2); None once both are served, else what went wrong."""
        self.send(hello)
        welcome, _ = self.until(ServiceKind.WELCOME, ServiceKind.ERROR)
        if welcome is None or welcome.kind is not ServiceKind.WELCOME:
            return f"a good HELLO was answered {welcome}"
        self.request(ServiceKind.JOIN_CLUSTER, 2, address=address)
        joined, _ = self.until(ServiceKind.SHARD, ServiceKind.ERROR)
        if joined is None or joined.kind is not ServiceKind.SHARD:
            return f"JOIN_CLUSTER was answered {joined}"
        return None

    def read(self) -> ServiceMessage | None:
        """The next message, or None when the service closed the connection; CaseTimeout when it
        sends nothing within the timeout. Frames are read through the one cluster frame reader,
        never past the message (it asks for the rest of the header or body only)."""
        try:
            while chunk := self._sock.recv(min(self._frames.wanted, 1 << 20)):
                for body in self._frames.feed(chunk):
                    return wire.decode(body)
        except socket.timeout:
            raise CaseTimeout(f"the service sent nothing within {self.timeout} s") from None
        except ConnectionError:
            return None
        return None

    def until(self, *kinds: ServiceKind) -> tuple[ServiceMessage | None, list[ServiceMessage]]:
        """Read up to the first message of one of ``kinds`` (or the end): it, and what came before."""
        before: list[ServiceMessage] = []
        while (message := self.read()) is not None and message.kind not in kinds:
            before.append(message)
        return message, before

    def closed_within(self, seconds: float) -> bool:
        """Whether the service closes the connection within ``seconds`` (what it sends meanwhile is read
        and dropped)."""
        end = time.monotonic() + seconds
        try:
            while (left := end - time.monotonic()) > 0:
                self._sock.settimeout(left)
                if self.read() is None:
                    return True
            return False
        except CaseTimeout:
            return False
        finally:
            self._sock.settimeout(self.timeout)

    def finish_sending(self) -> None:
        """Close the sending side (the service reads an end of stream); what it sends is still read."""
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # closed by the service already: reads say so

    def close(self) -> None:
        self._sock.close()


def refusal(connection: RawConnection, error: type[ClusterError]) -> list[str]:
    """[] when the service answered ``error`` with request id 0 and then closed the connection."""
    reply = connection.read()
    if reply is None:
        return [f"closed without the {error.__name__} line"]
    if reply.kind is not ServiceKind.ERROR or reply.payload["code"] != error.code or reply.request_id != 0:
        return [f"answered {reply.kind.name} {reply.payload} instead of {error.__name__}"]
    if connection.read() is not None:
        return ["kept the connection open after the refusal"]
    return []
