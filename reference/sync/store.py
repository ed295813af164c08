"""Delta Lake store of the sync server: keyed, idempotent application of squashed changes.

On a local root (and ``deletion_vectors``, the default) a flush goes by Delta deletion vectors
(``reference.sync.dv_writer``): the changed rows' old positions are marked in their files' DVs
and their new versions go to one new file, so its cost follows the changed keys whether they
are clustered or scattered.  Otherwise (an object-store root, or DVs off) it goes by copy:
tables are laid out by key (``reference.sync.layout``): files sorted by the first primary-key
column, with disjoint key ranges and at most ``target_file_rows`` rows each.  A flush reads only
the files whose ranges may hold an affected key (chosen from the log's min/max statistics, no
scan), applies the changes to the rows under those keys with the spec's ``apply_squashed``, and
commits one transaction that removes exactly those files and adds their rows back, sorted and
cut into files again.  Its cost follows the keys it touches, not the size of the table.

Every commit carries ``streamwire.sync`` metadata: the per-origin sequences whose transactions
this table fully holds (to skip replays), the durable sequence of every origin once the commit
landed (what a restarted server reports again) and the key columns (what maintenance sorts by).
Maintenance (``maintain``) merges small or overlapping files, vacuums files removed longer ago
than the retention period and checkpoints the log; the server schedules it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, QueryBuilder
from deltalake import Schema as DeltaSchema
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction, RemoveAction

from reference.sync import dv_commit
from reference.sync.delta_log import latest_commit_info, local_dir
from reference.sync.dv_writer import DvWriter
from reference.sync.layout import DataFile, compaction_groups, cut, data_files, key_order, touched_files
from reference.sync.parquet_files import conformed, write_data_file
from spec.delta.deletion_vectors import ENABLE_PROPERTY
from spec.delta.deletion_vectors import FEATURE as DELETION_VECTORS
from spec.sync.messages import ColumnRole, StorageLocation
from spec.sync.schema import SyncSchema, TableShape
from spec.sync.squash import SquashedChange, after_last_truncate, apply_squashed, merge_changes, sorted_distinct
from spec.sync.writer import RowGroupLimits

log = logging.getLogger(__name__)

META_KEY = "streamwire.sync"
META_VERSION = 1
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
DEFAULT_CHECKPOINT_INTERVAL = 100
STATE_LOOKBACK = 50
"""How many recent commits ``read_state`` searches for the sync metadata (others' commits lack it)."""
READER_FEATURES = frozenset({"timestampNtz", "variantType"})
WRITER_FEATURES = frozenset({"timestampNtz", "variantType", "appendOnly", "invariants"})
"""Table features that do not change how data files are written (the store writes Parquet itself).
deltalake lists ``variantType``, ``appendOnly`` and ``invariants`` when it raises a table to writer
version 7; they constrain only tables with variant columns, ``delta.appendOnly`` or invariants."""


class StoreUnwritable(Exception):
    """The store's root cannot be written (a missing parent, a file in the way, a read-only place)."""


class UnsupportedTable(Exception):
    """The table needs Delta features the store does not write (partitions, column mapping, ...)."""


@dataclass(frozen=True)
class StoreSettings:
    """Layout and maintenance settings of a store."""

    target_file_rows: int = 32_768
    """Rows per data file at most; a flush rewrites about this many rows per key range it touches."""
    vacuum_retention_hours: int = 168
    """Files removed (or never committed) longer ago than this are deleted by maintenance."""
    deletion_vectors: bool = True
    """Flushes of local tables mark changed rows in deletion vectors instead of rewriting files
    (the table is raised to reader 3 / writer 7 with ``deletionVectors``)."""
    dv_purge_fraction: float = 0.25
    """Compaction rewrites a file once its deletion vector deletes this fraction of its rows."""
    row_groups: RowGroupLimits = RowGroupLimits()
    """The Parquet row groups of the files written: what a flush copies at once of the rows it writes."""


@dataclass(frozen=True)
class TableState:
    """What a table's latest sync commit says about the sync."""

    marks: dict[str, int]
    durable: dict[str, int]
    keys: tuple[str, ...] = ()


class FileChanges(NamedTuple):
    """What one commit did to a table's data files."""

    files_removed: int = 0
    files_added: int = 0
    rows_removed: int = 0
    rows_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    rows_deleted: int = 0
    """Rows marked deleted in deletion vectors (their files stay)."""
    dv_bytes: int = 0
    """Bytes of the deletion-vector file written."""


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance run did to a table."""

    compaction: FileChanges = FileChanges()
    vacuumed_files: int = 0
    checkpoint_version: int | None = None


def _cluster_values(changes: Sequence[SquashedChange], cluster_type: pa.DataType) -> pa.Array:
    """Distinct values, sorted, of the first key column among the changes' old and new keys.

    NULL is among them (last) when a key has no value there but has one in another key column.
    """
    parts = []
    for change in changes:
        for role in (ColumnRole.OLD_PK, ColumnRole.NEW_PK):
            columns = [change.schema.column(n, role) for n in change.schema.pk_names]
            if any(c is None for c in columns):
                continue
            arrays = [change.batch.column(c.field.name) for c in columns if c is not None]
            present = pc.is_valid(arrays[0])
            for array in arrays[1:]:
                present = pc.or_(present, pc.is_valid(array))
            parts.append(arrays[0].filter(present).cast(cluster_type))
    return sorted_distinct(pa.chunked_array(parts, cluster_type))


def _check_writable(table: DeltaTable, by_dvs: bool) -> None:
    """Refuse a table whose features the store cannot honour (``by_dvs``: it writes deletion vectors)."""
    protocol = table.protocol()
    allowed = {DELETION_VECTORS} if by_dvs else set()
    needs = sorted((set(protocol.reader_features or ()) - READER_FEATURES - allowed)
                   | (set(protocol.writer_features or ()) - WRITER_FEATURES - allowed))
    if table.metadata().configuration.get("delta.appendOnly") == "true":
        needs.append("delta.appendOnly")
    if protocol.min_reader_version == 2 or protocol.min_writer_version in (3, 4, 5, 6):
        needs.append(f"protocol {protocol.min_reader_version}/{protocol.min_writer_version}")
    if table.metadata().partition_columns:
        needs.append("partitions")
    if needs:
        raise UnsupportedTable("the table uses Delta features the sync store does not write: " + ", ".join(needs))


@dataclass
class _Commit:
    """One transaction being assembled: files to remove, files written to add."""

    table: DeltaTable
    files: DeltaStorageHandler
    removes: list[DataFile] = field(default_factory=list)
    adds: list[AddAction] = field(default_factory=list)
    rows_added: int = 0

    def add_rows(self, rows: pa.Table, order: pa.Array, row_groups: RowGroupLimits) -> None:
        """Add a file holding rows ``order`` of ``rows``."""
        self.adds.append(write_data_file(self.files, rows, order, row_groups))
        self.rows_added += len(order)

    def commit(self, props: CommitProperties) -> FileChanges:
        now_ms = int(time.time() * 1000)
        removes = [RemoveAction(f.path, True, now_ms, f.size, {}) for f in self.removes]
        self.table.create_write_transaction([*removes, *self.adds], "append", self.table.schema(),
                                            commit_properties=props)
        return FileChanges(
            files_removed=len(self.removes), files_added=len(self.adds),
            rows_removed=sum(f.rows for f in self.removes), rows_added=self.rows_added,
            bytes_removed=sum(f.size for f in self.removes), bytes_added=sum(a.size for a in self.adds),
        )


def _columns_of(changes: Sequence[SquashedChange], order: Sequence[str] | None = None) -> dict[str, pa.Field]:
    """Every column any of ``changes`` writes, by name: in ``order`` (the table's columns as the spec's fit leaves
    them, ``spec.sync.schema.check_table_fit``; a name no change writes left out), else in order of appearance."""
    fields: dict[str, pa.Field] = {}
    for change in changes:
        for f in change.schema.table_schema():
            fields.setdefault(f.name, f)
    return fields if order is None else {name: fields[name] for name in order if name in fields}


class UnstorableColumn(ValueError):
    """A column whose Arrow type has no Delta Lake type, or whose name Delta would store otherwise."""


def _delta_type_name(field: Any) -> str:
    kind = field.type
    return str(getattr(kind, "type", kind))


def storable_shape(schema: SyncSchema) -> TableShape:
    """The shape a table created by this change would have in Delta (types as Delta names them)."""
    columns: dict[str, str] = {}
    for f in schema.table_schema():
        try:
            (delta_field,) = DeltaSchema.from_arrow(pa.schema([f])).fields
        except Exception as exc:
            raise UnstorableColumn(f"column {f.name!r} has type {f.type}, which a Delta table cannot store") from exc
        if delta_field.name != f.name:
            raise UnstorableColumn(f"column {f.name!r} would be stored by Delta as {delta_field.name!r}")
        columns[f.name] = _delta_type_name(delta_field)
    return TableShape(columns, tuple(schema.pk_names))


def _parsed_state(raw: str) -> TableState:
    """The sync state a commit's ``streamwire.sync`` entry records."""
    meta = json.loads(raw)
    return TableState(
        {o: int(s) for o, s in meta.get("marks", {}).items()},
        {o: int(s) for o, s in meta.get("durable", {}).items()},
        tuple(meta.get("keys", ())),
    )


class DeltaStore:
    """Tables under one root (a local path or ``file://`` URL; other URLs with ``storage_options``).

    Tables it has opened stay open and are brought up to date before each use; callers use a
    store from one thread at a time (the server's write lock).
    """

    def __init__(
        self,
        root: str,
        storage_options: Mapping[str, str] | None = None,
        settings: StoreSettings = StoreSettings(),
    ) -> None:
        self.root = root.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.settings = settings
        self._loaded: dict[str, DeltaTable] = {}
        self._states: dict[str, tuple[int, TableState]] = {}
        """Per table, the sync state of its latest version the store read or wrote, and that version."""
        self._dvs = DvWriter(settings.row_groups)

    def use_row_groups(self, limits: RowGroupLimits) -> None:
        """Cut the row groups of the files written from now on by ``limits``, as a store opened with them would."""
        self.settings = replace(self.settings, row_groups=limits)
        self._dvs.row_groups = limits

    def table_uri(self, path: str, store: StorageLocation | None = None) -> str:
        """Where the table at ``path`` lives (the command's own store root wins)."""
        root = store.location.rstrip("/") if store is not None and store.location else self.root
        return f"{root}/{path.strip('/')}"

    def _options(self, uri: str) -> dict[str, str] | None:
        return self.storage_options or None if uri.startswith(self.root) else None

    def _open(self, uri: str) -> DeltaTable | None:
        """The table at ``uri`` (kept open: loading a log anew replays it), its log read up to its latest
        version unless only the store's own DV commits came since (``DvWriter.latest``)."""
        table = self._loaded.get(uri)
        if table is not None:
            self._dvs.latest(table)
            return table
        opts = self._options(uri)
        if not DeltaTable.is_deltatable(uri, storage_options=opts):
            return None
        table = self._loaded[uri] = DeltaTable(uri, storage_options=opts)
        return table

    def _state(self, table: DeltaTable) -> TableState:
        version = self._dvs.latest(table)
        known = self._states.get(table.table_uri)
        if known is not None and known[0] == version:
            return known[1]
        self._dvs.read_back(table)
        state = self._recorded_state(table)
        self._states[table.table_uri] = (table.version(), state)
        return state

    @staticmethod
    def _recorded_state(table: DeltaTable) -> TableState:
        raw = None
        for limit in (1, STATE_LOOKBACK):  # the latest commit is almost always the store's own
            raw = next((c[META_KEY] for c in table.history(limit) if isinstance(c.get(META_KEY), str)), None)
            if raw is not None:
                break
        return TableState({}, {}) if raw is None else _parsed_state(raw)

    @staticmethod
    def commit_metadata(state: TableState) -> dict[str, str]:
        """The ``commitInfo`` entries that record ``state`` in a commit."""
        meta = {"version": META_VERSION, "marks": state.marks, "durable": state.durable, "keys": list(state.keys)}
        return {META_KEY: json.dumps(meta, sort_keys=True)}

    @classmethod
    def commit_properties(cls, state: TableState) -> CommitProperties:
        """Properties that record ``state`` in a commit (for any writer committing to a sync table)."""
        return CommitProperties(custom_metadata=cls.commit_metadata(state))

    def _by_dvs(self, table: DeltaTable) -> bool:
        """Whether the store writes this table by deletion vectors: a local table, with DVs on in the
        settings or already supported by the table (a file with a DV can only be removed with it)."""
        supported = DELETION_VECTORS in (table.protocol().writer_features or ())
        return local_dir(table.table_uri) is not None and (self.settings.deletion_vectors or supported)

    def table_shape(self, uri: str) -> TableShape | None:
        """Columns of the existing table at ``uri`` and its keys if a sync commit recorded them; None if absent."""
        table = self._open(uri)
        if table is None:
            return None
        keys = self._state(table).keys
        return TableShape({f.name: _delta_type_name(f) for f in table.schema().fields}, keys or None)

    def read_state(self, uri: str) -> TableState:
        """The sync metadata of the table's latest sync commit (empty for a missing table)."""
        table = self._open(uri)
        return self._state(table) if table is not None else TableState({}, {})

    def _local_root(self) -> str | None:
        parsed = urlparse(self.root)
        return parsed.path if parsed.scheme == "file" else (self.root if not parsed.scheme else None)

    def check_writable(self) -> None:
        """Create a local root if needed and write a file in it; raise StoreUnwritable (object stores: no check)."""
        local = self._local_root()
        if local is None:
            return
        probe = os.path.join(local, f".streamwire-write-check-{os.getpid()}")
        try:
            os.makedirs(local, exist_ok=True)
            with open(probe, "wb") as out:
                out.write(b"ok")
            os.remove(probe)
        except OSError as exc:
            raise StoreUnwritable(f"the store {self.root} cannot be written: {exc.strerror or exc}") from None

    def tables(self) -> Iterator[str]:
        """The tables under a local root (none for an object-store root), whatever their names.

        Every directory is searched but a table's own log: a table "a/b" nests in "a", and a
        table named ``_x`` or ``.x`` (accepted by earlier versions) keeps its durable numbers.
        """
        local = self._local_root()
        if local is None or not os.path.isdir(local):
            return
        for dirpath, dirnames, _ in os.walk(local):
            if "_delta_log" in dirnames:
                yield dirpath
            dirnames[:] = [d for d in dirnames if d != "_delta_log"]

    def recorded_durable(self) -> Iterator[dict[str, int]]:
        """The per-origin durable numbers each table under a local root records (what a restart
        makes of them: ``spec.sync.server.recorded_durable``)."""
        for uri in self.tables():
            info = latest_commit_info(Path(uri))
            raw = None if info is None else info.get(META_KEY)
            # The latest commit is almost always the store's own; else the log is replayed to find the last one.
            yield _parsed_state(raw).durable if isinstance(raw, str) else self.read_state(uri).durable

    def _files(self, table: DeltaTable) -> DeltaStorageHandler:
        """The table's directory in whatever object store deltalake reaches it."""
        return DeltaStorageHandler(table.table_uri, self._options(table.table_uri))

    def _read(self, table: DeltaTable, files: Sequence[DataFile]) -> pa.Table:
        """Every row of ``files`` in the table's schema, read file by file (a dataset of the whole
        table costs time in the number of its files; ``_check_writable`` rules out deletion vectors)."""
        schema = pa.schema(table.schema().to_arrow())
        filesystem = pa_fs.PyFileSystem(DeltaStorageHandler(table.table_uri, self._options(table.table_uri)))
        parts = [conformed(pq.read_table(f.path, filesystem=filesystem), schema) for f in files]
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def write(
        self, uri: str, changes: Sequence[SquashedChange], marks: Mapping[str, int], durable: Mapping[str, int],
        columns: Sequence[str] | None = None,
    ) -> FileChanges:
        """Apply ``changes`` (in order) to the table in one commit carrying the sync metadata; a truncating
        change (the truncate extension) removes every file first, and what came before it is not applied.
        ``columns``: the table's columns in the order the spec's fit gives them (None: the table's own, then
        those the changes bring in order of appearance)."""
        truncated, changes = after_last_truncate(changes)
        table = self._open(uri)
        if table is not None:
            self._add_columns(table, changes, columns)
        if table is None:
            if not changes:
                return FileChanges()
            dvs = self.settings.deletion_vectors and local_dir(uri) is not None
            table = self._loaded[uri] = DeltaTable.create(
                uri, pa.schema(list(_columns_of(changes, columns).values())), storage_options=self._options(uri),
                configuration={ENABLE_PROPERTY: "true"} if dvs else None)
        pk_names = tuple(changes[0].schema.pk_names) if changes else self._state(table).keys
        state = TableState(dict(marks), dict(durable), pk_names)
        props = self.commit_properties(state)
        cluster = pk_names[0] if changes else ""
        values = _cluster_values(changes, pa.schema(table.schema().to_arrow()).field(cluster).type) if changes else None
        by_dvs = self._by_dvs(table)
        if values is None or len(values) == 0 or not by_dvs:
            self._dvs.read_back(table)  # deltalake reads the files or commits
        commit = _Commit(table, self._files(table))
        if values is None or (len(values) == 0 and not truncated):
            return commit.commit(props)
        _check_writable(table, by_dvs)
        if by_dvs:
            return self._write_by_dvs(table, changes, values, state, truncated)
        files = data_files(pa.table(table.get_add_actions(flatten=True)), cluster)
        commit.removes = files if truncated else touched_files(files, values.to_pylist())
        rows = self._read(table, [] if truncated else commit.removes)
        # Rows sharing a cluster value with an affected key (exactly the affected rows for a
        # one-column key) go through apply_squashed; the rest of the touched files stay as they are.
        mask = pc.is_in(rows.column(cluster), value_set=values)
        affected = rows.filter(mask)
        for change in merge_changes(changes):
            affected = apply_squashed(affected, change.batch, change.schema)
        result = pa.concat_tables([rows.filter(pc.invert(mask)), affected])
        order = key_order(result, pk_names)
        removed = {f.path for f in commit.removes}
        untouched = [f for f in files if f.path not in removed]
        for start, end in cut(result.column(cluster).take(order).to_pylist(), untouched, self.settings.target_file_rows):
            commit.add_rows(result, order.slice(start, end - start), self.settings.row_groups)
        return commit.commit(props)

    def _add_columns(self, table: DeltaTable, changes: Sequence[SquashedChange], columns: Sequence[str] | None) -> None:
        """Add the value columns ``changes`` bring that the table lacks (a put may: ``check_table_fit``), in the
        order ``columns`` gives, in a commit of their own before the changes', carrying the table's sync state as
        it is; UnstorableColumn if ``columns`` does not keep the table's own first, in order (Delta only appends)."""
        names = pa.schema(table.schema().to_arrow()).names
        known = [c for c in columns or () if c in names]
        if columns is not None and (list(columns)[:len(known)] != known or known != [n for n in names if n in known]):
            raise UnstorableColumn(f"the table's columns {names} cannot be ordered as {list(columns)}: "
                                   "a Delta table only gains columns after its own")
        added = {name: f for name, f in _columns_of(changes, columns).items() if name not in names}
        if not added:
            return
        self._dvs.read_back(table)
        fields = list(DeltaSchema.from_arrow(pa.schema([f.with_nullable(True) for f in added.values()])).fields)
        table.alter.add_columns(fields, commit_properties=self.commit_properties(self._state(table)))
        table.update_incremental()
        log.info("added columns %s to %s", ", ".join(added), table.table_uri)

    def _write_by_dvs(self, table: DeltaTable, changes: Sequence[SquashedChange], values: pa.Array,
                      state: TableState, truncated: bool) -> FileChanges:
        """``write`` by deletion vectors (``reference.sync.dv_writer``)."""
        if not dv_commit.enabled(table):
            # These commits record the table's current sync state: the changes are not in it yet.
            self._dvs.read_back(table)
            dv_commit.enable(table, self.commit_properties(self._state(table)))
        try:
            adds, rows, dvs = self._dvs.flush(table, self._files(table), changes, values,
                                              self.commit_metadata(state), self.settings.target_file_rows, truncated)
        except Exception:
            self._dvs.forget(table)  # the index may hold what the failed commit did not write
            raise
        self._states[table.table_uri] = (dvs.version, state)
        self._checkpoint_on_interval(table, dvs.version)
        return FileChanges(files_added=len(adds), rows_added=rows, bytes_added=sum(a.size for a in adds) + dvs.dv_bytes,
                           rows_deleted=dvs.rows_deleted, dv_bytes=dvs.dv_bytes)

    @staticmethod
    def _checkpoint_on_interval(table: DeltaTable, version: int) -> None:
        """Checkpoint every ``delta.checkpointInterval`` versions, as deltalake does after its own commits
        (the store's DV commits bypass it), so loading the log stays bounded between maintenance rounds.
        ``version`` has landed: a checkpoint that fails is logged and left to maintenance."""
        interval = int(table.metadata().configuration.get(CHECKPOINT_INTERVAL_PROPERTY) or DEFAULT_CHECKPOINT_INTERVAL)
        if version % interval == 0:
            try:
                table.update_incremental()
                table.create_checkpoint()
            except Exception:
                log.exception("checkpoint of %s at version %d failed", table.table_uri, version)

    def maintain(self, uri: str) -> MaintenanceReport:
        """Compact, vacuum and checkpoint one table (the caller keeps writers of it out meanwhile)."""
        table = self._open(uri)
        if table is None:
            return MaintenanceReport()
        self._dvs.read_back(table)
        state = self._state(table)
        props = self.commit_properties(state)
        compaction = FileChanges()
        by_dvs = self._by_dvs(table)
        if state.keys and by_dvs:
            _check_writable(table, by_dvs)
            try:
                removed, adds, rows = self._dvs.compact(
                    table, self._files(table), state.keys, self.commit_metadata(state),
                    self.settings.target_file_rows, self.settings.dv_purge_fraction)
            except Exception:
                self._dvs.forget(table)
                raise
            compaction = FileChanges(
                files_removed=len(removed), files_added=len(adds), rows_removed=sum(f.rows for f in removed),
                rows_added=rows, bytes_removed=sum(f.size for f in removed), bytes_added=sum(a.size for a in adds))
            table.update_incremental()
        elif state.keys:
            _check_writable(table, by_dvs)
            files = data_files(pa.table(table.get_add_actions(flatten=True)), state.keys[0])
            groups = compaction_groups(files, self.settings.target_file_rows)
            if groups:
                commit = _Commit(table, self._files(table))
                for group in groups:
                    rows = self._read(table, group)
                    order = key_order(rows, state.keys)
                    for start, end in cut(rows.column(state.keys[0]).take(order).to_pylist(), [],
                                          self.settings.target_file_rows):
                        commit.add_rows(rows, order.slice(start, end - start), self.settings.row_groups)
                    commit.removes.extend(group)
                compaction = commit.commit(props)
                table.update_incremental()  # so that the vacuum sees the files just removed
        # Lite vacuum, of removed files only: a full one deletes every file the table does not
        # reference, which includes a table nested in its directory (table "a/b" inside "a").
        vacuum_args: dict[str, Any] = {
            "retention_hours": self.settings.vacuum_retention_hours, "enforce_retention_duration": False, "full": False,
        }
        # Tombstones stay listed after their files are gone; vacuum (a commit) only when a file is left.
        expired = self._files(table).get_file_info(table.vacuum(dry_run=True, **vacuum_args))
        vacuumed = sum(1 for info in expired if info.type != pa_fs.FileType.NotFound)
        if vacuumed:
            table.vacuum(dry_run=False, commit_properties=props, **vacuum_args)
        if by_dvs:
            vacuumed += self._dvs.vacuum(table, self.settings.vacuum_retention_hours)
        checkpoint = None
        if table.version() > self._checkpoint_version(table):
            table.create_checkpoint()
            table.cleanup_metadata()
            checkpoint = table.version()
        return MaintenanceReport(compaction, vacuumed, checkpoint)

    def _checkpoint_version(self, table: DeltaTable) -> int:
        """The version of the log's last checkpoint (-1 without one)."""
        try:
            pointer = self._files(table).open_input_file("_delta_log/_last_checkpoint")
            return int(json.loads(pointer.read(pointer.size()))["version"])
        except FileNotFoundError:
            return -1

    def read_table(self, uri: str) -> pa.Table:
        """The whole table, deletion vectors applied (for readers and checks)."""
        return read_delta(uri, self._options(uri))


def read_delta(uri: str, storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """Every live row of a Delta table in its Arrow schema.

    deltalake's pyarrow dataset refuses tables with deletion vectors; its DataFusion reader
    applies them, so this reads through that (and casts its view types back to the schema).
    """
    table = DeltaTable(uri, storage_options=dict(storage_options) if storage_options else None)
    schema = pa.schema(table.schema().to_arrow())
    names = ", ".join('"' + n.replace('"', '""') + '"' for n in schema.names)
    rows = pa.table(QueryBuilder().register("t", table).execute(f"select {names} from t").read_all())
    # One chunk per column: DataFusion's batches include empty ones, on which Spark's
    # createDataFrame loses rows.
    return rows.cast(schema).combine_chunks() if rows.num_rows else schema.empty_table()
