"""Nothing acknowledged is altered or dropped on the way to Delta (issue 37): generated schemas (names
with any character, every storable type) and values are put over Flight, flushed and read back.

A put is refused exactly when a column name holds a control character, is empty, or repeats another's
(in any case); every other put is acknowledged, flushes, and reads back as it was sent.
"""

from __future__ import annotations

import itertools
import math
import threading
import unicodedata
from collections.abc import Iterator
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore
from spec.sync.messages import ColumnDescriptor, ColumnRole, SyncCommand
from spec.sync.writer import SyncSettings
from tests.sync.conftest import raw_put

OLD, NEW, VALUE = int(ColumnRole.OLD_PK), int(ColumnRole.NEW_PK), int(ColumnRole.VALUE)


def _signed(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _unsigned(bits: int) -> st.SearchStrategy[int]:
    return st.integers(0, 2 ** (bits - 1) - 1)  # above the signed maximum is refused (Delta has no unsigned types)


VALUES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int8": (pa.int8(), _signed(8)), "int16": (pa.int16(), _signed(16)), "int32": (pa.int32(), _signed(32)),
    "int64": (pa.int64(), _signed(64)), "uint8": (pa.uint8(), _unsigned(8)), "uint16": (pa.uint16(), _unsigned(16)),
    "uint32": (pa.uint32(), _unsigned(32)), "bool": (pa.bool_(), st.booleans()),
    "float32": (pa.float32(), st.floats(width=32)), "float64": (pa.float64(), st.floats()),
    "string": (pa.string(), st.text(max_size=6)), "binary": (pa.binary(), st.binary(max_size=8)),
    "date32": (pa.date32(), st.dates(date(1, 1, 1), date(9999, 12, 31))),
    "timestamp": (pa.timestamp("us", "UTC"), st.datetimes(datetime(1, 1, 2), datetime(9999, 12, 30),
                                                          timezones=st.just(timezone.utc))),
}
KEY_TYPES = ("int32", "int64", "string")
GOOD_NAMES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x3000, blacklist_categories=("Cs", "Cc")),
                     min_size=1, max_size=4)
ODD_NAMES = st.sampled_from(["id", "v", "V", "a\x00b", "a\x00c", "a", "id\x00", "k\x00x", "a\tb", "a\x85", "\x7f",
                             "a\u2028b", "é", " ", "", "a.b", "a,b;{}()=", '"`', ".", ".a", "..", "[0]", "__row"])


@st.composite
def names(draw: st.DrawFn) -> str:
    """Mostly names of any printable characters; one in five from names that broke a store once."""
    return draw(ODD_NAMES if draw(st.integers(0, 4)) == 0 else GOOD_NAMES)


def refused(names: list[str]) -> bool:
    """The rule under test: which sets of table column names cannot be stored as they are."""
    bad = any(not n or any(unicodedata.category(ch) == "Cc" for ch in n) for n in names)
    return bad or len({n.lower() for n in names}) < len(names)


@st.composite
def puts(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[str], list[dict[str, Any]]]:
    """Key and value columns (name, type) and insert rows keyed 0..n-1 (values may be null)."""
    keys = [(draw(names()), draw(st.sampled_from(KEY_TYPES))) for _ in range(draw(st.integers(1, 2)))]
    values = [(draw(names()), draw(st.sampled_from(sorted(VALUES)))) for _ in range(draw(st.integers(0, 3)))]
    rows = []
    for i in range(draw(st.integers(1, 4))):
        row: dict[str, Any] = {f"k{j}": str(i) if kind == "string" else i for j, (_, kind) in enumerate(keys)}
        for j, (_, kind) in enumerate(values):
            row[f"v{j}"] = draw(st.none() | VALUES[kind][1])
        rows.append(row)
    return [*keys, *values], [name for name, _ in keys], rows


def _batch(columns: list[tuple[str, str]], nkeys: int, rows: list[dict[str, Any]]) -> pa.Table:
    arrays: dict[str, pa.Array] = {}
    for j, (_, kind) in enumerate(columns[:nkeys]):
        arrays[f"old_k{j}"] = pa.nulls(len(rows), VALUES[kind][0])
    for j, (_, kind) in enumerate(columns[:nkeys]):
        arrays[f"new_k{j}"] = pa.array([r[f"k{j}"] for r in rows], VALUES[kind][0])
    for j, (_, kind) in enumerate(columns[nkeys:]):
        arrays[f"v{j}"] = pa.array([r[f"v{j}"] for r in rows], VALUES[kind][0])
    return pa.table(arrays)


def _comparable(value: Any) -> Any:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("roundtrip")


_RUNS = itertools.count(1)


@settings(max_examples=60, suppress_health_check=[HealthCheck.data_too_large])
@given(put=puts())
def test_what_is_acknowledged_reads_back_exactly(store_root: Path, put: tuple[list[tuple[str, str]], list[str],
                                                                                 list[dict[str, Any]]]) -> None:
    columns, key_names, rows = put
    nkeys = len(key_names)
    descriptors = ([ColumnDescriptor(role=OLD, name=n) for n, _ in columns[:nkeys]]
                   + [ColumnDescriptor(role=NEW, name=n) for n, _ in columns[:nkeys]]
                   + [ColumnDescriptor(role=VALUE, name=n) for n, _ in columns[nkeys:]])
    server = SyncServer(DeltaStore(str(store_root / f"s{next(_RUNS)}")), settings=SyncSettings(max_replication_lag_s=0),
                        maintenance_interval_s=0)  # each put is flushed before it is answered
    try:
        _put_flush_and_read_back(server, columns, nkeys, descriptors, rows)
    finally:
        server.shutdown()


def _put_flush_and_read_back(server: SyncServer, columns: list[tuple[str, str]], nkeys: int,
                             descriptors: list[ColumnDescriptor], rows: list[dict[str, Any]]) -> None:
    sequence, table = 1, "t"
    out = raw_put(server.location, SyncCommand(path=table, origin="A", sequence_number=sequence,
                                               column_descriptors=tuple(descriptors)), [_batch(columns, nkeys, rows)])
    names = [n for n, _ in columns]
    event("refused" if refused(names) else "stored")
    if refused(names):
        assert out.response is None and isinstance(out.error, pa.ArrowInvalid), out
        assert "\n" not in out.error_text and len(out.error_text) < 1000
        assert server.stats()["in_memory_bytes"] == 0
        return
    assert out.response is not None and out.response.accepted, (names, out.error_text)
    assert len(server.stats()["flush_seconds"]) == 1 and server.stats()["failing_tables"] == {}
    stored = server.store.read_table(server.store.table_uri(table))
    assert stored.schema.names == names
    expected = [{n: _comparable(r[f"k{j}"] if j < nkeys else r[f"v{j - nkeys}"]) for j, n in enumerate(names)}
                for r in rows]
    got = [{n: _comparable(v) for n, v in r.items()} for r in stored.to_pylist()]
    key = names[:nkeys]
    assert sorted(got, key=lambda r: [str(r[k]) for k in key]) == sorted(expected, key=lambda r: [str(r[k]) for k in key])
