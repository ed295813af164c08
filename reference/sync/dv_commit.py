"""A commit by deletion vectors: changed rows are marked deleted in their files, new rows go to new files.

Each file that loses rows is re-added with a DV holding every position it has lost so far
(Delta's rule: the DV of a logical file is complete, not a delta), all of this commit's DVs in
one DV file; the file's old logical form (path and old DV) is removed.  Nothing else is
rewritten.  deltalake's transaction API has no ``deletionVector`` field (a remove without it
leaves the DV'd file live), so these commits are written with ``reference.sync.delta_log``;
compaction of files that carry DVs goes through here too.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyroaring
from deltalake import CommitProperties, DeltaTable, TableFeatures
from deltalake.transaction import AddAction

from reference.sync.delta_log import commit_timestamp, write_commit, write_file
from reference.sync.row_index import FileInfo, Positions, RowIndex
from spec.delta.deletion_vectors import (
    ENABLE_PROPERTY,
    FEATURE,
    MAGIC_NUMBER,
    DeletionVectorDescriptor,
    dv_file,
)
from spec.sync.commit_time import commit_timestamp_ms

MAGIC = MAGIC_NUMBER.to_bytes(4, "little")


def enabled(table: DeltaTable) -> bool:
    """Whether the table supports DVs and asks writers to write them."""
    protocol = table.protocol()
    supported = FEATURE in (protocol.reader_features or ()) and FEATURE in (protocol.writer_features or ())
    return supported and table.metadata().configuration.get(ENABLE_PROPERTY) == "true"


def enable(table: DeltaTable, props: CommitProperties) -> None:
    """Add the ``deletionVectors`` feature (reader 3, writer 7) and set ``delta.enableDeletionVectors``."""
    protocol = table.protocol()
    if FEATURE not in (protocol.reader_features or ()) or FEATURE not in (protocol.writer_features or ()):
        table.alter.add_feature(TableFeatures.DeletionVectors, allow_protocol_versions_increase=True,
                                commit_properties=props)
    if table.metadata().configuration.get(ENABLE_PROPERTY) != "true":
        table.alter.set_table_properties({ENABLE_PROPERTY: "true"}, commit_properties=props)


def _bound(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.date) else value


def dv_bytes(positions: pyroaring.BitMap64) -> bytes:
    """The RoaringBitmapArray bytes of ``positions`` (``ROARING_BITMAP_ARRAY``), made by CRoaring.

    pyroaring's portable serialisation is the format's bitmap part; the tests hold its bytes to
    the spec's layout both ways (``tests/sync/test_delta_dv_vectors.py``).  It is about 50 times
    faster than the spec's NumPy encoder, and a flush encodes one DV per file it touches.
    """
    return MAGIC + positions.serialize()


def descriptor_json(dv: DeletionVectorDescriptor | None) -> str:
    """``dv`` as the log writes it ("" for None)."""
    return "" if dv is None else json.dumps(dv.to_json(), separators=(",", ":"))


def in_file_json(dv: DeletionVectorDescriptor) -> str:
    """``descriptor_json`` of a ``u`` DV with an offset, formatted directly (a flush writes one per file it
    touches; Z85 text needs no JSON escapes)."""
    return (f'{{"storageType":"u","pathOrInlineDv":"{dv.path_or_inline_dv}","offset":{dv.offset},'
            f'"sizeInBytes":{dv.size_in_bytes},"cardinality":{dv.cardinality}}}')


def widened(stats: str) -> str:
    """A new file's ``stats`` JSON as a re-add with a DV states them (``tightBounds`` false)."""
    doc = json.loads(stats)
    doc["tightBounds"] = False
    return json.dumps(doc, separators=(",", ":"))


def file_info(path: str, size: int, modification_time: int, stats: str) -> FileInfo:
    """The JSON heads of a file's re-add and remove (each flush that touches the file repeats them)."""
    add = {"path": path, "partitionValues": {}, "size": size, "modificationTime": modification_time,
           "dataChange": True, "stats": stats}
    remove = {"path": path, "partitionValues": {}, "size": size, "dataChange": True, "extendedFileMetadata": True}
    return FileInfo(json.dumps({"add": add}, separators=(",", ":"))[:-2] + ',"deletionVector":',
                    json.dumps({"remove": remove}, separators=(",", ":"))[:-2] + ',"deletionTimestamp":')


def live_file_info(add: Mapping[str, Any]) -> FileInfo:
    """``file_info`` of a live file (a row of ``get_add_actions(flatten=True)``)."""
    return file_info(add["path"], add["size_bytes"], add["modification_time"], wide_stats(add))


def wide_stats(add: Mapping[str, Any]) -> str:
    """The stats of a re-added file (a row of ``get_add_actions(flatten=True)``), marked as wide bounds.

    ``numRecords`` stays the file's physical row count, as the protocol requires with a DV;
    min/max are kept for integer, string and date values (the types the store's own stats have).
    """
    stats: dict[str, Any] = {"numRecords": add["num_records"], "minValues": {}, "maxValues": {}, "nullCount": {}}
    for key, value in add.items():
        kind, _, column = key.partition(".")
        if value is None or not column or kind not in ("min", "max", "null_count"):
            continue
        if kind == "null_count":
            stats["nullCount"][column] = value
        elif isinstance(value, (int, str, datetime.date)) and not isinstance(value, (bool, datetime.datetime)):
            stats["minValues" if kind == "min" else "maxValues"][column] = _bound(value)
    stats["tightBounds"] = False
    return json.dumps(stats, separators=(",", ":"))


@dataclass(frozen=True)
class DvChanges:
    """What a commit by deletion vectors did, beside the files it added and removed."""

    rows_deleted: int = 0
    """Rows newly marked deleted in DVs."""
    dv_files: int = 0
    dv_bytes: int = 0
    version: int = -1
    """The log version the commit created."""


@dataclass
class DvCommit:
    """One commit being assembled against ``version`` of a local table."""

    table_dir: Path
    version: int
    index: RowIndex
    marked: dict[str, Positions] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    added: list[tuple[AddAction, pa.Array | pa.ChunkedArray]] = field(default_factory=list)

    def mark(self, path: str, positions: Positions) -> None:
        """Delete rows ``positions`` (live ones) of file ``path``."""
        self.marked[path] = np.union1d(self.marked[path], positions) if path in self.marked else positions

    def remove(self, path: str) -> None:
        """Remove file ``path`` (and its DV) from the table."""
        self.removed.append(path)

    def add(self, action: AddAction, cluster: pa.Array | pa.ChunkedArray) -> None:
        """Add a data file already written, with its cluster column (for the index)."""
        self.added.append((action, cluster))

    def commit(self, meta: Mapping[str, str], operation: str) -> DvChanges:
        """Write the DV file and create the next log version; then bring the index up to it."""
        now = commit_timestamp_ms(int(time.time() * 1000), commit_timestamp(self.table_dir, self.version))
        dvs = {path: self.index.deleted_with(path, new) for path, new in self.marked.items()}
        bitmaps = [dv_bytes(p) for p in dvs.values()]
        file_id = uuid.uuid4()
        data, offsets = dv_file(bitmaps) if bitmaps else (b"", [])
        if bitmaps:
            write_file(self.table_dir, f"deletion_vector_{file_id}.bin", data)
        name = DeletionVectorDescriptor.in_file(file_id, 0, 0, 0).path_or_inline_dv  # Z85 once per commit
        descriptors = {path: DeletionVectorDescriptor("u", name, len(bitmap), len(dvs[path]), offset)
                       for (path, bitmap), offset in zip(zip(dvs, bitmaps), offsets)}
        texts = {path: in_file_json(dv) for path, dv in descriptors.items()}
        actions: list[dict[str, Any] | str] = [{"commitInfo": {
            "timestamp": now, "operation": operation, "operationParameters": {}, "isBlindAppend": False, **meta,
        }}]
        for path in [*self.marked, *self.removed]:
            old = self.index.dv_json(path)
            tail = f',"deletionVector":{old}' if old else ""
            actions.append(f"{self.index.info(path).remove_head}{now}{tail}}}}}")
        for path, text in texts.items():
            actions.append(f"{self.index.info(path).add_head}{text}}}}}")
        for action, _ in self.added:
            actions.append({"add": {"path": action.path, "partitionValues": {}, "size": action.size,
                                    "modificationTime": action.modification_time, "dataChange": True,
                                    "stats": action.stats}})
        write_commit(self.table_dir, self.version + 1, actions, now)
        for path, dv in descriptors.items():
            self.index.mark_deleted(path, self.marked[path], dvs[path], dv, texts[path])
        for path in self.removed:
            self.index.remove_file(path)
        for action, cluster in self.added:
            info = file_info(action.path, action.size, action.modification_time, widened(action.stats))
            self.index.add_file(action.path, cluster, np.array([], np.int64), None, "", info)
        self.index.version = self.version + 1
        return DvChanges(sum(len(p) for p in self.marked.values()), 1 if bitmaps else 0, len(data), self.version + 1)
