"""Deletion-vector vectors: current, well-formed, and read the same by independent readers.

The layouts in ``spec.delta.deletion_vectors`` make the bytes; pyroaring (CRoaring) must read
them as the same positions, and deltalake (delta-rs), given a table whose data files carry these
DVs inline or in DV files, must return exactly the rows the DVs leave.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pyroaring
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.delta import vectorgen
from conformance.delta.vector_suite import check_vectors, load_vectors, positions_of
from spec.delta.deletion_vectors import (
    MAGIC_NUMBER,
    ROARING_BITMAP_ARRAY,
    DeletionVectorDescriptor,
    decode_positions,
    encode_positions,
)

TABLE_ROWS = 70_001
"""Rows of the data file the deltalake checks delete from: every position below 2^32 the vectors use."""


def _valid(kind: str) -> list[dict[str, Any]]:
    return [t for g in load_vectors()["testGroups"] if g["type"] == kind for t in g["tests"] if t["result"] == "valid"]


def test_committed_vectors_are_the_generators_and_match_their_schema() -> None:
    assert vectorgen.main(["--check"]) == 0, "run python -m conformance.delta.vectorgen"
    schema = json.loads((vectorgen.VECTOR_DIR / vectorgen.SCHEMA_NAME).read_text())
    jsonschema.validate(load_vectors(), schema)


def test_every_vector_passes_against_the_spec_layouts() -> None:
    results = list(check_vectors("reference"))
    assert {r.group for r in results} == {"delta/RoaringBitmapArray", "delta/DeletionVectorFile",
                                          "delta/DeletionVectorDescriptor", "delta/Z85"}
    assert [r for r in results if not r.passed] == []


def test_pyroaring_reads_every_valid_bitmap_vector_as_its_positions() -> None:
    for t in _valid("RoaringBitmapArray"):
        data = bytes.fromhex(t["hex"])
        assert struct.unpack_from("<I", data)[0] == MAGIC_NUMBER
        assert list(pyroaring.BitMap64.deserialize(data[4:])) == positions_of(t["positions"]), t["tcId"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, (1 << 34) - 1) | st.integers(0, 70_000), max_size=300) | st.sets(st.integers(0, 9000), min_size=4000, max_size=5000).map(sorted), st.booleans())
def test_our_bytes_and_croarings_read_the_same_both_ways(positions: list[int], runs: bool) -> None:
    ours = encode_positions(positions)
    assert bytes(ROARING_BITMAP_ARRAY.build(ROARING_BITMAP_ARRAY.parse(ours))) == ours  # the fast path is the layout
    assert list(pyroaring.BitMap64.deserialize(ours[4:])) == sorted(set(positions))
    theirs = pyroaring.BitMap64(positions)
    if runs:
        theirs.run_optimize()
    assert decode_positions(MAGIC_NUMBER.to_bytes(4, "little") + theirs.serialize()).tolist() == sorted(set(positions))


def _table_with_files(path: Path, files: int) -> list[dict[str, Any]]:
    """A DV-enabled table of ``files`` data files of TABLE_ROWS ids each; their add actions."""
    for i in range(files):
        rows = pa.table({"id": pa.array(range(i * TABLE_ROWS, (i + 1) * TABLE_ROWS), pa.int64())})
        write_deltalake(str(path), rows, mode="append", configuration={"delta.enableDeletionVectors": "true"})
    adds: list[dict[str, Any]] = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    return sorted(adds, key=lambda a: a["min.id"])


def _commit_dvs(path: Path, adds: list[dict[str, Any]], dvs: list[DeletionVectorDescriptor]) -> None:
    """Re-add each data file with its DV in the next log version, as Delta's own DELETE does."""
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": now, "operation": "DELETE"}}]
    for add, dv in zip(adds, dvs):
        stats = json.dumps({"numRecords": add["num_records"], "tightBounds": False})
        common = {"path": add["path"], "partitionValues": {}, "size": add["size_bytes"], "dataChange": True}
        actions.append({"remove": {**common, "deletionTimestamp": now, "extendedFileMetadata": True}})
        actions.append({"add": {**common, "modificationTime": now, "stats": stats, "deletionVector": dv.to_json()}})
    version = DeltaTable(str(path)).version() + 1
    (path / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _ids(path: Path) -> list[int]:
    rows = QueryBuilder().register("t", DeltaTable(str(path))).execute("select id from t order by id").read_all()
    ids: list[int] = pa.table(rows).column("id").to_pylist()
    return ids


def test_deltalake_returns_exactly_the_rows_each_bitmap_vector_leaves(tmp_path: Path) -> None:
    cases = [t for t in _valid("RoaringBitmapArray") if all(p < TABLE_ROWS for p in positions_of(t["positions"]))]
    assert len(cases) >= 8
    for t in cases:
        data, deleted = bytes.fromhex(t["hex"]), set(positions_of(t["positions"]))
        for storage in ("i", "u"):
            table = tmp_path / f"t{t['tcId']}{storage}"
            adds = _table_with_files(table, 1)
            if storage == "i":
                dv = DeletionVectorDescriptor.inline(data, len(deleted))
            else:
                file_id = uuid.uuid4()
                (table / f"deletion_vector_{file_id}.bin").write_bytes(
                    b"\x01" + len(data).to_bytes(4, "big") + data + zlib.crc32(data).to_bytes(4, "big"))
                dv = DeletionVectorDescriptor.in_file(file_id, 1, len(data), len(deleted))
            _commit_dvs(table, adds, [dv])
            assert _ids(table) == [i for i in range(TABLE_ROWS) if i not in deleted], (t["tcId"], storage)


def test_deltalake_reads_each_dv_of_a_dv_file_vector_at_its_offset(tmp_path: Path) -> None:
    for t in _valid("DeletionVectorFile"):
        table = tmp_path / f"t{t['tcId']}"
        dvs = [positions_of(d) for d in t["dvs"]]
        adds = _table_with_files(table, len(dvs))
        file_id = uuid.uuid4()
        (table / f"deletion_vector_{file_id}.bin").write_bytes(bytes.fromhex(t["hex"]))
        descriptors = [DeletionVectorDescriptor.in_file(file_id, offset, len(encode_positions(d)), len(d))
                       for offset, d in zip(t["offsets"], dvs)]
        _commit_dvs(table, adds, descriptors)
        deleted = {i * TABLE_ROWS + p for i, d in enumerate(dvs) for p in d}
        assert _ids(table) == [i for i in range(len(dvs) * TABLE_ROWS) if i not in deleted], t["tcId"]
