"""The ``seafowl-sync`` sink from a user's streaming query: exactly once through a SIGKILL of the
sync server and of the query, each restarted (the query rides the server's outage out; restarted
from its checkpoint it replays what it had not committed and the server skips what is already
durable), a batch as one transaction (empty partitions and batches are
normal), and its options checked before anything runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from reference.spark.sync_datasource import (PartitionChanges, SinkOptionError, SinkOptions, commit_batch,
                                             partition_changes)

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 900.0
FILES, ROWS_PER_FILE, STEP = 8, 20, 5

QUERY = textwrap.dedent("""
    import sys, time
    repo, source, checkpoint, location, mode = sys.argv[1:]
    sys.path.insert(0, repo)
    from pyspark.sql import SparkSession
    from reference.spark.sync_datasource import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    changes = spark.readStream.schema("id long, v string").option("maxFilesPerTrigger", 1).json(source)
    query = (changes.writeStream.format("seafowl-sync").option("location", location).option("table", "t")
             .option("keys", "id").option("checkpointLocation", checkpoint).start())
    if mode == "finish":
        query.processAllAvailable()
        print("DONE", flush=True)
        query.stop()
        spark.stop()
    else:
        seen = None
        while True:
            progress = query.lastProgress
            if progress and progress["batchId"] != seen:
                seen = progress["batchId"]
                print("BATCH", seen, flush=True)
            time.sleep(0.05)
""")


def write_source(directory: Path) -> dict[int, str]:
    """Files that overwrite each other's keys (only the last value of a key may remain); returns the
    table the source describes."""
    directory.mkdir()
    empty = directory / "part-empty.json"  # batch 0 has no rows (as a rate source's first batch)
    empty.write_text("")
    os.utime(empty, (1_699_999_999, 1_699_999_999))
    expected: dict[int, str] = {}
    for f in range(FILES):
        rows = [{"id": f * STEP + i, "v": f"file{f}-{f * STEP + i}"} for i in range(ROWS_PER_FILE)]
        path = directory / f"part-{f:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source reads them in this order
        expected.update({r["id"]: r["v"] for r in rows})
    return expected


def serve(store: Path, port: int, log: Path) -> subprocess.Popen[str]:
    """The documented server command on ``port``: a restart comes back at the same address."""
    with open(log, "a") as errors:
        server = subprocess.Popen([sys.executable, "-m", "reference.sync", "serve", "--store", str(store), "--port",
                                   str(port), "--max-replication-lag-s", "0.2", "--flush-task-interval-s", "0.1"],
                                  stdout=subprocess.PIPE, stderr=errors, text=True, cwd=REPO,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
    assert server.stdout is not None
    assert server.stdout.readline().startswith("LISTENING "), log.read_text()[-3000:]
    return server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.spark
def test_the_server_and_the_query_killed_mid_stream_and_restarted_write_each_batch_once(tmp_path: Path) -> None:
    """SIGKILL of the sync server after a batch: the batch in flight was at most in the server's
    memory, which the kill loses, and the query rides the outage out (its client retries and
    replays within deadlineSeconds) on the restarted server. Then SIGKILL of the query after a
    batch committed there, and a restart from its checkpoint: it replays what it had not committed
    and the server skips what is already durable. Every batch lands once, in order."""
    from reference.sync.client import SyncClient
    from reference.sync.store import read_delta

    expected = write_source(tmp_path / "source")
    script = tmp_path / "query.py"
    script.write_text(QUERY)
    port = free_port()
    location = f"grpc://127.0.0.1:{port}"
    server = serve(tmp_path / "store", port, tmp_path / "server.log")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH")}
    argv = [sys.executable, str(script), str(REPO), str(tmp_path / "source"), str(tmp_path / "checkpoint"), location]
    try:
        first = subprocess.Popen(argv + ["kill-me"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 env=env, cwd=tmp_path)
        assert first.stdout is not None
        server_killed_after, batch = None, -1
        deadline = time.monotonic() + HANG_GUARD_S
        for line in first.stdout:
            batch = int(line.split()[1])
            if server_killed_after is None and batch >= 1:
                server_killed_after = batch
                server.kill()
                server.wait(60)
                server = serve(tmp_path / "store", port, tmp_path / "server.log")
            elif server_killed_after is not None and batch > server_killed_after or time.monotonic() > deadline:
                break  # a batch committed on the restarted server
        first.send_signal(signal.SIGKILL)  # mid-stream: later batches are running or about to
        first.wait(60)
        assert server_killed_after is not None and server_killed_after < batch < FILES, (server_killed_after, batch)
        partial = read_delta(str(tmp_path / "store" / "t")).num_rows
        assert 0 < partial < len(expected)

        second = subprocess.run(argv + ["finish"], capture_output=True, text=True, env=env, cwd=tmp_path,
                                timeout=HANG_GUARD_S)
        assert second.returncode == 0 and "DONE" in second.stdout, second.stderr[-3000:]
        table = read_delta(str(tmp_path / "store" / "t"))
        assert table.num_rows == len(expected)  # no key twice
        assert dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist())) == expected
        origin = json.loads((tmp_path / "checkpoint" / "metadata").read_text())["id"]
        probe = SyncClient(location, origin).probe()  # one transaction per batch, the last one durable
        assert (probe.memory_sequence_number, probe.durable_sequence_number) == (FILES, FILES)
    finally:
        server.kill()
        server.wait(60)


def test_options_name_what_is_missing_or_malformed() -> None:
    with pytest.raises(SinkOptionError, match="needs option 'location'"):
        SinkOptions.parse({"table": "t"}, ["id", "v"])
    with pytest.raises(SinkOptionError, match=r"lacks: \['key'\]"):
        SinkOptions.parse({"location": "grpc://h:1", "table": "t", "keys": "key"}, ["id", "v"])
    with pytest.raises(SinkOptionError, match="sequence must be an integer, got 'x'"):
        SinkOptions.parse({"location": "grpc://h:1", "table": "t", "sequence": "x"}, ["id", "v"])
    options = SinkOptions.parse({"location": "grpc://h:1", "table": "t", "deleteColumn": "gone", "token": "s3cret"},
                                ["id", "v", "gone"])
    assert (options.keys, options.values, options.wait_durable, options.security.token) == (("id",), ("v",), True,
                                                                                            "s3cret")


def test_rows_become_upserts_and_deletes_of_their_keys() -> None:
    import pyarrow as pa

    options = SinkOptions.parse({"location": "grpc://h:1", "table": "t", "deleteColumn": "gone"}, ["id", "v", "gone"])
    batch = options.changes(pa.table({"id": [1, 2], "v": ["a", "b"], "gone": [None, True]}))
    assert batch.to_pydict() == {"old_id": [1, 2], "new_id": [1, None], "value_v": ["a", "b"]}
    assert [(d.role, d.name) for d in options.descriptors] == [(0, "id"), (1, "id"), (3, "v")]


def test_timestamps_in_a_session_time_zone_become_utc_instants() -> None:
    import datetime as dt

    import pyarrow as pa

    options = SinkOptions.parse({"location": "grpc://h:1", "table": "t"}, ["id", "at"])
    when = dt.datetime(2026, 11, 23, 7, 0, tzinfo=dt.timezone.utc)
    batch = options.changes(pa.table({"id": [1], "at": pa.array([when], pa.timestamp("us", "Etc/UTC"))}))
    assert batch.schema.field("value_at").type == pa.timestamp("us", "UTC")
    assert batch.column("value_at").to_pylist() == [when]


@pytest.fixture
def sync_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An in-process sync server flushing every change at once (lag 0), and its store."""
    import threading

    from reference.sync.server import SyncServer
    from reference.sync.store import DeltaStore
    from spec.sync.writer import SyncSettings

    server = SyncServer(DeltaStore(str(tmp_path / "store")),
                        settings=SyncSettings(max_replication_lag_s=0, flush_task_interval_s=0.05))
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        yield f"grpc://127.0.0.1:{server.port}", tmp_path / "store"
    finally:
        server.shutdown()


def _partition(options: SinkOptions, rows: dict[str, list[object]]) -> PartitionChanges:
    import pyarrow as pa

    table = pa.table(rows)
    return partition_changes(options, "query-1", iter(table.to_batches()))


def _table(store: Path) -> dict[int, str]:
    from reference.sync.store import read_delta

    rows = read_delta(str(store / "t")).to_pydict()
    return dict(zip(rows["id"], rows["v"]))


def test_empty_partitions_and_empty_batches_are_normal(sync_server: tuple[str, Path]) -> None:
    location, store = sync_server
    options = SinkOptions.parse({"location": location, "table": "t"}, ["id", "v"])
    empty = partition_changes(options, "query-1", iter(()))
    assert (empty.rows, empty.changes) == (0, b"")
    assert commit_batch(options, 0, [empty, empty]) == 0  # batch 0 of a rate source: no rows at all
    assert not (store / "t").exists()
    assert commit_batch(options, 1, [empty, _partition(options, {"id": [1], "v": ["a"]})]) == 1
    assert _table(store) == {1: "a"}


def test_a_batch_lands_as_one_transaction_keyed_by_its_batch_id(sync_server: tuple[str, Path]) -> None:
    from reference.sync.client import SyncClient

    location, store = sync_server
    options = SinkOptions.parse({"location": location, "table": "t"}, ["id", "v"])
    batch = [_partition(options, {"id": [1, 2], "v": ["a", "b"]}), _partition(options, {"id": [3], "v": ["c"]})]
    assert commit_batch(options, 5, batch) == 3
    assert _table(store) == {1: "a", 2: "b", 3: "c"}
    probe = SyncClient(location, "query-1").probe()  # one origin, one transaction: the batch id
    assert (probe.memory_sequence_number, probe.durable_sequence_number) == (5, 5)
    replay = [_partition(options, {"id": [1], "v": ["changed"]})]
    commit_batch(options, 5, replay)  # a restarted query replays batch 5: the table already holds it
    assert _table(store) == {1: "a", 2: "b", 3: "c"}
    commit_batch(options, 6, replay)
    assert _table(store) == {1: "changed", 2: "b", 3: "c"}


def test_a_batch_the_server_does_not_flush_times_out_naming_what_waited(tmp_path: Path) -> None:
    import threading

    from reference.sync.server import SyncServer
    from reference.sync.store import DeltaStore

    server = SyncServer(DeltaStore(str(tmp_path / "store")))  # Seafowl's defaults: a lag of 600 s
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        options = SinkOptions.parse({"location": f"grpc://127.0.0.1:{server.port}", "table": "t",
                                     "deadlineSeconds": "0"}, ["id", "v"])
        with pytest.raises(TimeoutError, match=r"transaction 3 of origin query-1 not durable after 0 s: the server "
                                               r"holds it in memory \(memory 3, durable None\).*--max-replication-lag-s"):
            commit_batch(options, 3, [_partition(options, {"id": [1], "v": ["a"]})])
    finally:
        server.shutdown()
