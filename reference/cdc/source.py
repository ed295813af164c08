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
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from reference.cdc.pgwire import PgAddress, PgConnection, PgConnectionError, PgServerError, quote_ident, quote_literal
from reference.cdc.preflight import table_problems
from reference.cdc.snapshot import SnapshotReader, append_durably, snapshot_tables
from reference.cdc.spill import ChangeSpill, TransactionSpill
from spec.errors import RuntimeFailure
from spec.pgoutput.feedback import SlotFeedback, record_boundary
from spec.pgoutput.lookup import VISIBILITY_BOUND_S, VISIBILITY_POLL_S, RowLookup
from spec.pgoutput.messages import (
    PrimaryKeepalive,
    Relation,
    XLogData,
    decode_replication,
    parse_lsn,
)
from spec.pgoutput.snapshot import CHUNK_ROWS, SnapshotProgress, chunk_number
from spec.pgoutput.spill import SpillBudget
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
    snapshot: bool = False
    """Read the rows the tables hold first, when this source creates the slot (``--snapshot initial``)."""
    chunk_rows: int = CHUNK_ROWS
    """Rows per snapshot chunk."""
    state_dir: str = ""
    """Where the snapshot's progress record is kept (``<database>.<slot>.snapshot``; empty: the working directory)."""
    spill_bytes: int | None = None
    """An open transaction's pgoutput bytes held as changes before they are written to a spill file
    (spec/pgoutput/spill.py); None: held whole."""
    spill_changes: bool = False
    """Spill the changes as they are (:class:`~reference.cdc.spill.ChangeSpill`: the pipeline, which routes
    each change) rather than as the puts they become."""


@dataclass
class SlotSource:
    """A replication connection streaming one slot; ``read`` returns transactions, ``confirm`` reports durability."""

    address: PgAddress
    spec: SlotSpec
    feedback: SlotFeedback = field(default_factory=SlotFeedback)
    _stream: PgConnection | None = None
    _catalog: PgConnection | None = None
    _machine: TransactionAssembler | None = None
    _snapshot: SnapshotReader | None = None
    _in_snapshot: bool = False
    """A REPEATABLE READ transaction is open on the stream's connection (the snapshot not yet read)."""
    _streaming: bool = False
    _budget: SpillBudget | None = None
    _spill: TransactionSpill | ChangeSpill | None = None
    """The open transaction's changes written out so far."""
    _spilled: dict[int, TransactionSpill | ChangeSpill] = field(default_factory=dict)
    """Committed spilled transactions read and not yet taken (:meth:`take_spill`), by commit LSN."""
    database: str = ""
    """The database libpq connects to (known once connected: the connection string, a service file or the
    environment may name it)."""

    def open(self, durable: Callable[[], int | None] = lambda: None) -> None:
        """Check the set-up, create the slot if asked, and start streaming from the slot's confirmed position;
        with a snapshot to read (or to finish), ``read`` returns its chunks first. ``durable``: what the sync
        server holds durable for the origin, with nothing left only in its memory (asked only then)."""
        stream = self._connect()
        try:
            position = self._check(stream)
            until = self.spec.until
            if until is not None:
                target = stream.query("SELECT pg_current_wal_insert_lsn()").rows[0][0] if until == "current" else until
                assert target is not None
                self.feedback = SlotFeedback(until=record_boundary(parse_lsn(target)))
            self._begin(stream, position, durable)
        except BaseException:
            stream.close()
            raise

    def reconnect(self) -> None:
        """Stream again after the connection was lost: Postgres resends from the confirmed position, and
        what was already handed to the sync server is skipped (``SlotFeedback.already_sent``); a snapshot
        being read resumes after the last chunk handed over, in a new snapshot."""
        self.close()
        stream = self._connect()
        try:
            position = self._slot(stream)
            assert position is not None, "the slot was dropped"
            self._begin(stream, position, lambda: self.feedback.sent or None)
        except BaseException:
            stream.close()
            raise

    def progress_path(self) -> Path:
        """The snapshot's progress record."""
        assert self.database, "connect first"
        name = quote(f"{self.database}.{self.spec.slot}", safe="") + ".snapshot"
        return Path(self.spec.state_dir or ".") / name

    def read_snapshot(self, durable: Callable[[], int | None]) -> Iterator[SourceTransaction]:
        """Only the initial snapshot (what the PySpark driver reads before its job streams): check the set-up,
        create the slot if asked (with its snapshot under ``spec.snapshot``) and yield the chunks still to read,
        an unfinished snapshot resumed; nothing is streamed. ``durable`` as for :meth:`open`."""
        stream = self._connect()
        try:
            reader = self._reader(stream, self._check(stream), durable)
            while reader is not None and (chunk := reader.next()) is not None:
                yield chunk
        finally:
            stream.close()
            self._in_snapshot = False

    def _begin(self, stream: PgConnection, position: int, durable: Callable[[], int | None]) -> None:
        """Read the snapshot still to read (its transaction already open if the slot was just created), or stream."""
        self.feedback.flushed = max(self.feedback.flushed, position)
        self._snapshot = self._reader(stream, position, durable)
        if self._snapshot is None:
            self._start(stream)
        self._stream = stream

    def _reader(self, stream: PgConnection, position: int, durable: Callable[[], int | None]) -> SnapshotReader | None:
        """The reader of the snapshot still to read on ``stream`` (None: none, its transaction committed)."""
        path = self.progress_path()
        progress = SnapshotProgress.parse(path.read_text(encoding="utf-8")) if path.exists() else None
        landed = None if progress is None else durable()
        if progress is None or progress.done(landed):
            if self._in_snapshot:
                stream.query("COMMIT")
                self._in_snapshot = False
            return None
        if not self._in_snapshot:
            stream.query("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ")
        first = max(chunk_number(position, 0), (landed if landed is not None else -1) + 1)
        return SnapshotReader(stream, snapshot_tables(stream, self.spec.publication), path,
                              after=progress.resume_after(landed), first_number=first, limit=position,
                              chunk_rows=self.spec.chunk_rows, primary_key=self._primary_key, say=self._say)

    def _say(self, line: str) -> None:
        print(f"cdc: {line}", file=sys.stderr, flush=True)

    def _connect(self) -> PgConnection:
        conn = PgConnection(self.address, replication=True, application_name=f"streamwire {self.spec.slot}")
        self.database = conn.database
        return conn

    def _start(self, stream: PgConnection) -> None:
        self._in_snapshot = False
        options = f"proto_version '1', publication_names {quote_literal(quote_ident(self.spec.publication))}"
        stream.start_copy_both(f"START_REPLICATION SLOT {quote_ident(self.spec.slot)} LOGICAL 0/0 ({options})")
        self._stream = stream
        self._machine = TransactionAssembler(primary_key=self._primary_key)
        self._streaming = True
        self._budget = None if self.spec.spill_bytes is None else SpillBudget(self.spec.spill_bytes)
        self._drop_spills()

    def _check(self, stream: PgConnection) -> int:
        """Check the set-up; the slot's confirmed position (or, created now, its consistent point)."""
        where = f"Postgres at {self.address.url()}"
        wal_level = stream.query("SHOW wal_level").rows[0][0]
        if wal_level != "logical":
            raise SourceSetupError(f"{where} has wal_level={wal_level}; logical replication needs wal_level=logical "
                                   "(set it in postgresql.conf and restart Postgres)")
        found = stream.query(f"SELECT 1 FROM pg_publication WHERE pubname = {quote_literal(self.spec.publication)}")
        if not found.rows:
            raise SourceSetupError(f"publication {self.spec.publication!r} does not exist in database "
                                   f"{self.database!r} (CREATE PUBLICATION {quote_ident(self.spec.publication)} "
                                   "FOR TABLE ...)")
        unfit = table_problems(stream, self.spec.publication, reads_back=self.spec.reads_back)
        if unfit:
            raise SourceSetupError(f"publication {self.spec.publication!r} has tables that cannot be replicated: "
                                   + "; ".join(unfit))
        slot = stream.query("SELECT plugin, database, confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = "
                            f"{quote_literal(self.spec.slot)}").rows
        if not slot:
            if not self.spec.create_slot:
                raise SourceSetupError(f"replication slot {self.spec.slot!r} does not exist in {where} "
                                       "(--create-slot creates it)")
            return self._create_slot(stream)
        if slot[0][:2] != ("pgoutput", self.database):
            raise SourceSetupError(f"replication slot {self.spec.slot!r} is for plugin {slot[0][0]} in database "
                                   f"{slot[0][1]}, not pgoutput in {self.database}")
        return parse_lsn(str(slot[0][2]))

    def _slot(self, stream: PgConnection) -> int | None:
        rows = stream.query("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = "
                            f"{quote_literal(self.spec.slot)}").rows
        return parse_lsn(str(rows[0][0])) if rows and rows[0][0] else None

    def _create_slot(self, stream: PgConnection) -> int:
        """Create the slot; with a snapshot, inside a REPEATABLE READ transaction left open on ``stream``
        whose snapshot is the slot's (read before anything is streamed), its progress record started first
        (so that a crash right after the slot exists still finds a snapshot to read)."""
        name = quote_ident(self.spec.slot)
        if not self.spec.snapshot:
            rows = stream.query(f"CREATE_REPLICATION_SLOT {name} LOGICAL pgoutput NOEXPORT_SNAPSHOT").rows
            return parse_lsn(str(rows[0][1]))
        path = self.progress_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        append_durably(path, "")
        stream.query("BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ")
        rows = stream.query(f"CREATE_REPLICATION_SLOT {name} LOGICAL pgoutput (SNAPSHOT 'use')").rows
        self._in_snapshot = True
        return parse_lsn(str(rows[0][1]))

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
        """The next snapshot chunk or committed transaction, or None when nothing completed one within ``timeout_s``."""
        if self._snapshot is not None:
            chunk = self._snapshot.next()
            if chunk is not None:
                return chunk
            self._snapshot = None
            assert self._stream is not None
            self._start(self._stream)
        stream, machine = self._stream, self._machine
        assert stream is not None and machine is not None, "open() first"
        budget = self._budget
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if not stream.buffered and not select.select([stream.fileno()], [], [], max(left, 0.0))[0]:
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
                tx = machine.feed_data(message.data)
                if tx is None:
                    if budget is not None and machine.open and budget.note(len(message.data)):
                        taken = machine.take_open()
                        if not self.feedback.already_sent(machine.final_lsn or 0):  # resent after a reconnection:
                            self._spill = self._spill or self._new_spill()          # dropped as it comes
                            self._spill.write(taken)
                        budget.released()
                    continue
                spill, self._spill = self._spill, None
                if budget is not None:
                    budget.released()
                if self.feedback.already_sent(tx.commit_lsn):
                    if spill is not None:
                        spill.close()
                    continue
                if spill is not None:
                    self._spilled[tx.commit_lsn] = spill
                return tx

    def _new_spill(self) -> TransactionSpill | ChangeSpill:
        return ChangeSpill() if self.spec.spill_changes else TransactionSpill()

    def take_spill(self, commit_lsn: int) -> TransactionSpill | None:
        """The spill file of the transaction committed at ``commit_lsn`` as puts (None: it was not spilled),
        handed over."""
        spill = self._spilled.pop(commit_lsn, None)
        assert not isinstance(spill, ChangeSpill), "spill_changes: take_changes"
        return spill

    def take_changes(self, commit_lsn: int) -> ChangeSpill | None:
        """The changes spilled of the transaction committed at ``commit_lsn`` (``spill_changes``; None: it was
        not spilled), handed over."""
        spill = self._spilled.pop(commit_lsn, None)
        assert not isinstance(spill, TransactionSpill), "spill as puts: take_spill"
        return spill

    def _drop_spills(self) -> None:
        """Forget what was written out (the stream starts again: Postgres sends it all again)."""
        for spill in (self._spill, *self._spilled.values()):
            if spill is not None:
                spill.close()
        self._spill, self._spilled = None, {}

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
        if self._stream is None or not self._streaming:
            return  # reading the snapshot: nothing streamed yet, nothing to confirm
        now = time.time_ns() // 1000 - POSTGRES_EPOCH_US
        self._stream.send_copy_data(self.feedback.status(now, reply_requested=reply_requested).encode())

    def close(self) -> None:
        for conn in (self._stream, self._catalog):
            if conn is not None:
                conn.close()
        self._stream = self._catalog = None
        self._snapshot, self._in_snapshot, self._streaming = None, False, False
        self._drop_spills()


def slot_position(address: PgAddress, slot: str) -> int | None:
    """The slot's ``confirmed_flush_lsn`` (None: no slot, or nothing confirmed)."""
    conn = PgConnection(address)
    try:
        rows = conn.query("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = "
                          f"{quote_literal(slot)}").rows
    finally:
        conn.close()
    return parse_lsn(rows[0][0]) if rows and rows[0][0] else None

