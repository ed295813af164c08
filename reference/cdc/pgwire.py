"""A minimal Postgres frontend (protocol 3.0) for the change source: startup and authentication
(trust, password, md5, SCRAM-SHA-256), simple queries with text results, and the CopyBoth mode of
a replication connection.

Only what the source and its verification need, and nothing they do not: no extended query
protocol, no cancellation. TLS as libpq's ``sslmode`` and ``sslrootcert`` say (not its other
options: no client certificates, ``.pgpass``, service files or host lists). Server errors become :class:`PgServerError` carrying the
SQLSTATE and the server's one-line message. Every session gets
:data:`spec.pgoutput.types.SESSION_SETTINGS`, under which text values read exactly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from spec.errors import RuntimeFailure
from spec.pgoutput.types import SESSION_SETTINGS

PROTOCOL_VERSION = 196608  # 3.0
SSL_REQUEST_CODE = 80877103
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
READ_BYTES = 1 << 18
"""What one recv asks for (a replication stream's CopyData messages are small and many)."""
MAX_MESSAGE_BYTES = 1 << 30
"""Postgres's own bound on a message (MaxAllocSize): anything longer is a broken peer."""


class PgServerError(RuntimeFailure):
    """An ErrorResponse: ``sqlstate`` and the server's message (with its detail and hint, if any)."""

    condition = "POSTGRES_ERROR"

    def __init__(self, fields: dict[str, str]) -> None:
        self.sqlstate = fields.get("C", "XX000")
        text = fields.get("M", "unknown error")
        for code in ("D", "H"):
            if code in fields:
                text += f" ({fields[code]})"
        super().__init__(text, sqlstate=self.sqlstate)


class PgConnectionError(RuntimeFailure):
    """The server could not be reached, or broke the protocol; the message says which."""

    condition = "POSTGRES_UNREACHABLE"


@dataclass(frozen=True, slots=True)
class PgAddress:
    """Where and as whom to connect: ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB``. A HOST starting with
    ``/`` (percent-encoded in the URL, or ``?host=/dir``) is a unix-socket directory; PGPASSWORD fills a
    missing password."""

    host: str
    port: int
    user: str
    database: str
    password: str | None = None
    sslmode: str = "prefer"
    """libpq's: disable, allow and prefer (TLS if the server offers it, unverified), require (TLS, unverified),
    verify-ca (the chain to ``sslrootcert``), verify-full (and the host name). ``?sslmode=`` or PGSSLMODE."""
    sslrootcert: str | None = None
    """The CA file for verify-ca/verify-full (``?sslrootcert=`` or PGSSLROOTCERT; default: the system's CAs)."""

    @classmethod
    def parse(cls, url: str) -> PgAddress:
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(f"not a postgresql:// URL: {url.split('@')[-1]!r}")
        query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
        host = unquote(query.get("host", parts.hostname or "")) or "127.0.0.1"
        user = unquote(parts.username or "") or os.environ.get("PGUSER", "postgres")
        password = unquote(parts.password) if parts.password is not None else os.environ.get("PGPASSWORD")
        database = unquote(parts.path.lstrip("/")) or user
        sslmode = unquote(query.get("sslmode", os.environ.get("PGSSLMODE", "prefer")))
        if sslmode not in SSL_MODES:
            raise ValueError(f"sslmode {sslmode!r} is not one of {', '.join(SSL_MODES)}")
        rootcert = query.get("sslrootcert", os.environ.get("PGSSLROOTCERT"))
        return cls(host, parts.port or 5432, user, database, password, sslmode,
                   None if rootcert is None else unquote(rootcert))

    def url(self) -> str:
        """The URL without the password (what logs and errors show)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"


@dataclass(frozen=True, slots=True)
class Result:
    """A simple query's rows (text values, None for NULL), column names and command tag."""

    columns: tuple[str, ...]
    rows: list[tuple[str | None, ...]]
    type_oids: tuple[int, ...]
    type_modifiers: tuple[int, ...]
    tag: str


class PgConnection:
    """One session; ``replication=True`` opens a logical walsender (``replication=database``)."""

    def __init__(self, address: PgAddress, *, replication: bool = False, timeout_s: float = 30.0,
                 application_name: str = "streamwire") -> None:
        self.address = address
        try:
            if address.host.startswith("/"):
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sock.settimeout(timeout_s)
                self._sock.connect(os.path.join(address.host, f".s.PGSQL.{address.port}"))
            else:
                self._sock = socket.create_connection((address.host, address.port), timeout=timeout_s)
                self._sock = _negotiate_tls(self._sock, address)
        except ssl.SSLCertVerificationError as exc:
            raise PgConnectionError(f"TLS to Postgres at {address.url()} refused: the server's certificate does not "
                                    f"verify (sslmode={address.sslmode}, sslrootcert={address.sslrootcert or 'system'}: "
                                    f"{exc.verify_message})") from None
        except ssl.SSLError as exc:
            raise PgConnectionError(f"TLS to Postgres at {address.url()} failed: {exc.reason or exc}") from None
        except OSError as exc:
            raise PgConnectionError(f"cannot reach Postgres at {address.url()}: {exc.strerror or exc}") from None
        self._buffer = bytearray()
        self._offset = 0
        params = {"user": address.user, "database": address.database, "application_name": application_name,
                  **SESSION_SETTINGS}
        if replication:
            params["replication"] = "database"
        body = struct.pack(">i", PROTOCOL_VERSION) + b"".join(
            k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items()) + b"\0"
        self._sock.sendall(struct.pack(">i", len(body) + 4) + body)
        try:
            self._authenticate()
            self._until_ready()
        except BaseException:
            self.close()
            raise

    # -- messages ---------------------------------------------------------------
    def send(self, tag: bytes, body: bytes) -> None:
        try:
            self._sock.sendall(tag + struct.pack(">i", len(body) + 4) + body)
        except OSError as exc:
            raise PgConnectionError(f"connection to {self.address.url()} failed: {exc}") from None

    def receive(self) -> tuple[bytes, bytes]:
        """The next backend message (tag, body); notices are passed over."""
        while True:
            header = self._read(5)
            tag, length = header[:1], struct.unpack(">i", header[1:])[0]
            if not 4 <= length <= MAX_MESSAGE_BYTES:
                raise PgConnectionError(f"Postgres at {self.address.url()} sent a message of length {length}")
            body = self._read(length - 4)
            if tag == b"E":
                raise PgServerError(_fields(body))
            if tag != b"N":
                return tag, body

    def _read(self, n: int) -> bytes:
        """``n`` bytes; the buffer is consumed from ``_offset`` and compacted only when it is refilled
        (deleting from a bytearray's front per message would copy the rest of it each time)."""
        while len(self._buffer) - self._offset < n:
            if self._offset:
                del self._buffer[:self._offset]
                self._offset = 0
            try:
                chunk = self._sock.recv(max(READ_BYTES, n - len(self._buffer)))
            except TimeoutError:
                raise PgConnectionError(f"Postgres at {self.address.url()} did not answer within "
                                        f"{self._sock.gettimeout():g} s") from None
            except OSError as exc:
                raise PgConnectionError(f"connection to {self.address.url()} failed: {exc}") from None
            if not chunk:
                raise PgConnectionError(f"Postgres at {self.address.url()} closed the connection")
            self._buffer += chunk
        start = self._offset
        self._offset += n
        return bytes(self._buffer[start:self._offset])

    def settimeout(self, timeout_s: float | None) -> None:
        self._sock.settimeout(timeout_s)

    def close(self) -> None:
        try:
            self.send(b"X", b"")
        except PgConnectionError:
            pass
        self._sock.close()

    # -- authentication -----------------------------------------------------------
    def _authenticate(self) -> None:
        while True:
            tag, body = self.receive()
            if tag != b"R":
                raise PgConnectionError(f"Postgres at {self.address.url()} sent {tag!r} during authentication")
            code = struct.unpack(">i", body[:4])[0]
            if code == 0:
                return
            password = self.address.password
            if password is None:
                raise PgConnectionError(f"Postgres at {self.address.url()} asks for a password and none was given "
                                        "(in the URL or PGPASSWORD)")
            if code == 3:
                self.send(b"p", password.encode() + b"\0")
            elif code == 5:
                inner = hashlib.md5(password.encode() + self.address.user.encode()).hexdigest()
                self.send(b"p", b"md5" + hashlib.md5(inner.encode() + body[4:8]).hexdigest().encode() + b"\0")
            elif code == 10:
                mechanisms = body[4:].split(b"\0")
                if b"SCRAM-SHA-256" not in mechanisms:
                    raise PgConnectionError(f"no supported SASL mechanism among {mechanisms}")
                self._scram(password)
            else:
                raise PgConnectionError(f"unsupported authentication method {code}")

    def _scram(self, password: str) -> None:
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n=,r={nonce}"
        first = ("n,," + first_bare).encode()
        self.send(b"p", b"SCRAM-SHA-256\0" + struct.pack(">i", len(first)) + first)
        tag, body = self.receive()
        if tag != b"R" or struct.unpack(">i", body[:4])[0] != 11:
            raise PgConnectionError("SCRAM: expected the server's first message")
        server_first = body[4:].decode()
        attrs = dict(a.split("=", 1) for a in server_first.split(","))
        if not attrs["r"].startswith(nonce):
            raise PgConnectionError("SCRAM: the server's nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self.send(b"p", f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
        tag, body = self.receive()
        if tag != b"R" or struct.unpack(">i", body[:4])[0] != 12:
            raise PgConnectionError("SCRAM: expected the server's final message")
        server_key = hmac.digest(salted, b"Server Key", "sha256")
        expected = base64.b64encode(hmac.digest(server_key, auth_message, "sha256")).decode()
        if body[4:].decode() != f"v={expected}":
            raise PgConnectionError("SCRAM: the server's signature does not verify")

    def _until_ready(self) -> None:
        while True:
            tag, _ = self.receive()
            if tag == b"Z":
                return

    # -- queries --------------------------------------------------------------------
    def query(self, sql: str) -> Result:
        """Run one statement (simple query protocol); its rows as text."""
        self.send(b"Q", sql.encode() + b"\0")
        columns: tuple[str, ...] = ()
        oids: tuple[int, ...] = ()
        mods: tuple[int, ...] = ()
        rows: list[tuple[str | None, ...]] = []
        tag_text = ""
        error: PgServerError | None = None
        while True:
            try:
                tag, body = self.receive()
            except PgServerError as exc:
                error = exc
                continue
            if tag == b"T":
                columns, oids, mods = _row_description(body)
            elif tag == b"D":
                rows.append(_data_row(body))
            elif tag == b"C":
                tag_text = body.rstrip(b"\0").decode()
            elif tag == b"Z":
                if error is not None:
                    raise error
                return Result(columns, rows, oids, mods, tag_text)

    def start_copy_both(self, command: str) -> None:
        """Send a command answered by CopyBothResponse (START_REPLICATION)."""
        self.send(b"Q", command.encode() + b"\0")
        while True:
            tag, _ = self.receive()
            if tag == b"W":
                return

    def read_copy_data(self) -> bytes | None:
        """The next CopyData payload of CopyBoth mode; None when the server ends the copy."""
        while True:
            tag, body = self.receive()
            if tag == b"d":
                return body
            if tag in (b"c", b"C", b"Z"):
                return None

    def send_copy_data(self, payload: bytes) -> None:
        self.send(b"d", payload)

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def buffered(self) -> bool:
        """Bytes already read from the socket and not yet consumed (select() would not see them)."""
        pending = self._sock.pending() if isinstance(self._sock, ssl.SSLSocket) else 0
        return len(self._buffer) > self._offset or pending > 0


def _negotiate_tls(sock: socket.socket, address: PgAddress) -> socket.socket:
    """The SSLRequest of the startup, as libpq's ``sslmode`` says: the socket wrapped in TLS, or as it was
    when the server declines and the mode allows plaintext."""
    if address.sslmode == "disable":
        return sock
    sock.sendall(struct.pack(">ii", 8, SSL_REQUEST_CODE))
    answer = sock.recv(1)
    if answer != b"S":
        if address.sslmode in ("require", "verify-ca", "verify-full"):
            raise PgConnectionError(f"Postgres at {address.url()} does not offer TLS, and sslmode={address.sslmode} "
                                    "requires it (ssl = on in postgresql.conf)")
        if answer != b"N":
            raise PgConnectionError(f"Postgres at {address.url()} answered the TLS request with {answer!r}")
        return sock
    context = ssl.create_default_context(cafile=address.sslrootcert)
    if address.sslmode in ("allow", "prefer", "require"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif address.sslmode == "verify-ca":
        context.check_hostname = False
    return context.wrap_socket(sock, server_hostname=address.host)


def _fields(body: bytes) -> dict[str, str]:
    out = {}
    for part in body.split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return out


def _row_description(body: bytes) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    count = struct.unpack(">h", body[:2])[0]
    offset = 2
    names, oids, mods = [], [], []
    for _ in range(count):
        end = body.index(b"\0", offset)
        names.append(body[offset:end].decode())
        _table, _attnum, oid, _size, mod, _fmt = struct.unpack(">ihihih", body[end + 1:end + 19])
        oids.append(oid)
        mods.append(mod)
        offset = end + 19
    return tuple(names), tuple(oids), tuple(mods)


def _data_row(body: bytes) -> tuple[str | None, ...]:
    count = struct.unpack(">h", body[:2])[0]
    offset = 2
    out: list[str | None] = []
    for _ in range(count):
        length = struct.unpack(">i", body[offset:offset + 4])[0]
        offset += 4
        if length < 0:
            out.append(None)
        else:
            out.append(body[offset:offset + length].decode())
            offset += length
    return tuple(out)


def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """An SQL string literal (standard_conforming_strings is on since Postgres 9.1)."""
    return "'" + text.replace("'", "''") + "'"
