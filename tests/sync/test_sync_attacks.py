"""The five reproductions of issue 11 and more attacks, against an in-process server.

Each test asserts the error a client gets, what the tables hold, the numbers the
server reports, and that other clients carry on.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from conformance.sync.suite import DESCS, _cmd, do_put, rows_batch
from reference.sync.client import SyncClient, SyncPut
from reference.sync.transport import INTERNAL_ERROR_TEXT
from reference.sync.store import DeltaStore
from spec.http2_watch import ACK, DATA, END_STREAM, HEADERS, RST_STREAM, SETTINGS
from spec.sync.flight import DO_PUT_PATH, FlightDataMessage, FlightDescriptorMessage
from spec.sync.flush_failures import FlushFailures
from spec.sync.messages import (
    COMMAND_TYPE_URL,
    ColumnDescriptor,
    ColumnRole,
    StorageLocation,
    SyncCommand,
    decode_response,
)
from tests.sync.conftest import ServerFactory, clock_of, flush_pending, raw_put

OLD, NEW, VALUE = int(ColumnRole.OLD_PK), int(ColumnRole.NEW_PK), int(ColumnRole.VALUE)


def _rows(store: Path, table: str) -> list[tuple[int, str]]:
    rows = DeltaStore(str(store)).read_table(str(store / table)).to_pylist()
    return sorted((r["id"], r["v"]) for r in rows)


def _numbers(location: str, origin: str) -> tuple[int | None, int | None]:
    out = raw_put(location, _cmd("", origin, None, ()))
    assert out.response is not None, out.error
    return out.response.memory_sequence_number, out.response.durable_sequence_number


# -- 1. a put cut off mid-stream is not committed; its replay lands in full ----------------
_KILLED_CLIENT = """
import os, signal, sys
import pyarrow as pa, pyarrow.flight as flight
from conformance.sync.suite import _cmd, rows_batch
location, stage = sys.argv[1], sys.argv[2]
c = flight.FlightClient(location)
batch = rows_batch([(None, 1, "a"), (None, 2, "b")])
writer, reader = c.do_put(flight.FlightDescriptor.for_command(_cmd("t", "A", 1).to_descriptor_cmd()), batch.schema)
if stage != "after-descriptor":
    writer.write_table(batch)
if stage == "after-all-batches":
    writer.write_table(rows_batch([(None, 3, "c")]))
if stage == "after-done-writing":
    writer.write_table(rows_batch([(None, 3, "c")]))
    writer.done_writing()
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("stage", ["after-descriptor", "after-first-batch", "after-all-batches", "after-done-writing"])
def test_client_killed_mid_put_leaves_no_trace_and_its_replay_lands_in_full(
    server_factory: ServerFactory, tmp_path: Path, stage: str
) -> None:
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    child = subprocess.run([sys.executable, "-c", _KILLED_CLIENT, location, stage], timeout=120)
    assert child.returncode == -9
    memory, durable = _numbers(location, "A")
    if stage == "after-done-writing":
        # The stream was complete: the server may have taken it whole before the client died.
        assert (memory, durable) in ((None, None), (1, None))
    else:
        assert (memory, durable) == (None, None)
        assert server.stats()["in_memory_bytes"] == 0 and server.stats()["open_transactions"] == 0
    # The client restarts from its own log and sends the whole transaction again.
    client = SyncClient(location, "A", deadline_s=30)
    put = SyncPut("t", rows_batch([(None, 1, "a"), (None, 2, "b"), (None, 3, "c")]), DESCS)
    assert client.send_transaction(1, [put]).memory_sequence_number == 1
    assert flush_pending(server)
    client.close()
    assert _numbers(location, "A") == (1, 1)
    assert _rows(tmp_path / "store", "t") == [(1, "a"), (2, "b"), (3, "c")]


END_HEADERS = 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _raw_put(port: int, cmd: SyncCommand, table: pa.Table, end: str) -> socket.socket:
    """A DoPut in raw HTTP/2 frames carrying every message of ``table``, ended by ``end``: END_STREAM
    (``half-close``), RST_STREAM CANCEL (``rst-stream``) or a TCP reset (``tcp-reset``)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(SETTINGS, 0, 0, b""))
    settings = sock.recv(9, socket.MSG_WAITALL)  # the server's, acknowledged below
    sock.recv(int.from_bytes(settings[:3], "big"), socket.MSG_WAITALL)
    headers = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", DO_PUT_PATH.encode()),
               (b":authority", b"127.0.0.1"), (b"content-type", b"application/grpc"), (b"te", b"trailers")]
    block = b"".join(b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v for n, v in headers)  # literals, not indexed
    schema = pa.ipc.read_message(table.schema.serialize())
    first: Any = FlightDataMessage(data_header=schema.metadata.to_pybytes())
    first.flight_descriptor.CopyFrom(FlightDescriptorMessage(type=2, cmd=cmd.to_descriptor_cmd()))
    messages = [first.SerializeToString()]
    for batch in table.to_batches():
        ipc = pa.ipc.read_message(batch.serialize())
        messages.append(FlightDataMessage(data_header=ipc.metadata.to_pybytes(),
                                          data_body=ipc.body.to_pybytes()).SerializeToString())
    out = _frame(SETTINGS, ACK, 0, b"") + _frame(HEADERS, END_HEADERS, 1, block)
    out += b"".join(_frame(DATA, 0, 1, b"\x00" + len(m).to_bytes(4, "big") + m) for m in messages)
    if end == "half-close":
        out += _frame(DATA, END_STREAM, 1, b"")
    elif end == "rst-stream":
        out += _frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big"))
    sock.sendall(out)
    if end == "tcp-reset":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    return sock


@pytest.mark.parametrize("end", ["rst-stream", "tcp-reset"])
def test_a_stream_broken_after_its_last_message_is_not_applied_and_its_replay_lands_in_full(
    server_factory: ServerFactory, tmp_path: Path, end: str
) -> None:
    """Issue 37: every message of a put arrived, then the stream broke instead of ending (END_STREAM): grpc
    ends the request iterator as for a half-close, the put must still count as cut off."""
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    with _raw_put(server.port, _cmd("t", "A", 1), rows_batch([(None, 1, "a"), (None, 2, "x")]), end):
        pass
    client = SyncClient(location, "A", deadline_s=30)
    put = SyncPut("t", rows_batch([(None, 1, "a"), (None, 2, "b"), (None, 3, "c")]), DESCS)
    assert client.send_transaction(1, [put]).memory_sequence_number == 1
    assert flush_pending(server)
    client.close()
    assert _rows(tmp_path / "store", "t") == [(1, "a"), (2, "b"), (3, "c")]


def test_the_raw_put_lands_when_its_stream_ends(server_factory: ServerFactory) -> None:
    """The raw client above is a valid put: ended with END_STREAM, it is applied."""
    server = server_factory()
    with _raw_put(server.port, _cmd("t", "A", 1), rows_batch([(None, 1, "a")]), "half-close") as sock:
        while True:  # up to the answer's message (DATA on the stream), sent once the put is recorded
            header = sock.recv(9, socket.MSG_WAITALL)
            assert len(header) == 9, "the server closed the connection before answering"
            sock.recv(int.from_bytes(header[:3], "big"), socket.MSG_WAITALL)
            if header[3] == DATA and header[5:9] == b"\x00\x00\x00\x01":
                break
    assert _numbers(f"grpc://127.0.0.1:{server.port}", "A") == (1, None)


def test_a_put_whose_deadline_expires_mid_stream_is_dropped(server_factory: ServerFactory) -> None:
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    payload = _cmd("t", "A", 1).to_descriptor_cmd()
    out = do_put(location, payload, [rows_batch([(None, 1, "a")])], timeout=0.5, done=False)
    assert isinstance(out.error, flight.FlightTimedOutError)
    assert _numbers(location, "A") == (None, None)
    assert server.stats()["open_transactions"] == 0 and server.stats()["in_memory_bytes"] == 0


# -- 2. a put that does not fit its table is refused; failing storage is isolated -----------
def test_a_put_with_other_column_types_is_refused_and_others_stay_durable(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory(max_replication_lag_s=0)
    location = f"grpc://127.0.0.1:{server.port}"
    assert raw_put(location, _cmd("t1", "A", 1), [rows_batch([(None, 1, "a")])]).response is not None
    bad = pa.table({"old_id": pa.array([None], pa.int64()), "new_id": pa.array([2], pa.int64()),
                    "v": pa.array([7], pa.int64())})
    out = raw_put(location, _cmd("t1", "A", 2), [bad])
    assert isinstance(out.error, pa.ArrowInvalid)
    assert "Put does not match table t1: column v is long in the put but string in the table" in str(out.error)
    other_keys = (ColumnDescriptor(role=OLD, name="v"), ColumnDescriptor(role=NEW, name="v"),
                  ColumnDescriptor(role=VALUE, name="id"))
    keyed_by_v = pa.table({"old_v": pa.array([None], pa.string()), "new_v": pa.array(["x"]), "id": pa.array([5])})
    out = raw_put(location, _cmd("t1", "A", 2, other_keys), [keyed_by_v])
    assert isinstance(out.error, pa.ArrowInvalid) and "key columns ['v'] differ from the table's ['id']" in str(out.error)
    assert _numbers(location, "A") == (1, 1)
    # Another origin on another table, and origin A again, carry on.
    assert raw_put(location, _cmd("t2", "B", 1), [rows_batch([(None, 9, "z")])]).response is not None
    assert raw_put(location, _cmd("t1", "A", 2), [rows_batch([(None, 2, "b")])]).response is not None
    assert _numbers(location, "A") == (2, 2) and _numbers(location, "B") == (1, 1)
    assert _rows(tmp_path / "store", "t1") == [(1, "a"), (2, "b")]
    assert server.stats()["failing_tables"] == {}


def test_a_put_that_does_not_fit_pending_items_of_a_new_table_is_refused(server_factory: ServerFactory) -> None:
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    assert raw_put(location, _cmd("new", "A", 1), [rows_batch([(None, 1, "a")])]).response is not None
    bad = rows_batch([(None, 2, "b")]).set_column(2, "v", pa.array([1.5]))
    out = raw_put(location, _cmd("new", "A", 2), [bad])
    assert isinstance(out.error, pa.ArrowInvalid) and "column v is double in the put but string" in str(out.error)
    assert server.stats()["open_transactions"] == 1 and _numbers(location, "A") == (1, None)


def test_a_column_delta_cannot_store_is_refused_before_it_is_queued(server_factory: ServerFactory) -> None:
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    batch = rows_batch([(None, 1, "a")]).set_column(2, "v", pa.array([1.0], pa.float16()))
    out = raw_put(location, _cmd("h", "A", 1), [batch])
    assert isinstance(out.error, pa.ArrowInvalid)
    assert "column 'v' has type halffloat, which a Delta table cannot store" in str(out.error)
    assert server.stats()["open_transactions"] == 0


def test_a_table_that_cannot_be_written_is_retried_while_others_flush(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    server = server_factory()  # on a manual clock: the broken table's retry is due only when the test says so
    location = f"grpc://127.0.0.1:{server.port}"
    assert raw_put(location, _cmd("broken", "A", 1), [rows_batch([(None, 1, "a")])]).response is not None
    store.mkdir(exist_ok=True)
    (store / "broken").write_text("a file where the table's directory should be")
    assert flush_pending(server) is False
    assert server.stats()["failing_tables"] == {str(store / "broken"): 1}
    # Puts keep their true answers; healthy tables keep flushing while the broken one waits.
    out = raw_put(location, _cmd("good", "B", 7), [rows_batch([(None, 2, "b")])])
    assert out.response is not None and out.response.accepted
    assert (out.response.memory_sequence_number, out.response.durable_sequence_number) == (7, None)
    assert flush_pending(server) is True
    assert _rows(store, "good") == [(2, "b")]
    # Issue 24, reproduction 4: B's flushed transaction is durable at once; durability is per
    # origin, so A's table that cannot be written holds back only A.
    assert _numbers(location, "B") == (7, 7) and _numbers(location, "A") == (1, None)
    # A's next transaction on a healthy table is written but waits for A's first.
    assert raw_put(location, _cmd("good", "A", 2), [rows_batch([(None, 3, "c")])]).response is not None
    assert flush_pending(server) is True
    assert _rows(store, "good") == [(2, "b"), (3, "c")] and _numbers(location, "A") == (2, None)
    # Issue 24, reproduction 8: once the cause is gone the server retries on its own, with no
    # put and no flush call, as soon as the table's wait is over, and the numbers catch up.
    (store / "broken").unlink()
    clock_of(server).advance(FlushFailures().max_backoff_s)  # the longest wait between retries
    assert _numbers(location, "A") == (2, 2), "the failed table was not retried once its wait was over"
    assert _numbers(location, "B") == (7, 7)
    assert _rows(store, "broken") == [(1, "a")]
    assert server.stats()["failing_tables"] == {}


# -- 3. confinement ---------------------------------------------------------------------------
@pytest.mark.parametrize("path, reason", [
    ("../../escape", "'..' segments are not allowed"),
    ("a/../../b", "'..' segments are not allowed"),
    ("/tmp/abs", "absolute paths are not allowed"),
    ("file:///tmp/abs", "absolute paths are not allowed"),
    ("", "the table path is empty"),
    ("/", "absolute paths are not allowed"),
    ("./", "the table path is empty"),
    ("a\x00b", "control characters are not allowed"),
    ("a\nb", "control characters are not allowed"),
    ("a\\..\\b", "backslashes are not allowed"),
])
def test_table_paths_outside_the_store_are_refused(
    server_factory: ServerFactory, tmp_path: Path, path: str, reason: str
) -> None:
    server = server_factory(store=tmp_path / "deep" / "store")
    location = f"grpc://127.0.0.1:{server.port}"
    out = raw_put(location, _cmd(path, "A", 1), [rows_batch([(None, 1, "a")])])
    assert isinstance(out.error, pa.ArrowInvalid) and reason in str(out.error)
    assert flush_pending(server) is False
    assert list(tmp_path.iterdir()) == [], "nothing may be written anywhere"


def test_a_client_storage_location_needs_the_allow_list(server_factory: ServerFactory, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    server = server_factory(allowed_locations=[str(allowed)], max_replication_lag_s=0)
    location = f"grpc://127.0.0.1:{server.port}"
    for elsewhere in (str(tmp_path / "elsewhere"), str(allowed) + "-sibling", f"{allowed}/../elsewhere"):
        cmd = SyncCommand(path="t", origin="A", column_descriptors=DESCS, sequence_number=1,
                          store=StorageLocation(location=elsewhere))
        out = raw_put(location, cmd, [rows_batch([(None, 1, "a")])])
        assert isinstance(out.error, flight.FlightUnauthorizedError), out
        assert "is not allowed on this server" in str(out.error)
    cmd = SyncCommand(path="t", origin="A", column_descriptors=DESCS, sequence_number=1,
                      store=StorageLocation(location=str(allowed / "lake")))
    assert raw_put(location, cmd, [rows_batch([(None, 1, "a")])]).response is not None
    assert _rows(allowed / "lake", "t") == [(1, "a")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allowed"]


def test_without_an_allow_list_every_storage_location_is_refused(server_factory: ServerFactory, tmp_path: Path) -> None:
    server = server_factory()
    cmd = SyncCommand(path="t", origin="A", column_descriptors=DESCS, sequence_number=1,
                      store=StorageLocation(location=str(tmp_path / "store")))
    out = raw_put(f"grpc://127.0.0.1:{server.port}", cmd, [rows_batch([(None, 1, "a")])])
    assert isinstance(out.error, flight.FlightUnauthorizedError)


# -- 4. sequence numbers ----------------------------------------------------------------------
def test_a_lower_sequence_number_is_refused_until_durable_then_acknowledged_without_applying(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    assert raw_put(location, _cmd("t", "O", 100), [rows_batch([(None, 1, "a")])]).response is not None
    out = raw_put(location, _cmd("t", "O", 5), [rows_batch([(None, 2, "lost?")])])
    assert isinstance(out.error, pa.ArrowInvalid)
    assert ("Sequence number 5 for origin O does not follow the last received transaction (100) "
            "and is not a replay of a durable one (durable: None)") in str(out.error)
    assert _numbers(location, "O") == (100, None) and server.stats()["open_transactions"] == 1
    assert flush_pending(server)
    replay = raw_put(location, _cmd("t", "O", 5), [rows_batch([(None, 2, "replayed")])])
    assert replay.response is not None
    assert (replay.response.memory_sequence_number, replay.response.durable_sequence_number) == (100, 100)
    assert server.stats()["in_memory_bytes"] == 0
    assert _numbers(location, "O") == (100, 100)
    assert _rows(tmp_path / "store", "t") == [(1, "a")]


def test_concurrent_writers_on_one_origin_lose_no_recorded_row(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    """Two writers share origin O with interleaved numbers.  The server tells them apart only by
    number: a put above memory is recorded (answer memory == its number) and lands; one at or
    below durable is taken for a replay (answer memory > its number, not applied); one in
    between is refused.  No recorded row is lost and no refused or replayed row appears."""
    server = server_factory(max_syncs_per_url=5)
    location = f"grpc://127.0.0.1:{server.port}"
    outcome: dict[int, str] = {}
    lock = threading.Lock()

    def writer(parity: int) -> None:
        for seq in range(1 + parity, 60, 2):
            out = raw_put(location, _cmd("t", "O", seq), [rows_batch([(None, seq, f"w{parity}")])])
            if out.response is None:
                assert "does not follow the last received transaction" in str(out.error), out.error
                kind = "refused"
            else:
                assert out.response.accepted and out.response.memory_sequence_number is not None
                kind = "recorded" if out.response.memory_sequence_number == seq else "replay"
                assert out.response.memory_sequence_number >= seq
                if kind == "replay":
                    assert (out.response.durable_sequence_number or -1) >= seq
            with lock:
                outcome[seq] = kind

    threads = [threading.Thread(target=writer, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    while flush_pending(server):
        pass
    stored = {k for k, _ in _rows(tmp_path / "store", "t")}
    assert {s for s, kind in outcome.items() if kind == "recorded"} == stored
    assert _numbers(location, "O") == (max(stored), max(stored))


# -- 5. limits and clean errors ----------------------------------------------------------------
def test_a_put_above_the_high_watermark_is_refused_and_nothing_is_kept(server_factory: ServerFactory) -> None:
    big = rows_batch([(None, i, "x" * 100) for i in range(2000)])
    server = server_factory(max_in_memory_bytes=10 * big.nbytes, high_watermark_bytes=int(1.5 * big.nbytes))
    location = f"grpc://127.0.0.1:{server.port}"
    out = raw_put(location, _cmd("t", "A", 1), [big, big])
    assert isinstance(out.error, pa.ArrowInvalid) and "exceeds the server's limit" in str(out.error)
    assert server.stats()["in_memory_bytes"] == 0 and _numbers(location, "A") == (None, None)
    assert raw_put(location, _cmd("t", "A", 1), [big]).response is not None
    # Pending data plus this put would pass the watermark: not accepted for now, nothing kept.
    out = raw_put(location, _cmd("t", "A", 2), [big])
    assert out.response is not None and not out.response.accepted
    assert _numbers(location, "A") == (1, None) and server.stats()["open_transactions"] == 1
    assert flush_pending(server)
    out = raw_put(location, _cmd("t", "A", 2), [big])
    assert out.response is not None and out.response.accepted and out.response.memory_sequence_number == 2


def test_a_compressed_put_is_held_to_the_watermark_by_its_decoded_size(server_factory: ServerFactory) -> None:
    """Arrow IPC bodies may be compressed: the bytes read are few, the changes they decode to are not.
    What the put would add to pending memory counts, so it waits (accepted=false) and nothing is kept."""
    batch = rows_batch([(None, i, "x" * 1000) for i in range(1000)])  # 1 MB decoded, a few KiB compressed
    server = server_factory(max_in_memory_bytes=10 * batch.nbytes, high_watermark_bytes=batch.nbytes // 2)
    client = flight.FlightClient(f"grpc://127.0.0.1:{server.port}")
    try:
        options = flight.FlightCallOptions(timeout=60, write_options=pa.ipc.IpcWriteOptions(compression="zstd"))
        writer, reader = client.do_put(flight.FlightDescriptor.for_command(_cmd("t", "A", 1).to_descriptor_cmd()),
                                       batch.schema, options=options)
        writer.write_table(batch)
        writer.done_writing()
        answer = reader.read()
        writer.close()
    finally:
        client.close()
    assert answer is not None and not decode_response(answer.to_pybytes()).accepted
    assert server.stats()["in_memory_bytes"] == 0 and server.stats()["open_transactions"] == 0


def test_a_message_above_the_message_limit_is_refused(server_factory: ServerFactory) -> None:
    server = server_factory(max_message_bytes=1000)
    out = raw_put(f"grpc://127.0.0.1:{server.port}", _cmd("t", "A", 1), [rows_batch([(None, i, "x" * 50) for i in range(100)])])
    assert isinstance(out.error, pa.ArrowInvalid) and "A message of" in str(out.error)
    assert server.stats()["in_memory_bytes"] == 0


def test_internal_errors_reach_the_client_as_one_line_without_paths(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory()
    log_dir = tmp_path / "store" / "corrupt" / "_delta_log"
    log_dir.mkdir(parents=True)
    (log_dir / "00000000000000000000.json").write_text("not json\n")
    out = raw_put(f"grpc://127.0.0.1:{server.port}", _cmd("corrupt", "A", 1), [rows_batch([(None, 1, "a")])])
    assert isinstance(out.error, flight.FlightInternalError)
    text = str(out.error)
    assert INTERNAL_ERROR_TEXT in text and str(tmp_path) not in text and "Traceback" not in text


# -- more: garbage, nulls ------------------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    b"\xff\x00garbage",
    any_pb2.Any(type_url="Other", value=b"").SerializeToString(),
    any_pb2.Any(type_url=COMMAND_TYPE_URL, value=b"\x0a\xff\xff\xff\xff\x0f").SerializeToString(),
    any_pb2.Any(type_url=COMMAND_TYPE_URL, value=b"\x1a\x02\x08\x07").SerializeToString(),
], ids=["not-an-any", "other-type", "bad-length", "unknown-role"])
def test_garbage_commands_are_invalid_argument_and_the_server_carries_on(
    server_factory: ServerFactory, raw: bytes
) -> None:
    server = server_factory()
    location = f"grpc://127.0.0.1:{server.port}"
    out = raw_put(location, raw, [rows_batch([(None, 1, "a")])])
    assert isinstance(out.error, pa.ArrowInvalid), out
    assert raw_put(location, _cmd("t", "A", 1), [rows_batch([(None, 1, "a")])]).response is not None


def test_null_keys(server_factory: ServerFactory, tmp_path: Path) -> None:
    server = server_factory(max_replication_lag_s=0)
    location = f"grpc://127.0.0.1:{server.port}"
    out = raw_put(location, _cmd("t", "A", 1), [rows_batch([(None, 1, "a"), (None, None, "temp"), (None, 2, "b")])])
    assert out.response is not None
    assert raw_put(location, _cmd("t", "A", 2), [rows_batch([(2, None, None)])]).response is not None
    assert _rows(tmp_path / "store", "t") == [(1, "a")]
    descs = (ColumnDescriptor(role=OLD, name="a"), ColumnDescriptor(role=OLD, name="b"), ColumnDescriptor(role=NEW,
                                                                                                          name="a"),
             ColumnDescriptor(role=NEW, name="b"), ColumnDescriptor(role=VALUE, name="v"))
    partly = pa.table({"oa": pa.array([None, None], pa.int64()), "ob": pa.array([None, None], pa.int64()),
                       "na": pa.array([1, 2], pa.int64()), "nb": pa.array([1, None], pa.int64()), "v": ["x", "y"]})
    out = raw_put(location, _cmd("c", "A", 3, descs), [partly])
    assert isinstance(out.error, pa.ArrowInvalid) and "Row 1 has a partly null new key" in str(out.error)
    assert _numbers(location, "A") == (2, 2) and server.stats()["open_transactions"] == 0
