"""The change source's Postgres sessions, through libpq (psycopg's ``pq`` wrapper of it): simple
queries with text results, and the CopyBoth mode of a replication connection.

libpq reads the connection string, so every libpq option works as it does for ``psql``: a
``postgresql://`` URL or ``key=value`` string, host lists (``host=a,b``), ``service=`` and the
service file, the password file (``~/.pgpass`` or ``passfile=``), ``sslmode``, ``sslrootcert``,
``sslcert`` and ``sslkey``, and the ``PG*`` environment variables. The pgoutput bytes it delivers
are decoded in ``spec/pgoutput``. Server errors become :class:`PgServerError` carrying the SQLSTATE
and the server's one-line message; a session that cannot be opened or is lost,
:class:`PgConnectionError` with libpq's message in one line (libpq gives no SQLSTATE for a failed
connection). Every session gets :data:`spec.pgoutput.types.SESSION_SETTINGS`, under which text
values read exactly.
"""

from __future__ import annotations

import select
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from spec.errors import RuntimeFailure
from spec.pgoutput.types import SESSION_SETTINGS

CONNECT_TIMEOUT_S: Final = 30
"""libpq's ``connect_timeout`` when the connection string does not set one (per host of a list)."""
READ_TIMEOUT_S: Final = 30.0
"""How long the rest of a message that began to arrive may take (a peer gone silent mid-message)."""


class PgServerError(RuntimeFailure):
    """An error the server reported: ``sqlstate`` and the server's message (with its detail and hint, if any)."""

    condition = "POSTGRES_ERROR"

    def __init__(self, fields: dict[str, str]) -> None:
        self.sqlstate = fields.get("C", "XX000")
        text = fields.get("M", "unknown error")
        for code in ("D", "H"):
            if code in fields:
                text += f" ({fields[code]})"
        super().__init__(text, sqlstate=self.sqlstate)


class PgConnectionError(RuntimeFailure):
    """The server could not be reached or the session was lost; the message says why (libpq's words)."""

    condition = "POSTGRES_UNREACHABLE"


@dataclass(frozen=True, slots=True)
class PgAddress:
    """Where and as whom to connect: a libpq connection string (URL or ``key=value``), read by libpq with its
    environment, service file and password file."""

    conninfo: str

    @classmethod
    def parse(cls, text: str) -> PgAddress:
        """``text`` as libpq parses it; ValueError (one line, no password) for what it cannot."""
        try:
            conninfo_to_dict(text)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"not a Postgres connection string: {_one_line(str(exc))}") from None
        return cls(text)

    @classmethod
    def of(cls, **params: str | int) -> PgAddress:
        """From libpq's keywords (``host``, ``port``, ``dbname``, ``user``, ``password``, ...)."""
        return cls(make_conninfo("", **params))

    def __repr__(self) -> str:
        return f"PgAddress({self.url()!r})"  # never the password (a traceback's locals, a logged source)

    def url(self) -> str:
        """The connection string without its password (what logs and errors show)."""
        if self.conninfo.startswith(("postgresql://", "postgres://")):
            parts = urlsplit(self.conninfo)
            users, at, hosts = parts.netloc.rpartition("@")
            netloc = f"{users.partition(':')[0]}{at}{hosts}"
            query = "&".join(p for p in parts.query.split("&") if p and not p.startswith("password="))
            return parts._replace(netloc=netloc, query=query).geturl()
        params = {k: v for k, v in conninfo_to_dict(self.conninfo).items() if k != "password"}
        return make_conninfo("", **params)


@dataclass(frozen=True, slots=True)
class Result:
    """A simple query's rows (text values, None for NULL), column names and command tag."""

    columns: tuple[str, ...]
    rows: list[tuple[str | None, ...]]
    type_oids: tuple[int, ...]
    type_modifiers: tuple[int, ...]
    tag: str


_SETTINGS = "; ".join(f"SET {name} = '{value}'" for name, value in SESSION_SETTINGS.items())
_END = b""
"""What :meth:`PgConnection._poll` returns when the server ended the copy (a CopyData is never empty)."""


class PgConnection:
    """One session; ``replication=True`` opens a logical walsender (``replication=database``)."""

    def __init__(self, address: PgAddress, *, replication: bool = False,
                 application_name: str = "streamwire") -> None:
        self.address = address
        given = conninfo_to_dict(address.conninfo)
        params: dict[str, str | int] = {"fallback_application_name": application_name}
        if "connect_timeout" not in given:
            params["connect_timeout"] = CONNECT_TIMEOUT_S
        if replication:
            params["replication"] = "database"
        self._pg = pq.PGconn.connect(make_conninfo(address.conninfo, **params).encode())
        if self._pg.status != pq.ConnStatus.OK:
            message = _one_line(self._pg.get_error_message())
            self._pg.finish()
            raise PgConnectionError(message or f"cannot connect to Postgres at {address.url()}")
        self.database = self._pg.db.decode()
        """The database libpq connected to (from the string, the service file or the environment)."""
        self._pending: bytes | None = None
        self._closed = False
        try:
            self.query(_SETTINGS)
        except BaseException:
            self.close()
            raise

    # -- queries --------------------------------------------------------------------
    def query(self, sql: str) -> Result:
        """Run one statement (or several: the last one's result); its rows as text."""
        try:
            res = self._pg.exec_(sql.encode())
        except psycopg.OperationalError as exc:
            raise PgConnectionError(self._lost(exc)) from None
        self._check(res)
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
            raise PgConnectionError(f"Postgres at {self.address.url()} answered {sql.split()[0]} with "
                                    f"{pq.ExecStatus(res.status).name}")
        width = range(res.nfields)
        rows = [tuple(None if (v := res.get_value(r, c)) is None else v.decode() for c in width)
                for r in range(res.ntuples)]
        return Result(tuple((res.fname(c) or b"").decode() for c in width), rows,
                      tuple(res.ftype(c) for c in width), tuple(res.fmod(c) for c in width),
                      (res.command_status or b"").decode())

    def _check(self, res: pq.abc.PGresult) -> None:
        """Raise the server's error, or the lost session's, that ``res`` carries."""
        if res.status == pq.ExecStatus.FATAL_ERROR:
            if self._pg.status != pq.ConnStatus.OK:
                raise PgConnectionError(self._lost())
            fields = {code: value.decode("utf-8", "replace") for code, field in _ERROR_FIELDS.items()
                      if (value := res.error_field(field)) is not None}
            raise PgServerError(fields)

    def _lost(self, exc: BaseException | None = None) -> str:
        text = "" if self._closed else _one_line(self._pg.get_error_message())
        return f"connection to Postgres at {self.address.url()} failed: {text or exc or 'lost'}"

    # -- CopyBoth (replication) -----------------------------------------------------
    def start_copy_both(self, command: str) -> None:
        """Send a command answered by CopyBothResponse (START_REPLICATION)."""
        try:
            res = self._pg.exec_(command.encode())
        except psycopg.OperationalError as exc:
            raise PgConnectionError(self._lost(exc)) from None
        self._check(res)
        if res.status != pq.ExecStatus.COPY_BOTH:
            raise PgConnectionError(f"Postgres at {self.address.url()} answered {command.split()[0]} with "
                                    f"{pq.ExecStatus(res.status).name}, not CopyBoth")

    def read_copy_data(self) -> bytes | None:
        """The next CopyData payload of CopyBoth mode (waiting for it); None when the server ends the copy."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            return pending or None
        while True:
            data = self._poll()
            if data is not None:
                return data or None
            if not select.select([self.fileno()], [], [], READ_TIMEOUT_S)[0]:
                raise PgConnectionError(f"Postgres at {self.address.url()} did not answer within {READ_TIMEOUT_S:g} s")

    def _poll(self) -> bytes | None:
        """A CopyData that has arrived, :data:`_END` when the copy ended, None when none has yet (never waits:
        libpq's socket is non-blocking, and what TLS has decrypted is read too)."""
        try:
            size, data = self._pg.get_copy_data(1)
            if size == 0:
                self._pg.consume_input()
                size, data = self._pg.get_copy_data(1)
        except psycopg.OperationalError as exc:
            raise PgConnectionError(self._lost(exc)) from None
        if size > 0:
            return bytes(data)
        if size == 0:
            return None
        while (res := self._pg.get_result()) is not None:
            self._check(res)
        return _END

    def send_copy_data(self, payload: bytes) -> None:
        try:
            self._pg.put_copy_data(payload)
            while self._pg.flush():
                select.select([], [self.fileno()], [], READ_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            raise PgConnectionError(self._lost(exc)) from None

    def fileno(self) -> int:
        try:
            return self._pg.socket
        except psycopg.OperationalError as exc:
            raise PgConnectionError(self._lost(exc)) from None

    @property
    def buffered(self) -> bool:
        """A CopyData (or the copy's end) already read from the socket (select() would not see it)."""
        if self._pending is None:
            self._pending = self._poll()
        return self._pending is not None

    def close(self) -> None:
        self._closed = True
        self._pg.finish()


_ERROR_FIELDS: Final = {"C": pq.DiagnosticField.SQLSTATE, "M": pq.DiagnosticField.MESSAGE_PRIMARY,
                        "D": pq.DiagnosticField.MESSAGE_DETAIL, "H": pq.DiagnosticField.MESSAGE_HINT}


def _one_line(text: str) -> str:
    """libpq's message (several lines when it tried several hosts or addresses) as one line."""
    return "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """An SQL string literal (standard_conforming_strings is on since Postgres 9.1)."""
    return "'" + text.replace("'", "''") + "'"
