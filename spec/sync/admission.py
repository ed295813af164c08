"""What a sync server admits, decided before anything of a put is queued, sans-IO.

The server executes these rules; it decides none of them itself:

- draining: a server shutting down refuses every put but probes (``admit_put``);
- size limits: a message above ``max_message_bytes``, or a put larger than the high-watermark
  itself, is refused (``PutReading``, message by message, holding nothing of a refused put);
- overload: pending bytes plus bytes of puts being read stay under the high-watermark, and so does
  a flush's working set unless what puts held when it started leaves it no room (the flush comes
  first: past the high-watermark puts get no more bytes); a put that would pass it is answered
  ``accepted=false`` (retry later) and nothing of it is kept (``MemoryBudget``, ``flush_working_set``,
  ``PutReading``, ``fits_watermark``);
- names: table paths (``spec.sync.confinement.table_name``);
- schemas and values: what no table can store is refused at put time (``admit_schema``,
  ``admit_rows``), so a put that is acknowledged can be flushed;
- streams: the bearer token is checked first, before anything of a stream is read or held
  (``PutStream.open``); a stream holds a put slot only once its first message arrived, and ends
  at a deadline naming its setting, or at a stop's grace (``PutLimits``, ``PutSlots``,
  ``PutStream.ending``);
- transaction timeout: ``spec.sync.writer.SyncWriter.expire``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from spec.clock import after
from spec.sync.errors import (
    BearerTokenRequired, PutSlotsBusy, PutTooLarge, ServerDraining, StreamDeadlineExceeded, SyncError, UnstorableSchema,
)
from spec.sync.messages import ColumnRole
from spec.sync.schema import SyncSchema


@dataclass(frozen=True)
class PutLimits:
    """What puts may make the server hold, and for how long: one put's bytes, its stream's time, the
    puts served at once and the connections they come on (the one home of the server's limits;
    the transport holds the connection limits, ``PutReading`` and ``PutStream`` the others)."""

    max_message_bytes: int
    high_watermark: int
    max_concurrent_puts: int
    put_timeout_s: float
    first_message_timeout_s: float
    max_connections: int
    """Open client connections at most; at the cap a newcomer evicts one (``spec.admission.ConnectionAdmission``)."""
    handshake_timeout_s: float
    """A connection that has not completed the HTTP/2 handshake (its SETTINGS acknowledged) by then is closed."""
    idle_timeout_s: float
    """A connection without a stream for this long is closed (GOAWAY)."""
    max_streams_per_connection: int
    """Streams open at once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)."""

    @property
    def receive_limit(self) -> int:
        """The largest message worth receiving: one above the high-watermark could never be kept, so
        it is refused from its length prefix, unread, like one above ``max_message_bytes``."""
        return min(self.max_message_bytes, self.high_watermark)


FIRST_MESSAGE_TIMEOUT_SETTING = "--first-message-timeout-s"
PUT_TIMEOUT_SETTING = "--put-timeout-s"


class PutSlots:
    """Puts served at once: a stream takes a slot (and a thread) only once its first message arrived,
    so silent streams hold none; the next one past the cap is refused as busy (callers serialize)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0

    def take(self) -> None:
        """Take a slot; raise PutSlotsBusy (retryable) when every slot is in use."""
        if self.in_use >= self.capacity:
            raise PutSlotsBusy(self.capacity)
        self.in_use += 1

    def give_back(self) -> None:
        self.in_use -= 1


class PutStream:
    """One put stream's deadline: its first message within ``first_message_timeout_s`` of its start,
    then the whole put within ``put_timeout_s`` of that message; past it, ``expired`` says which."""

    def __init__(self, limits: PutLimits, opened_at: float) -> None:
        self.limits = limits
        self.deadline = after(opened_at, limits.first_message_timeout_s)
        self.started = False

    @classmethod
    def open(cls, limits: PutLimits, now: float, *, authorized: bool) -> PutStream:
        """A stream opened at ``now``; auth first: without the bearer token raise BearerTokenRequired,
        so a stranger's stream waits for nothing and holds nothing."""
        if not authorized:
            raise BearerTokenRequired()
        return cls(limits, now)

    def first_message(self, now: float, slots: PutSlots) -> None:
        """The first message arrived: take a slot (raise PutSlotsBusy) and run on the put timeout."""
        slots.take()
        self.started = True
        self.deadline = after(now, self.limits.put_timeout_s)

    def ending(self, now: float, stop_deadline: float) -> SyncError | None:
        """Why the stream ends at ``now``, or None: past its own deadline (``expired``), or past a
        stop's grace (``ServerDraining``), whichever passed; its own deadline names its setting."""
        if now >= self.deadline:
            return self.expired()
        if now >= stop_deadline:
            return ServerDraining()
        return None

    def expired(self) -> StreamDeadlineExceeded:
        """The refusal of a stream past its deadline, naming the setting it ran past."""
        if self.started:
            return StreamDeadlineExceeded("The put did not complete", PUT_TIMEOUT_SETTING, self.limits.put_timeout_s)
        return StreamDeadlineExceeded("No message arrived", FIRST_MESSAGE_TIMEOUT_SETTING,
                                      self.limits.first_message_timeout_s)


def admit_put(draining: bool, probe: bool) -> None:
    """A draining server answers probes only; raise ServerDraining."""
    if draining and not probe:
        raise ServerDraining()


def fits_watermark(pending: int, size: int, high_watermark: int) -> bool:
    """Whether ``size`` more pending bytes keep pending data under the high-watermark."""
    return pending + size <= high_watermark


FLUSH_BYTES_PER_BYTE = 3
"""What a flush holds beyond the pending data it writes, per byte of it: the keys it looks up (a sort of
them), the squash of changes touching the same keys, the rows that replace them, the sort order.  Arrow's
allocations peaked at 2.6 times the pending bytes on the narrowest rows (three int64 columns, the second
put updating half the first's keys), 2.2 on rows of about 1 KiB, 1.7 on inserts (docs/sync.md, "Memory";
``tests/sync/test_sync_flush_memory.py`` holds a flush to it)."""


def flush_working_set(pending_bytes: int) -> int:
    """The bytes a flush of ``pending_bytes`` of pending data holds while it runs, beyond them."""
    return FLUSH_BYTES_PER_BYTE * pending_bytes


class MemoryBudget:
    """Pending bytes plus bytes of puts being read plus the working set of the flush running, held under the
    high-watermark (callers serialize).

    How a flush and the puts in flight share it: the flush comes first.  Its working set is taken when
    it starts, whatever puts hold then (it is what frees memory); from then on a put gets no more bytes
    while the total is past the high-watermark (its next message is refused and it drops what it holds:
    ``PutReading``), and a put that finished reading meanwhile drops its batches and is answered busy
    (``yields_to_flush``) rather than holding them until the flush ends.  So past the high-watermark stay
    only the puts that had finished reading when the flush started (they wait for the write lock) and
    what a put holds until its next message: both at most what was held then.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0
        self.reading = 0
        self.flushing = 0
        self.peak = 0

    @property
    def held(self) -> int:
        return self.pending + self.reading + self.flushing

    def set_pending(self, pending: int) -> None:
        self.pending = pending
        self.peak = max(self.peak, self.held)

    def set_flushing(self, n: int) -> None:
        """A flush holding ``n`` bytes beyond its pending data started (``flush_working_set``), or ended (0)."""
        self.flushing = n
        self.peak = max(self.peak, self.held)

    def yields_to_flush(self, holding: int) -> bool:
        """Whether a put that finished reading, ``holding`` bytes, must drop them and be answered busy: a
        flush's working set made the total pass the high-watermark (a put holding nothing, a probe, goes on)."""
        return holding > 0 and self.held > self.limit

    def reserve(self, n: int) -> bool:
        """Reserve ``n`` bytes of a put being read; False (nothing reserved) past the high-watermark."""
        if self.held + n > self.limit:
            return False
        self.reading += n
        self.peak = max(self.peak, self.held)
        return True

    def release(self, n: int) -> None:
        self.reading -= n


class PutReading:
    """The size and watermark verdicts on one put's messages as they arrive.

    ``keep`` says whether the message's batch may be held (its bytes were reserved); once
    the put is refused or over the watermark, what it held is given back (``drop``) and
    nothing more is kept, but the stream is still read to its end so a client still writing
    gets the answer rather than a broken stream.
    """

    def __init__(self, limits: PutLimits) -> None:
        self.limits = limits
        self.total = 0
        self.held = 0
        self.refusal: PutTooLarge | None = None
        self.over_watermark = False

    def may_keep(self, size: int) -> bool:
        """Whether a message of ``size`` bytes may be kept if the budget reserves it (ask the budget only then)."""
        return (self.refusal is None and not self.over_watermark and size <= self.limits.max_message_bytes
                and self.total + size <= self.limits.high_watermark)

    def keep(self, size: int, reserved: bool) -> bool:
        """Whether a message of ``size`` bytes is kept; ``reserved``: the budget reserved its bytes.

        False means the put holds nothing from now on: the caller drops what it held (``drop``).
        """
        if reserved:
            self.total += size
            self.held += size
            return True
        if self.refusal is None and size > self.limits.max_message_bytes:
            self.refusal = PutTooLarge("A message", size, self.limits.max_message_bytes)
        elif self.refusal is None and self.total + size > self.limits.high_watermark:
            self.refusal = PutTooLarge("A put", self.total + size, self.limits.high_watermark)
        elif self.refusal is None:
            self.over_watermark = True
        self.total += size
        return False

    def drop(self) -> int:
        """Bytes held so far, to give back; the put holds nothing afterwards."""
        held, self.held = self.held, 0
        return held

    def finish(self) -> None:
        """Raise the refusal, if the put was refused."""
        if self.refusal is not None:
            raise self.refusal


_NESTED = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list, pa.types.is_map,
           pa.types.is_struct, pa.types.is_union, pa.types.is_dictionary)


def _type_problem(name: str, field: pa.Field) -> str | None:
    if pa.types.is_null(field.type):
        return f"column {name!r} has the null type, which holds no value"
    if any(test(field.type) for test in _NESTED):
        return f"column {name!r} has the nested type {field.type}, which the sync store does not write"
    return None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a table column as it is, or None.

    A control character (NUL above all: Delta's writer cuts a name there, so ``a\\0b`` would
    be stored as ``a``) or an empty name; the name is shown escaped, so the refusal is one line.
    """
    if not name:
        return "a column name is empty"
    controls = sorted({ch for ch in name if unicodedata.category(ch) == "Cc"})
    if controls:
        shown = ", ".join(f"U+{ord(ch):04X}" for ch in controls)
        return f"column name {name!r} holds the control character(s) {shown}, which a Delta table does not keep"
    return None


def admit_schema(table: str, schema: SyncSchema) -> None:
    """Refuse a put whose table columns cannot be one table: raise UnstorableSchema.

    Table columns are the NEW_PK and VALUE columns under their descriptor names; no two may
    share a name, even in another case (Delta column names are case-insensitive), and no
    column may have the null type or a nested type.  No descriptor may name a column with a
    control character or an empty name (``name_problem``).  Descriptors of one role may not
    repeat a name either (a CHANGED column pairs with one VALUE column).
    """
    for column in schema.columns:
        problem = name_problem(column.name)
        if problem is not None:
            raise UnstorableSchema(table, problem)
    seen: dict[tuple[ColumnRole, str], str] = {}
    for column in schema.columns:
        key = (column.role, column.name.lower())
        if key in seen:
            raise UnstorableSchema(table, f"columns {seen[key]} and {column.name} of role {column.role.name} "
                                          "have the same name (names are case-insensitive)")
        seen[key] = column.name
    keys = {c.name.lower(): c.name for c in schema.by_role(ColumnRole.NEW_PK)}
    for column in schema.by_role(ColumnRole.VALUE):
        if column.name.lower() in keys:
            raise UnstorableSchema(table, f"value column {column.name} is named like key column "
                                          f"{keys[column.name.lower()]}")
    for column in schema.columns:
        problem = _type_problem(column.name, column.field)
        if problem is not None:
            raise UnstorableSchema(table, problem)


def _signed_max(t: pa.DataType) -> int:
    return int(2 ** (t.bit_width - 1) - 1)


def admit_rows(table: str, schema: SyncSchema, batches: Sequence[pa.Table]) -> list[pa.Table]:
    """The put's batches with keys made canonical; raise for rows no table can store.

    - a row with a partly null key (``SyncSchema.check_keys``);
    - a NaN key: NaN equals nothing, so it names no row that a later change could find;
    - an unsigned value above the signed type of its width (Delta stores UInt64 as ``long``);
    - -0.0 in a key column becomes 0.0: they compare equal, so they are one key.
    """
    out = []
    key_fields = {c.field.name for c in schema.columns if c.role in (ColumnRole.OLD_PK, ColumnRole.NEW_PK)}
    for batch in batches:
        schema.check_keys(batch)
        columns = []
        for name, column in zip(batch.column_names, batch.columns):
            kind = column.type
            if pa.types.is_unsigned_integer(kind) and len(column) and column.null_count < len(column):
                top = pc.max(column).as_py()
                if top > _signed_max(kind):
                    raise UnstorableSchema(table, f"column {name} holds {top}, above the largest value "
                                                  f"({_signed_max(kind)}) a Delta table stores for {kind}")
            if name in key_fields and pa.types.is_floating(kind):
                if pc.any(pc.is_nan(column)).as_py():
                    raise UnstorableSchema(table, f"key column {name} holds NaN, which names no row")
                column = pc.add(column, pa.scalar(0.0, kind))  # -0.0 + 0.0 is 0.0; every other value is kept
            columns.append(column)
        out.append(pa.table(columns, schema=batch.schema))
    return out

