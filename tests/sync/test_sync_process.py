"""The sync server as operators run it (``python -m reference.sync serve``): clean errors, a bearer
token and TLS, SIGTERM that drains, a second SIGTERM that does not wait, kill -9 during a flush."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from conformance.framework import CaseOutcome, RunOptions
from conformance.runner import run_case
from conformance.sync.suite import DESCS, SUITE, _cmd, do_put, rows_batch
from reference.sync.credentials import ClientSecurity
from reference.sync.client import SyncClient, SyncPut
from reference.sync.store import DeltaStore

STARTUP_TIMEOUT_S = 60.0


class Served:
    """One server process; ``location`` is where it listens."""

    def __init__(self, store: Path, *args: str, scheme: str = "grpc") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reference.sync", "serve", "--store", str(store), "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        word, port = self.proc.stdout.readline().split()
        assert word == "LISTENING"
        self.location = f"{scheme}://127.0.0.1:{port}"

    def stop(self) -> str:
        """Kill the process if it still runs; its stderr (the log)."""
        if self.proc.poll() is None:
            self.proc.kill()
        if self.proc.stderr is None or self.proc.stderr.closed:
            return ""
        return self.proc.communicate(timeout=STARTUP_TIMEOUT_S)[1]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    started: list[Served] = []

    def start(*args: str, store: Path | None = None, scheme: str = "grpc") -> Served:
        served = Served(store or tmp_path / "store", *args, scheme=scheme)
        started.append(served)
        return served

    yield start
    for s in started:
        s.stop()


def _rows(store: Path, table: str) -> dict[int, str]:
    return {r["id"]: r["v"] for r in DeltaStore(str(store)).read_table(str(store / table)).to_pylist()}


def test_errors_sent_to_clients_carry_no_traceback_and_no_server_path(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    good = [rows_batch([(None, 1, "a")])]
    assert do_put(server.location, _cmd("t", "A", 1).to_descriptor_cmd(), good, timeout=60).response is not None
    bad_types = [pa.table({"old_id": pa.array([None], pa.int64()), "new_id": [2], "v": [3]})]
    log_dir = tmp_path / "store" / "corrupt" / "_delta_log"
    log_dir.mkdir(parents=True)
    (log_dir / "00000000000000000000.json").write_text("not json\n")
    outcomes = {
        "escape": do_put(server.location, _cmd("../escape", "A", 2).to_descriptor_cmd(), good, timeout=60),
        "types": do_put(server.location, _cmd("t", "A", 2).to_descriptor_cmd(), bad_types, timeout=60),
        "garbage": do_put(server.location, b"\xff\xfe", good, timeout=60),
        "internal": do_put(server.location, _cmd("corrupt", "A", 2).to_descriptor_cmd(), good, timeout=60),
    }
    for name, out in outcomes.items():
        text = str(out.error)
        assert out.error is not None, name
        assert "Traceback" not in text and str(tmp_path) not in text and "reference/sync" not in text, (name, text)
    assert isinstance(outcomes["types"].error, pa.ArrowInvalid)
    assert "Put does not match table t: column v is long in the put but string in the table" in str(outcomes["types"].error)
    assert isinstance(outcomes["internal"].error, flight.FlightInternalError)
    log = server.stop()
    assert "put failed\nTraceback (most recent call last):" in log, "the log keeps the details"


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=120,
    )
    return cert, key


def test_token_and_tls(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cert, key = _self_signed(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    server = serve("--token-file", str(token_file), "--tls-cert", str(cert), "--tls-key", str(key),
                   "--max-replication-lag-s", "0", scheme="grpc+tls")
    put = SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)
    for security in (ClientSecurity(ca_file=str(cert)), ClientSecurity(token="wrong", ca_file=str(cert))):
        client = SyncClient(server.location, "A", deadline_s=5, security=security)
        with pytest.raises(flight.FlightUnauthenticatedError, match="A valid bearer token is required"):
            client.send_transaction(1, [put])
        client.close()
    plain = do_put(server.location.replace("grpc+tls", "grpc"), _cmd("t", "A", None, ()).to_descriptor_cmd(), [],
                   timeout=5, security=ClientSecurity(token="s3cret-token"))
    assert plain.error is not None and plain.response is None
    client = SyncClient(server.location, "A", deadline_s=60, security=ClientSecurity("s3cret-token", str(cert)))
    response = client.send_transaction(1, [put])
    client.close()
    assert (response.memory_sequence_number, response.durable_sequence_number) == (1, 1)
    assert _rows(tmp_path / "store", "t") == {1: "a"}
    target = f"{server.location}?token_file={token_file}&ca_file={cert}"
    options = RunOptions(suite="sync", target=target, timeout=60)
    with SUITE.open_target(options) as t:
        reports = [run_case(case, t, options) for case in SUITE.cases if not case.requires]
    assert reports and {r.case.id: r.outcome for r in reports if r.outcome is not CaseOutcome.PASS} == {}


def test_sigterm_drains_pending_data_then_exits(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    server = serve("--max-replication-lag-s", "600")
    client = SyncClient(server.location, "A", deadline_s=60)
    for seq in range(1, 4):
        client.send_transaction(seq, [SyncPut("t", rows_batch([(None, seq, str(seq))]), DESCS),
                                      SyncPut("u", rows_batch([(None, seq, str(seq))]), DESCS)])
    assert client.probe().durable_sequence_number is None
    client.close()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=STARTUP_TIMEOUT_S) == 0
    assert _rows(store, "t") == _rows(store, "u") == {1: "1", 2: "2", 3: "3"}
    again = serve()
    client = SyncClient(again.location, "A", deadline_s=60)
    assert client.probe().durable_sequence_number == 3
    client.close()


def test_a_second_sigterm_exits_without_waiting_for_the_drain(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve("--max-replication-lag-s", "600")
    rows = 400_000
    big = pa.table({"old_id": pa.nulls(rows, pa.int64()), "new_id": pa.array(range(rows), pa.int64()),
                    "v": pa.array(["x"] * rows)})
    out = do_put(server.location, _cmd("big", "A", 1).to_descriptor_cmd(), [big], timeout=120)
    assert out.response is not None and out.response.durable_sequence_number is None
    server.proc.send_signal(signal.SIGTERM)  # starts flushing 400k rows
    threading.Event().wait(0.3)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=STARTUP_TIMEOUT_S) == 130


def test_kill_9_during_a_flush_loses_nothing(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    holder: dict[str, Served] = {"server": serve("--max-syncs-per-url", "1")}
    ready = threading.Event()
    ready.set()

    def location() -> str:
        assert ready.wait(STARTUP_TIMEOUT_S)
        return holder["server"].location

    client = SyncClient(location, "A", deadline_s=120, backoff_initial_s=0.01, backoff_max_s=0.2)
    want: dict[int, str] = {}
    rows = 50_000
    for seq in range(1, 4):
        batch = pa.table({"old_id": pa.nulls(rows, pa.int64()),
                          "new_id": pa.array(range(seq * rows, (seq + 1) * rows), pa.int64()),
                          "v": pa.array([str(seq)] * rows)})
        want.update({k: str(seq) for k in range(seq * rows, (seq + 1) * rows)})
        if seq == 2:
            def crash() -> None:
                ready.clear()
                holder["server"].proc.kill()  # while the put is in flight; every put flushes inside it
                holder["server"].stop()
                holder["server"] = serve("--max-syncs-per-url", "1")
                ready.set()
            timer = threading.Timer(0.5, crash)
            timer.start()
            client.send_transaction(seq, [SyncPut("t", batch, DESCS)])
            timer.join(STARTUP_TIMEOUT_S)
        else:
            client.send_transaction(seq, [SyncPut("t", batch, DESCS)])
    final = client.probe()
    client.close()
    assert client.restarts_seen >= 1
    assert final.durable_sequence_number == 3
    stored = _rows(store, "t")
    assert len(stored) == len(want) and stored == want


def _stalled_put(location: str) -> tuple[flight.FlightClient, object]:
    """A client holding a DoPut open that never ends it (and the call's writer, to keep it open);
    returns once the server has seen the call."""
    client = flight.FlightClient(location)
    batch = rows_batch([(None, 99, "stalled")])
    writer, _ = client.do_put(flight.FlightDescriptor.for_command(_cmd("s", "S", 1).to_descriptor_cmd()),
                              batch.schema, options=flight.FlightCallOptions(timeout=120))
    writer.write_table(batch)
    # A probe on the same connection travels behind the stalled call's frames: once it is
    # answered, the server holds the stalled call open.
    probe_writer, probe_reader = client.do_put(
        flight.FlightDescriptor.for_command(_cmd("", "S", None, ()).to_descriptor_cmd()), pa.schema([]),
        options=flight.FlightCallOptions(timeout=60))
    probe_writer.done_writing()
    assert probe_reader.read() is not None
    probe_writer.close()
    return client, writer


def test_sigterm_drains_while_a_stream_is_stalled(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 24, reproduction 3: the stalled put ends at the put timeout, nothing of it kept; the rest is flushed."""
    store = tmp_path / "store"
    server = serve("--put-timeout-s", "3", "--max-replication-lag-s", "600")
    client = SyncClient(server.location, "A", deadline_s=60)
    client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    client.close()
    stalled, _call = _stalled_put(server.location)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=STARTUP_TIMEOUT_S) == 0
    stalled.close()
    assert _rows(store, "t") == {1: "a"}
    assert not (store / "s").exists()
    log = server.stop()
    assert "a put ran past its deadline and was ended" in log
    assert "Traceback" not in log and "never retrieved" not in log, log


def test_a_second_sigterm_exits_at_once_while_a_stream_is_stalled(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve("--put-timeout-s", "300")
    stalled, _call = _stalled_put(server.location)
    server.proc.send_signal(signal.SIGTERM)  # the drain waits for the stalled put (up to 300 s)
    with pytest.raises(subprocess.TimeoutExpired):
        server.proc.wait(timeout=1)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=STARTUP_TIMEOUT_S) == 130, server.stop()
    stalled.close()


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("case", [
    "store-under-a-file", "store-in-proc", "port-abc", "port-taken", "negative-memory", "zero-put-timeout",
    "nan-lag",
])
def test_start_up_errors_are_one_line_and_exit_2_before_listening(
    tmp_path: Path, taken_port: int, case: str
) -> None:
    """Issue 24, reproduction 10."""
    (tmp_path / "file").write_text("not a directory")
    store, extra = str(tmp_path / "store"), []
    if case == "store-under-a-file":
        store = str(tmp_path / "file" / "store")
    elif case == "store-in-proc":
        store = "/proc/streamwire-store"
    else:
        extra = {"port-abc": ["--port", "abc"], "port-taken": ["--port", str(taken_port)],
                 "negative-memory": ["--max-in-memory-bytes", "-5"], "zero-put-timeout": ["--put-timeout-s", "0"],
                 "nan-lag": ["--max-replication-lag-s", "nan"]}[case]
    cmd = [sys.executable, "-m", "reference.sync", "serve", "--store", store, "--port", "0", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S)
    assert done.returncode == 2 and "LISTENING" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m reference.sync serve: error: "), done.stderr


def test_durability_follows_the_lag_not_the_flush_task_tick(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 24, reproduction 8's other half (and issue 25): with the 900 s flush-task interval left as it
    is, a transaction becomes durable once its data is --max-replication-lag-s old, with no other put."""
    server = serve("--max-replication-lag-s", "1")
    client = SyncClient(server.location, "A", deadline_s=60)
    client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    client.wait_durable(1, deadline_s=STARTUP_TIMEOUT_S)
    client.close()
    assert _rows(tmp_path / "store", "t") == {1: "a"}
