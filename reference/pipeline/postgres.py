"""The Postgres source on PySpark: ``python -m reference.pipeline --source postgresql://...``.

One source task streams the slot (:class:`~reference.cdc.source.SlotSource`); the streaming
shuffle routes each row change by its table and key to one of ``--readers`` sink tasks, so every
change of a row reaches one sink, in commit order. A key change whose two keys belong to
different sinks travels as a delete and an insert of the whole new row
(:meth:`~spec.pgoutput.changes.RowChange.split`). With several sinks, the values a key change did
not resend (unchanged TOAST values) are read back from the table at the new key first
(:mod:`spec.pgoutput.lookup` says why a later value is as good).

Memory is bounded whatever a transaction's size (spec/pgoutput/spill.py): the source task holds at
most ``spill_bytes`` of the open transaction's pgoutput as changes, the rest in a spill file it
reads back a piece at a time once the Commit arrived, and a sink holds at most ``spill_bytes`` of
its open parts' changes (about their text bytes), the rest written out, and sends each part as one put at its
transaction's end (:class:`PartsEnd`), read back from disk a piece at a time.

A change the pipeline cannot apply (a value with no Arrow form, say) stops the stream: the source
task sends every sink :class:`StreamStopped` with the error's one line and ends, so no task fails
(Spark would retry it and print its traces) and the driver prints the line and exits 1; the slot
is not confirmed past the last durable transaction.

Sync origins. A sink syncs its share of one table as its own origin ``<slot>/<schema>/<table>/sink<r>``
and numbers each part with its transaction's commit LSN, so each sync transaction is one put (the
server refuses puts of concurrent origins interleaved inside a transaction), and an origin's
stream is the same on every run (routing is deterministic). The slot is confirmed up to the last
transaction all of whose parts are durable (:class:`~spec.pgoutput.feedback.PartsDurability`),
which the source task learns by probing the sync server for those origins. A kill anywhere
replays from the slot; the sinks' clients skip what their origins hold durable.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from reference.cdc.pgwire import PgAddress, PgConnectionError, PgServerError
from reference.cdc.replicate import IDLE_S, WalRetentionExceeded, puts_of, settled_durable, sync_put
from reference.cdc.source import SlotSource, SlotSpec, SourceSetupError
from reference.cdc.spill import PartSpill
from reference.cdc.verify import TableDifference, verify
from reference.cluster.config import DriverCluster
from reference.pipeline.routing import owner
from reference.pipeline.syncserver import SyncServerProcess, pythonpath
from reference.sync.client import SyncClient, SyncPut, SyncUnavailable
from spec.errors import RuntimeFailure
from spec.pgoutput.changes import RowChange, TableChanges, TablePut
from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.feedback import PartsDurability
from spec.pgoutput.lookup import RowLookup, whole_row
from spec.pgoutput.outage import Away, OutagePolicy, OutageStep, postgres_transient
from spec.pgoutput.spill import SPILL_BYTES, SpillBudget, change_weight
from spec.sync.flight import MESSAGE_BYTES
from spec.pgoutput.transactions import SourceTransaction
from streamwire.cli import one_line


TRUNCATING_SINK = 0
"""The sink that carries every change of a table in a transaction that truncates it.

A TRUNCATE empties the table for every sink, so it must land after every change sent before it and
before every change sent after it, whichever sink carries them: the source waits until everything
it sent is durable, sends the transaction with all of the truncated table's changes through this
one sink (its put empties the table and applies what followed: the sync truncate extension), and
waits until that is durable before it sends more. Two waits of about a flush each per such
transaction; nothing else waits."""


class DurabilityStalled(RuntimeFailure):
    """The sinks did not make what the source sent durable in time (around a TRUNCATE)."""

    condition = "CDC_DURABILITY_STALLED"


@dataclass(frozen=True)
class StreamStopped:
    """The source stopped on what it cannot apply; ``reason`` is the whole error, one line."""

    reason: str


@dataclass(frozen=True)
class PartsEnd:
    """Every change of the transaction committed at ``commit_lsn`` was sent: the sink's parts of it are whole."""

    commit_lsn: int


ShuffledRecord = tuple[int, RowChange] | PartsEnd | StreamStopped
"""(commit LSN, the change), the end of a transaction, or the stream's end on an error."""


@dataclass(frozen=True)
class CdcConfig:
    """What the source and sink tasks need (pickled into them)."""

    source: str
    slot: str
    publication: str
    create_slot: bool
    until: str | None
    readers: int
    sync_location: str
    sync_deadline_s: float = 120.0
    message_bytes: int = MESSAGE_BYTES
    """How large each Arrow message of a put is made (under the sync server's message limit)."""
    spill_bytes: int = SPILL_BYTES
    """The source task's bound on the open transaction's pgoutput bytes held as changes, and each sink's on
    the changes of its open parts (spec/pgoutput/spill.py, ``change_weight``)."""


SNAPSHOT_STATE = ".cdc-snapshot"
"""The store's directory for the snapshot's progress record (it outlives a run, as the store does)."""


def snapshot_origin(slot: str) -> str:
    """The sync origin of the initial snapshot's chunks (the driver's, before the job)."""
    return f"{slot}/snapshot"


def copy_snapshot(source: SlotSource, location: str, deadline_s: float = 120.0) -> int:
    """The driver's set-up before the job: check it, create the slot if asked and, with a snapshot to read
    (the slot created now under ``--snapshot initial``, or an unfinished one resumed), send its chunks through
    an origin of their own (:func:`snapshot_origin`) and wait until they are durable, so that every change the
    job's sinks then apply finds the rows the snapshot wrote; the rows copied."""
    client = SyncClient(location, snapshot_origin(source.spec.slot), deadline_s=deadline_s)
    rows, last = 0, None
    try:
        for chunk in source.read_snapshot(lambda: settled_durable(client)):
            client.send_transaction(chunk.commit_lsn, puts_of(chunk))
            rows, last = rows + chunk.row_count, chunk.commit_lsn
        if last is not None:
            client.wait_durable(last)
    finally:
        client.close()
    return rows


def sync_origin(slot: str, path: str, reader: int) -> str:
    """The sync origin of sink ``reader``'s share of table ``path``."""
    return f"{slot}/{path}/sink{reader}"


def route_key(path: str, key: tuple[object, ...]) -> int:
    """A stable integer for a row's table and key (the same in every process and run)."""
    return zlib.crc32(repr((path, key)).encode())


def crosses_sinks(change: RowChange, readers: int) -> bool:
    """A key change whose old and new key belong to different sinks (it travels as a delete and an insert)."""
    if not change.changes_key:
        return False
    assert change.old_key is not None and change.new_key is not None
    path = change.table.path
    return owner(route_key(path, change.old_key), readers) != owner(route_key(path, change.new_key), readers)


def routed(change: RowChange, readers: int) -> list[tuple[int, RowChange]]:
    """The change under the sink that owns its key; a key change across sinks as a delete and an insert
    (its unchanged values read back first: :func:`whole_rows`)."""
    path = change.table.path
    if crosses_sinks(change, readers):
        assert change.old_key is not None and change.new_key is not None
        delete, insert = change.split()
        return [(owner(route_key(path, change.old_key), readers), delete),
                (owner(route_key(path, change.new_key), readers), insert)]
    key = change.new_key if change.new_key is not None else change.old_key
    assert key is not None
    return [(owner(route_key(path, key), readers), change)]


def needs_read_back(change: RowChange, readers: int) -> bool:
    """A key change with an unchanged value, when there are several sinks: its unchanged values are read
    back from the table. A key change across sinks needs it (its new row is sent whole), and so does
    one within a sink: the sync server would carry the value on from the old key, where a change across
    sinks may have left a null (spec/pgoutput/lookup.py); with one sink the server has every value."""
    return readers > 1 and change.changes_key and not all(change.changed)


def whole_rows(xid: int, piece: dict[str, TableChanges], readers: int,
               read_back: Callable[[RowLookup], dict[tuple[object, ...], dict[str, object]]]) -> dict[str, list[RowChange]]:
    """``piece`` (changes per table of the committed transaction ``xid``), each key change that
    :func:`needs_read_back` with its unchanged values read back (one ``read_back`` per table that has such
    changes)."""
    out: dict[str, list[RowChange]] = {}
    for path, table_changes in piece.items():
        changes = list(table_changes)
        moves = [c for c in changes if needs_read_back(c, readers)]
        if moves:
            found = read_back(RowLookup.of(xid, moves))
            changes = [whole_row(c, found) if needs_read_back(c, readers) else c for c in changes]
        out[path] = changes
    return out


def source_partition(config: CdcConfig, index: int, _: Iterator[object]) -> Iterator[tuple[int, ShuffledRecord]]:
    """Input partition 0: the slot's transactions as routed records, until ``until`` is durable.

    The input has one partition per reader (the others empty), so exchange task i runs input partition
    i's function: the source yields straight into writer 0, which it must, since it waits for its own
    output to become durable (behind PySpark's buffered pipe a few small transactions would wait for
    ever). The shuffle keeps an input's function in its exchange task with fewer partitions too
    (reference/spark/shuffle.py, ``_spread``); one per reader keeps the tasks alike."""
    if index:
        return
    source = SlotSource(PgAddress.parse(config.source), SlotSpec(
        config.slot, config.publication, config.create_slot, config.until, reads_back=config.readers > 1,
        spill_bytes=config.spill_bytes, spill_changes=True))
    probes: dict[str, SyncClient] = {}
    try:
        source.open()
        yield from _stream(config, source, probes)
    except (PgOutputError, SourceSetupError, DurabilityStalled, WalRetentionExceeded) as exc:
        for reader in range(config.readers):
            yield reader, StreamStopped(str(exc))
    finally:
        source.close()
        for probe in probes.values():
            probe.close()


def _stream(config: CdcConfig, source: SlotSource, probes: dict[str, SyncClient]) -> Iterator[tuple[int, ShuffledRecord]]:
    """The open slot's transactions as routed records until ``until`` is durable (``probes``: the sync
    clients asking for each origin's durable number, closed by the caller)."""
    parts = PartsDurability()
    policy = OutagePolicy(config.slot)
    asked = 0.0

    def durable_point() -> None:
        """Probe the origins with parts not yet durable (one put each, so at most every IDLE_S); a sync server
        that is away is asked again later (the stream is read meanwhile, so Postgres keeps it)."""
        nonlocal asked
        if time.monotonic() - asked < IDLE_S:
            return
        asked = time.monotonic()
        for origin in parts.origins - probes.keys():
            probes[origin] = SyncClient(config.sync_location, origin, deadline_s=policy.attempt_s)
        try:
            durable = {o: probes[o].probe().durable_sequence_number for o in parts.origins}
        except SyncUnavailable as exc:
            _warn(policy.failed(time.monotonic(), Away.SYNC_SERVER, config.sync_location, one_line(exc, typed=False),
                                source.retained_wal()))
            return
        _recovered(policy)
        source.confirm(parts.update(durable))

    def next_transaction() -> SourceTransaction | None:
        """The next committed transaction (None: none within IDLE_S); a Postgres that is away, or that ended
        the stream (its wal_sender_timeout while the sinks were stalled), is waited for and streamed from
        again: it resends from the confirmed position, and what was already sent is skipped."""
        try:
            tx = source.read(IDLE_S)
            if tx is None:
                durable_point()
                source.ask_position()
            return tx
        except (PgConnectionError, PgServerError) as exc:
            if not postgres_transient(exc.sqlstate if isinstance(exc, PgServerError) else None):
                raise
            _stream_again(source, policy, one_line(exc, typed=False, whole=True))
            return None

    def settle() -> None:
        """Wait until every part sent is durable (around a transaction with a TRUNCATE)."""
        deadline = time.monotonic() + config.sync_deadline_s
        while parts.not_durable:
            if time.monotonic() > deadline:
                raise DurabilityStalled(f"the sinks did not make the parts before a TRUNCATE durable within "
                                        f"{config.sync_deadline_s:g} s")
            durable_point()
            source.keep_alive()
            time.sleep(IDLE_S / 4)

    while not source.feedback.done:
        tx = next_transaction()
        if tx is None:
            continue
        spill = source.take_changes(tx.commit_lsn)
        if not tx.row_count:
            continue
        origins: set[str] = set()
        try:
            truncated = {path for path, changes in tx.changes.items() if changes.truncates}
            if spill is not None:
                truncated |= spill.truncated
            if truncated:
                settle()
            for piece in itertools.chain(spill.pieces() if spill is not None else (), [tx.changes]):
                for path, changes in whole_rows(tx.xid, piece, config.readers, source.read_back).items():
                    for change in changes:
                        for reader, routed_change in ([(TRUNCATING_SINK, change)] if path in truncated
                                                      else routed(change, config.readers)):
                            origins.add(sync_origin(config.slot, path, reader))
                            yield reader, (tx.commit_lsn, routed_change)
        finally:
            if spill is not None:
                spill.close()
        for reader in range(config.readers):
            yield reader, PartsEnd(tx.commit_lsn)
        parts.on_sent(tx.commit_lsn, frozenset(origins))
        source.feedback.on_sent(tx.commit_lsn)
        if truncated:
            settle()
        durable_point()


def _stream_again(source: SlotSource, policy: OutagePolicy, reason: str) -> None:
    """Wait for Postgres as ``policy`` says (its warnings on stderr) until the slot streams again."""
    while True:
        step = policy.failed(time.monotonic(), Away.POSTGRES, source.address.url(), reason, source.retained_wal())
        _warn(step)
        time.sleep(step.retry_in_s)
        try:
            source.reconnect()
        except (PgConnectionError, PgServerError) as exc:
            if not postgres_transient(exc.sqlstate if isinstance(exc, PgServerError) else None):
                raise
            reason = one_line(exc, typed=False, whole=True)
            continue
        _recovered(policy)
        return


def _warn(step: OutageStep) -> None:
    """Carry out what the outage policy said besides waiting: stop, or print its warning."""
    if step.stop is not None:
        raise WalRetentionExceeded(step.stop)
    if step.warning is not None:
        print(f"cdc: {step.warning}", file=sys.stderr, flush=True)


def _recovered(policy: OutagePolicy) -> None:
    if (back := policy.recovered(time.monotonic())) is not None:
        print(f"cdc: {back}", file=sys.stderr, flush=True)


@dataclass
class SinkCounts:
    """What one sink task synced."""

    reader: int
    parts: int = 0
    rows: int = 0
    stopped: str | None = None
    """The source's error line when the stream stopped on it (the parts still open were not sent)."""


@dataclass
class _OpenPart:
    """A sink's part of one table in one transaction, not yet whole: what it holds, and what it wrote out."""

    put: TablePut
    spill: PartSpill | None = None
    rows: int = 0

    def write_out(self) -> None:
        """Write what is held out (it comes before what follows)."""
        if self.put.image is not None:
            self.spill = self.spill or PartSpill()
            self.spill.write(self.put)
        self.put = TablePut()

    def sync_put(self) -> SyncPut:
        """The part as one put: what was written out (read back a piece at a time when sent), then what is held."""
        return sync_put(self.put) if self.spill is None else self.spill.put(then=self.put)


def sink_partition(config: CdcConfig, reader: int, records: Iterator[tuple[int, ShuffledRecord]]) -> Iterator[SinkCounts]:
    """A sink task: its part of each table in each transaction becomes one sync transaction of that table's
    origin, sent as one put once the transaction's end arrives; past the budget, held parts are written out."""
    clients: dict[str, SyncClient] = {}
    open_parts: dict[tuple[int, str], _OpenPart] = {}
    budget = SpillBudget(config.spill_bytes)
    counts = SinkCounts(reader)

    def drop_open() -> None:
        for part in open_parts.values():
            if part.spill is not None:
                part.spill.close()
        open_parts.clear()
        budget.released()

    try:
        for _, record in records:
            if isinstance(record, StreamStopped):
                counts.stopped = record.reason
                drop_open()
            elif isinstance(record, PartsEnd):
                for key in [k for k in open_parts if k[0] == record.commit_lsn]:
                    part = open_parts.pop(key)
                    origin = sync_origin(config.slot, key[1], reader)
                    client = clients.get(origin)
                    if client is None:
                        client = clients[origin] = SyncClient(config.sync_location, origin,
                                                              deadline_s=config.sync_deadline_s,
                                                              message_bytes=config.message_bytes)
                    client.send_transaction(record.commit_lsn, [part.sync_put()])
                    counts.parts += 1
                    counts.rows += part.rows
                if not open_parts:
                    budget.released()
            else:
                commit_lsn, change = record
                part = open_parts.setdefault((commit_lsn, change.table.path), _OpenPart(TablePut()))
                part.put.add(change)
                part.rows += 1
                if budget.note(change_weight(change)):
                    for held in open_parts.values():
                        held.write_out()
                    budget.released()
        if open_parts:
            raise RuntimeError(f"sink {reader}: the stream ended inside {len(open_parts)} parts")
    finally:
        drop_open()
        for client in clients.values():
            client.close()
    yield counts


@dataclass(frozen=True)
class CdcOptions:
    """The command line's options for a Postgres source."""

    source: str
    publication: str
    slot: str
    store: str
    create_slot: bool = False
    until: str | None = None
    verify: bool = False
    readers: int = 2
    host: str = "127.0.0.1"
    snapshot: bool = True
    """Copy the rows the tables hold first, when ``create_slot`` creates the slot (``--snapshot initial``)."""
    provider: str = "memory"
    """The cluster provider the streaming shuffle's directory lives on (``--provider``)."""
    master: str | None = None
    """The Spark master (``--master``); default: local, one slot per task."""
    sync: str | None = None
    """A running sync server's location (``--sync``) whose store is ``store``; default: start one."""


def run(options: CdcOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run the Spark job (source -> streaming shuffle -> sinks) and, with ``verify``, compare the tables."""
    from reference.pipeline.job import root_cause, spark_context
    from reference.spark.shuffle import StreamingShuffle

    store = options.store
    Path(store).mkdir(parents=True, exist_ok=True)
    source = SlotSource(PgAddress.parse(options.source), SlotSpec(
        options.slot, options.publication, options.create_slot, reads_back=options.readers > 1,
        snapshot=options.snapshot, state_dir=str(Path(store) / SNAPSHOT_STATE)))
    host = DriverCluster(options.provider, options.host)
    server = None if options.sync else SyncServerProcess(store, Path(store) / ".sync-server.log", host=options.host)
    sc: Any = None
    try:
        location = server.start() if server is not None else options.sync
        assert location is not None
        print(f"sync server at {location}, store {store}", file=err, flush=True)
        copied = copy_snapshot(source, location)
        if copied:
            print(f"pipeline: snapshot of {copied} rows durable; streaming from the slot", file=err, flush=True)
        config = CdcConfig(options.source, options.slot, options.publication, options.create_slot, options.until,
                           options.readers, location)
        sc = spark_context(1 + options.readers, options.host, host.executor_url, options.master, max_failures=1)
        started = time.monotonic()
        with StreamingShuffle(sc) as streaming:
            sources = sc.parallelize(range(options.readers), options.readers).mapPartitionsWithIndex(
                functools.partial(source_partition, config))
            shuffled = streaming.shuffle(sources, options.readers, partition_func=_reader)
            try:
                counts: list[SinkCounts] = shuffled.mapPartitionsWithIndex(
                    functools.partial(sink_partition, config)).collect()
            except Exception as exc:  # a task's error arrives wrapped in pages of Spark's text
                print(f"pipeline: {root_cause(exc)}", file=err)
                return 1
        elapsed = time.monotonic() - started
        stopped = next((c.stopped for c in counts if c.stopped is not None), None)
        if stopped is not None:
            print(f"pipeline: {stopped}", file=err)
            return 1
        rows = sum(c.rows for c in counts)
        print(f"pipeline: {sum(c.parts for c in counts)} parts, {rows} rows synced by {options.readers} sinks "
              f"in {elapsed:.1f} s", file=out, flush=True)
        if not options.verify:
            return 0
        differences: list[TableDifference] = verify(PgAddress.parse(options.source), options.publication, Path(store))
        for difference in differences:
            print(difference.line(), file=out)
        if differences:
            return 1
        print(f"pipeline OK: every table of publication {options.publication} matches its Delta table", file=out)
        return 0
    finally:
        if sc is not None:
            sc.stop()
        if server is not None:
            server.stop()
        host.close()


def _reader(route: int) -> int:
    """The shuffle's partition function: the records already carry their sink."""
    return route
