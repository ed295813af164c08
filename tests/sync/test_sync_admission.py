"""Issue 24's reproductions 4-7 and 9 against an in-process server: what cannot be flushed is refused
at put time, in one line, and every other origin carries on; durable numbers survive a restart
whatever the table's name; a silent origin's open transaction does not hold the others."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conformance.sync.suite import DESCS, _cmd, rows_batch
from reference.sync.client import SyncClient, SyncPut
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore, UnstorableColumn, storable_shape
from spec.sync.admission import PutLimits, PutSlots, PutStream
from spec.sync.errors import StreamDeadlineExceeded
from spec.sync.messages import ColumnDescriptor, ColumnRole, SyncCommand
from spec.sync.squash import SquashedChange
from spec.sync.schema import SyncSchema
from tests.sync.conftest import ServerFactory, clock_of, flush_pending, raw_put

OLD, NEW, VALUE = int(ColumnRole.OLD_PK), int(ColumnRole.NEW_PK), int(ColumnRole.VALUE)


def _numbers(location: str, origin: str) -> tuple[int | None, int | None]:
    out = raw_put(location, _cmd("", origin, None, ()))
    assert out.response is not None, out.error
    return out.response.memory_sequence_number, out.response.durable_sequence_number


def _others_carry_on(server: SyncServer, tmp_path: Path) -> None:
    """Another origin's put lands and becomes durable: nothing refused was queued ahead of it."""
    assert raw_put(server.location, _cmd("other", "B", 1), [rows_batch([(None, 1, "b")])]).response is not None
    assert flush_pending(server) and not flush_pending(server)
    assert _numbers(server.location, "B") == (1, 1)
    assert server.stats()["failing_tables"] == {}
    rows = DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "other")).to_pylist()
    assert rows == [{"id": 1, "v": "b"}]


@pytest.mark.parametrize("path", [
    "x" * 10_000, "a/" + "b" * 300, " ", "%00", "t/_delta_log", "%2e%2e/%2e%2e/victim", "_x", ".x", "a/.b",
], ids=["10KB", "300B-segment", "space", "percent-00", "delta-log", "encoded-dotdot", "underscore", "dot", "dot-seg"])
def test_a_name_no_store_keeps_as_is_is_refused_at_put_time(
    server_factory: ServerFactory, tmp_path: Path, path: str
) -> None:
    server = server_factory()
    (tmp_path / "victim" / "_delta_log").mkdir(parents=True)  # what %2e%2e/%2e%2e/victim reached
    out = raw_put(server.location, _cmd(path, "A", 1), [rows_batch([(None, 1, "a")])])
    assert isinstance(out.error, pa.ArrowInvalid) and "Invalid table path" in out.error_text, out
    assert "\n" not in out.error_text and len(out.error_text) < 1000
    assert server.stats()["in_memory_bytes"] == 0 and _numbers(server.location, "A") == (None, None)
    _others_carry_on(server, tmp_path)


def _put_of(columns: dict[str, pa.Array], descriptors: list[tuple[int, str]]) -> tuple[SyncCommand, pa.Table]:
    cmd = SyncCommand(path="t", origin="A", sequence_number=1,
                      column_descriptors=tuple(ColumnDescriptor(role=r, name=n) for r, n in descriptors))
    return cmd, pa.table(columns)


_KEYS = {"old_id": pa.array([None], pa.int64()), "new_id": pa.array([1], pa.int64())}
_KEY_DESCS = [(OLD, "id"), (NEW, "id")]
UNSTORABLE: dict[str, tuple[dict[str, Any], list[tuple[int, str]]]] = {
    "v-and-V": ({**_KEYS, "v": pa.array(["a"]), "V": pa.array(["b"])}, [*_KEY_DESCS, (VALUE, "v"), (VALUE, "V")]),
    "exact-duplicate": ({**_KEYS, "v": pa.array(["a"]), "v2": pa.array(["b"])}, [*_KEY_DESCS, (VALUE, "v"), (VALUE, "v")]),
    "value-named-like-the-key": ({**_KEYS, "v": pa.array(["a"])}, [*_KEY_DESCS, (VALUE, "id")]),
    "list-value": ({**_KEYS, "v": pa.array([[1, 2]])}, [*_KEY_DESCS, (VALUE, "v")]),
    "map-value": ({**_KEYS, "v": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}, [*_KEY_DESCS, (VALUE, "v")]),
    "null-value": ({**_KEYS, "v": pa.nulls(1)}, [*_KEY_DESCS, (VALUE, "v")]),
    "list-key": ({"old_id": pa.array([None], pa.list_(pa.int64())), "new_id": pa.array([[1]]), "v": pa.array(["a"])},
                 [*_KEY_DESCS, (VALUE, "v")]),
    "uint64-max": ({**_KEYS, "v": pa.array([2**64 - 1], pa.uint64())}, [*_KEY_DESCS, (VALUE, "v")]),
    "nan-key": ({"old_id": pa.array([None], pa.float64()), "new_id": pa.array([float("nan")]), "v": pa.array(["a"])},
                [*_KEY_DESCS, (VALUE, "v")]),
    # Issue 37, reproduction 4: names Delta's writer cuts at NUL, and every other control character.
    "nul-values": ({**_KEYS, "a": pa.array([1]), "b": pa.array([2])}, [*_KEY_DESCS, (VALUE, "a\0b"), (VALUE, "a\0c")]),
    "nul-and-cut": ({**_KEYS, "a": pa.array([1]), "b": pa.array([2])}, [*_KEY_DESCS, (VALUE, "a\0b"), (VALUE, "a")]),
    "nul-one-value": ({**_KEYS, "a": pa.array([1])}, [*_KEY_DESCS, (VALUE, "a\0b")]),
    "nul-after-key-name": ({**_KEYS, "a": pa.array([1])}, [*_KEY_DESCS, (VALUE, "id\0")]),
    "nul-in-key": ({**_KEYS, "a": pa.array([1])}, [(OLD, "k\0x"), (NEW, "k\0x"), (VALUE, "v")]),
    "tab": ({**_KEYS, "a": pa.array([1])}, [*_KEY_DESCS, (VALUE, "a\tb")]),
    "del": ({**_KEYS, "a": pa.array([1])}, [*_KEY_DESCS, (VALUE, "a\x7f")]),
    "c1-control": ({**_KEYS, "a": pa.array([1])}, [*_KEY_DESCS, (VALUE, "a\x85")]),
    "empty-name": ({**_KEYS, "a": pa.array([1])}, [*_KEY_DESCS, (VALUE, "")]),
    "struct-value": ({**_KEYS, "s": pa.array([{"a": 1, "b": 2}])}, [*_KEY_DESCS, (VALUE, "s")]),
}
REASONS = {
    "nul-values": "column name 'a\\x00b' holds the control character(s) U+0000",
    "nul-one-value": "column name 'a\\x00b' holds the control character(s) U+0000",
    "nul-in-key": "column name 'k\\x00x' holds the control character(s) U+0000",
    "c1-control": "column name 'a\\x85' holds the control character(s) U+0085",
    "empty-name": "a column name is empty",
    "struct-value": "column 's' has the nested type struct<a: int64, b: int64>",
    "list-value": "column 'v' has the nested type list<item: int64>",
}


@pytest.mark.parametrize("case", sorted(UNSTORABLE))
def test_a_schema_or_value_no_table_can_store_is_refused_before_it_is_queued(
    server_factory: ServerFactory, tmp_path: Path, case: str
) -> None:
    server = server_factory()
    cmd, batch = _put_of(*UNSTORABLE[case])
    out = raw_put(server.location, cmd, [batch])
    assert isinstance(out.error, pa.ArrowInvalid), out
    assert "\n" not in out.error_text  # issue 24, reproduction 9: one line
    assert REASONS.get(case, "") in out.error_text
    assert server.stats()["in_memory_bytes"] == 0 and server.stats()["open_transactions"] == 0
    assert _numbers(server.location, "A") == (None, None)
    _others_carry_on(server, tmp_path)


def test_minus_zero_and_zero_are_one_key(server_factory: ServerFactory, tmp_path: Path) -> None:
    server = server_factory()
    floats = [(OLD, "id"), (NEW, "id"), (VALUE, "v")]
    for seq, key, value in ((1, -0.0, "minus"), (2, 0.0, "plus")):
        cmd, batch = _put_of({"old_id": pa.array([None], pa.float64()), "new_id": pa.array([key]),
                              "v": pa.array([value])}, floats)
        out = raw_put(server.location, SyncCommand(path="f", origin="A", sequence_number=seq,
                                                   column_descriptors=cmd.column_descriptors), [batch])
        assert out.response is not None, out.error
        assert flush_pending(server)
    rows = DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "f")).to_pylist()
    assert rows == [{"id": 0.0, "v": "plus"}]


def test_durable_numbers_survive_a_restart_whatever_the_tables_name(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    """Issue 24, reproduction 6: tables named ``_x`` or ``.x`` (accepted before names were checked)."""
    store = DeltaStore(str(tmp_path / "store"))
    schema = SyncSchema.validate(DESCS, rows_batch([]).schema)
    for name, durable in (("_x", 3), (".y", 5)):
        change = SquashedChange.of_put(schema, [rows_batch([(None, 1, "a")])])
        store.write(store.table_uri(name), [change], {"A": durable}, {"A": durable})
    server = server_factory()
    assert _numbers(server.location, "A") == (5, 5)
    out = raw_put(server.location, _cmd("t", "A", 2), [rows_batch([(None, 2, "b")])])
    assert out.response is not None and out.response.accepted
    assert (out.response.memory_sequence_number, out.response.durable_sequence_number) == (5, 5)  # a replay


def test_a_silent_origin_does_not_hold_the_others_past_the_transaction_timeout(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    """Issue 24, reproduction 7."""
    server = server_factory(transaction_timeout_s=60)
    location = server.location
    assert raw_put(location, _cmd("t", "A", None), [rows_batch([(None, 1, "a")])]).response is not None
    refused = raw_put(location, _cmd("other", "B", 1), [rows_batch([(None, 1, "b")])])
    assert refused.response is None and "without finishing the transaction" in refused.error_text
    clock_of(server).advance(60.0)
    _others_carry_on(server, tmp_path)
    # A's client carries on mid-transaction: told its transaction is gone, in one line.
    out = raw_put(location, _cmd("t", "A", 1), [rows_batch([(None, 2, "c")])])
    assert "was discarded" in out.error_text and _numbers(location, "A") == (None, None)
    # The client replays the whole transaction.
    client = SyncClient(location, "A", deadline_s=30)
    puts = [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS), SyncPut("t", rows_batch([(None, 2, "c")]), DESCS)]
    assert client.send_transaction(1, puts).memory_sequence_number == 1
    client.close()
    assert flush_pending(server)
    assert _numbers(location, "A") == (1, 1)
    rows = DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "t")).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "c")]


def test_a_silent_transaction_is_discarded_by_the_flusher_even_when_no_put_follows(
    server_factory: ServerFactory
) -> None:
    """Its memory is given back at the transaction timeout, not at the next put (which may never come)."""
    server = server_factory(transaction_timeout_s=60)
    assert raw_put(server.location, _cmd("t", "A", None), [rows_batch([(None, 1, "a")])]).response is not None
    assert server.stats()["open_transactions"] == 1
    clock_of(server).advance(59.5)
    assert server.stats()["open_transactions"] == 1  # a tick before its timeout
    clock_of(server).advance(0.5)  # the flusher wakes at the timeout, with no put
    assert server.stats()["open_transactions"] == 0 and server.stats()["in_memory_bytes"] == 0


def test_a_client_told_its_transaction_was_discarded_replays_it(server_factory: ServerFactory, tmp_path: Path) -> None:
    server = server_factory(transaction_timeout_s=60)
    client = SyncClient(server.location, "A", deadline_s=30)
    client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    assert raw_put(server.location, _cmd("s", "A", None), [rows_batch([(None, 9, "stale")])]).response is not None
    clock_of(server).advance(61.0)  # the open transaction (of an earlier run of A that died) times out
    assert flush_pending(server)
    assert client.send_transaction(2, [SyncPut("t", rows_batch([(None, 2, "b")]), DESCS)]).memory_sequence_number == 2
    client.close()
    assert flush_pending(server)
    rows = DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "t")).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "b")]
    assert not (tmp_path / "store" / "s").exists() and server.stats()["open_transactions"] == 0



def test_a_name_delta_would_store_otherwise_is_unstorable() -> None:
    """The store's own check, behind the spec's control-character rule: Delta's writer cuts a name at NUL."""
    descriptors = [ColumnDescriptor(role=r, name=n) for r, n in [*_KEY_DESCS, (VALUE, "a\0b")]]
    schema = SyncSchema.validate(descriptors, pa.schema([("o", pa.int64()), ("n", pa.int64()), ("a", pa.int64())]))
    with pytest.raises(UnstorableColumn, match="would be stored by Delta as 'a'"):
        storable_shape(schema)


def _stream_limits(first_message_s: float, put_s: float) -> PutLimits:
    return PutLimits(max_message_bytes=1 << 20, high_watermark=1 << 20, max_concurrent_puts=1, put_timeout_s=put_s,
                     first_message_timeout_s=first_message_s, max_connections=1, handshake_timeout_s=1.0,
                     idle_timeout_s=1.0, max_streams_per_connection=1)


@pytest.mark.parametrize("first_at", [0.0, 4.0, math.nextafter(5.0, 0.0)])
def test_each_stream_deadline_is_measured_from_its_own_event(first_at: float) -> None:
    """The first message is due first_message_timeout_s after the stream opened (a tick before it still counts);
    from that message on, the put has put_timeout_s: a tick before that instant it runs, at it it ends naming the
    put timeout, whenever the first message came (the fourth blind round's p4-put-timeout-from-stream-open measured
    the put timeout from the opening)."""
    opened, stop = 100.0, math.inf
    silent = PutStream.open(_stream_limits(5.0, 10.0), opened, authorized=True)
    assert silent.ending(math.nextafter(opened + 5.0, 0.0), stop) is None
    ended = silent.ending(opened + 5.0, stop)
    assert isinstance(ended, StreamDeadlineExceeded) and "No message arrived" in str(ended)
    stream = PutStream.open(_stream_limits(5.0, 10.0), opened, authorized=True)
    stream.first_message(opened + first_at, PutSlots(1))
    due = opened + first_at + 10.0
    assert stream.deadline == due
    assert stream.ending(math.nextafter(due, 0.0), stop) is None
    ended = stream.ending(due, stop)
    assert isinstance(ended, StreamDeadlineExceeded) and "The put did not complete" in str(ended)
