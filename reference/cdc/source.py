"""The Postgres change source: one publication read through one logical replication slot.

:class:`SlotSource` checks the set-up (``wal_level``, the publication, the slot; ``--create-slot``
creates it), starts streaming pgoutput protocol version 1 from the slot's confirmed position and
returns one :class:`~spec.pgoutput.transactions.SourceTransaction` per committed transaction.
What it confirms to the slot, and when it has read up to ``until``, is decided by
:class:`~spec.pgoutput.feedback.SlotFeedback`: only what the caller reports durable.

Set-up problems are :class:`SourceSetupError` with one line saying what to change.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass, field

from reference.cdc.pgwire import PgAddress, PgConnection, PgConnectionError, PgServerError, quote_ident, quote_literal
from reference.cdc.preflight import table_problems
from spec.errors import RuntimeFailure
from spec.pgoutput.feedback import SlotFeedback, record_boundary
from spec.pgoutput.lookup import VISIBILITY_BOUND_S, VISIBILITY_POLL_S, RowLookup
from spec.pgoutput.messages import (
    PrimaryKeepalive,
    Relation,
    XLogData,
    decode_pgoutput,
    decode_replication,
    parse_lsn,
)
from spec.pgoutput.transactions import SourceTransaction, TransactionAssembler

POSTGRES_EPOCH_US = 946_684_800_000_000
"""2000-01-01 00:00:00 UTC in microseconds since the Unix epoch (TimestampTz counts from there)."""


class SourceSetupError(RuntimeFailure):
    """The database, publication or slot is not set up for logical replication; the message says how to fix it."""

    condition = "CDC_SETUP"


@dataclass(frozen=True, slots=True)
class SlotSpec:
    """Which slot and publication to read, whether to create the slot, and where to stop (None: never)."""

    slot: str
    publication: str
    create_slot: bool = False
    until: str | None = None
    """``current`` (the WAL position when the source starts) or an LSN ``X/Y``."""
    reads_back: bool = False
    """Whether the source reads unchanged TOAST values back from the tables (on PySpark with several sinks)."""


@dataclass
class SlotSource:
    """A replication connection streaming one slot; ``read`` returns transactions, ``confirm`` reports durability."""

    address: PgAddress
    spec: SlotSpec
    feedback: SlotFeedback = field(default_factory=SlotFeedback)
    _stream: PgConnection | None = None
    _catalog: PgConnection | None = None
    _machine: TransactionAssembler | None = None

    def prepare(self) -> None:
        """Check the set-up and create the slot if asked, without streaming (a driver does this before its tasks)."""
        conn = self._connect()
        try:
            self._check(conn)
        finally:
            conn.close()

    def open(self) -> None:
        """Check the set-up, create the slot if asked, and start streaming from the slot's confirmed position."""
        stream = self._connect()
        try:
            self._check(stream)
            until = self.spec.until
            if until is not None:
                target = stream.query("SELECT pg_current_wal_insert_lsn()").rows[0][0] if until == "current" else until
                assert target is not None
                self.feedback = SlotFeedback(until=record_boundary(parse_lsn(target)))
            self._start(stream)
        except BaseException:
            stream.close()
            raise

    def reconnect(self) -> None:
        """Stream again after the connection was lost: Postgres resends from the confirmed position, and
        what was already handed to the sync server is skipped (``SlotFeedback.already_sent``)."""
        self.close()
        stream = self._connect()
        try:
            self._start(stream)
        except BaseException:
            stream.close()
            raise

    def _connect(self) -> PgConnection:
        return PgConnection(self.address, replication=True, application_name=f"streamwire {self.spec.slot}")

    def _start(self, stream: PgConnection) -> None:
        options = f"proto_version '1', publication_names {quote_literal(quote_ident(self.spec.publication))}"
        stream.start_copy_both(f"START_REPLICATION SLOT {quote_ident(self.spec.slot)} LOGICAL 0/0 ({options})")
        self._stream = stream
        self._machine = TransactionAssembler(primary_key=self._primary_key)

    def _check(self, stream: PgConnection) -> None:
        where = f"Postgres at {self.address.url()}"
        wal_level = stream.query("SHOW wal_level").rows[0][0]
        if wal_level != "logical":
            raise SourceSetupError(f"{where} has wal_level={wal_level}; logical replication needs wal_level=logical "
                                   "(set it in postgresql.conf and restart Postgres)")
        found = stream.query(f"SELECT 1 FROM pg_publication WHERE pubname = {quote_literal(self.spec.publication)}")
        if not found.rows:
            raise SourceSetupError(f"publication {self.spec.publication!r} does not exist in database "
                                   f"{self.address.database!r} (CREATE PUBLICATION {quote_ident(self.spec.publication)} "
                                   "FOR TABLE ...)")
        unfit = table_problems(stream, self.spec.publication, reads_back=self.spec.reads_back)
        if unfit:
            raise SourceSetupError(f"publication {self.spec.publication!r} has tables that cannot be replicated: "
                                   + "; ".join(unfit))
        slot = stream.query("SELECT plugin, database FROM pg_replication_slots WHERE slot_name = "
                            f"{quote_literal(self.spec.slot)}").rows
        if not slot:
            if not self.spec.create_slot:
                raise SourceSetupError(f"replication slot {self.spec.slot!r} does not exist in {where} "
                                       "(--create-slot creates it)")
            stream.query(f"CREATE_REPLICATION_SLOT {quote_ident(self.spec.slot)} LOGICAL pgoutput NOEXPORT_SNAPSHOT")
        elif slot[0] != ("pgoutput", self.address.database):
            raise SourceSetupError(f"replication slot {self.spec.slot!r} is for plugin {slot[0][0]} in database "
                                   f"{slot[0][1]}, not pgoutput in {self.address.database}")

    def _query(self, sql: str) -> list[tuple[str | None, ...]]:
        """A query on the source's own (non-replication) session, opened on first use and again after a failure."""
        if self._catalog is None:
            self._catalog = PgConnection(self.address)
        try:
            return self._catalog.query(sql).rows
        except PgConnectionError:
            self._catalog.close()
            self._catalog = None
            raise

    def retained_wal(self) -> int | None:
        """How many bytes of WAL the slot keeps Postgres from removing (None: Postgres cannot be asked now)."""
        try:
            rows = self._query("SELECT pg_current_wal_lsn() - restart_lsn FROM pg_replication_slots WHERE slot_name = "
                               f"{quote_literal(self.spec.slot)}")
        except (PgConnectionError, PgServerError):
            return None
        return int(float(rows[0][0])) if rows and rows[0][0] is not None else None

    def _primary_key(self, relation: Relation) -> tuple[str, ...]:
        """The primary key columns of a REPLICA IDENTITY FULL table, from the catalog (in key order)."""
        rows = self._query(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            f"WHERE i.indrelid = {relation.relation_id} AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)")
        return tuple(str(r[0]) for r in rows)

    def read_back(self, lookup: RowLookup) -> dict[tuple[object, ...], dict[str, object]]:
        """The rows at ``lookup``'s keys, read in a snapshot that sees its transaction (spec/pgoutput/lookup.py)."""
        if self._catalog is None:
            self._catalog = PgConnection(self.address)
        deadline = time.monotonic() + VISIBILITY_BOUND_S
        while True:
            result = self._catalog.query(lookup.sql())
            found = lookup.read(result.rows, result.type_oids, result.type_modifiers)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise SourceSetupError(f"transaction {lookup.xid} is in the replication stream of Postgres at "
                                       f"{self.address.url()} but not visible to a query after {VISIBILITY_BOUND_S:g} s")
            time.sleep(VISIBILITY_POLL_S)

    def read(self, timeout_s: float) -> SourceTransaction | None:
        """The next committed transaction, or None when nothing completed one within ``timeout_s``."""
        stream, machine = self._stream, self._machine
        assert stream is not None and machine is not None, "open() first"
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if not stream.buffered and (left <= 0 or not select.select([stream.fileno()], [], [], left)[0]):
                return None
            payload = stream.read_copy_data()
            if payload is None:
                raise PgConnectionError(f"Postgres at {self.address.url()} ended the replication stream")
            message = decode_replication(payload)
            if not isinstance(message, (XLogData, PrimaryKeepalive)):
                continue
            if self.feedback.on_message(message):
                self._send_status()
            if isinstance(message, XLogData):
                tx = machine.feed(decode_pgoutput(message.data))
                if tx is not None and not self.feedback.already_sent(tx.commit_lsn):
                    return tx

    def confirm(self, durable: int | None) -> None:
        """The sync server reports ``durable`` for this slot's origin: confirm the slot up to it (never more)."""
        if self.feedback.on_durable(durable):
            self._send_status()

    def keep_alive(self) -> None:
        """Tell Postgres the source is alive while it waits for the sync server (or wal_sender_timeout ends the stream)."""
        self._send_status()

    def ask_position(self) -> None:
        """Ask the server for a keepalive now (its ``wal_end`` says how far it has sent)."""
        self._send_status(reply_requested=True)

    def _send_status(self, *, reply_requested: bool = False) -> None:
        assert self._stream is not None
        now = time.time_ns() // 1000 - POSTGRES_EPOCH_US
        self._stream.send_copy_data(self.feedback.status(now, reply_requested=reply_requested).encode())

    def close(self) -> None:
        for conn in (self._stream, self._catalog):
            if conn is not None:
                conn.close()
        self._stream = self._catalog = None


def slot_position(address: PgAddress, slot: str) -> int | None:
    """The slot's ``confirmed_flush_lsn`` (None: no slot, or nothing confirmed)."""
    conn = PgConnection(address)
    try:
        rows = conn.query("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = "
                          f"{quote_literal(slot)}").rows
    finally:
        conn.close()
    return parse_lsn(rows[0][0]) if rows and rows[0][0] else None

