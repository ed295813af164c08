"""The reference server in-process: the conformance suite, the lock timeout and the flush thread."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from conformance.framework import Case, CaseOutcome, RunOptions
from conformance.report.cases import CaseReport
from conformance.runner import run_case
from conformance.sync.suite import DESCS, SUITE, _cmd, rows_batch
from conformance.sync.clock import ManualClock
from reference.sync.clock import MonotonicClock
from reference.sync.client import SyncClient, SyncPut, SyncUnavailable
from tests.sync.conftest import flush_pending, raw_put
from reference.sync.store import DeltaStore
from spec.sync.messages import SyncCommand, SyncResponse, TableFormat, decode_response
from spec.sync.schema import SyncSchema
from spec.sync.squash import SquashedChange
from spec.sync.writer import SyncSettings


SERVERS = 2
"""The suite's cases dealt to this many reference servers, each on a store of its own, its cases one at a time (they
share its flush policy and clock), the servers side by side."""


def run_on_a_server(cases: list[Case]) -> list[CaseReport]:
    options = RunOptions(suite="sync", target="reference", timeout=60)
    with SUITE.open_target(options) as target:
        return [run_case(case, target, options) for case in cases]


def test_conformance_suite_passes_against_the_reference() -> None:
    with ThreadPoolExecutor(SERVERS, thread_name_prefix="sync-suite") as pool:
        reports = [r for dealt in pool.map(run_on_a_server, (list(SUITE.cases[i::SERVERS]) for i in range(SERVERS)))
                   for r in dealt]
    assert sorted(r.case.id for r in reports) == sorted(c.id for c in SUITE.cases)  # every case, once
    assert len(reports) >= 20
    assert {r.case.id: r.outcome for r in reports if r.outcome is not CaseOutcome.PASS} == {}


def test_put_that_cannot_get_the_write_lock_is_not_accepted(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(write_lock_timeout_s=0.05)
    client = SyncClient(f"grpc://127.0.0.1:{server.port}", "A", deadline_s=0.0)
    client.probe()
    with server._lock:
        c = flight.FlightClient(f"grpc://127.0.0.1:{server.port}")
        writer, reader = c.do_put(flight.FlightDescriptor.for_command(_cmd("t", "A", 1).to_descriptor_cmd()),
                                  rows_batch([]).schema)
        writer.write_table(rows_batch([(None, 1, "a")]))
        writer.done_writing()
        response = decode_response(reader.read().to_pybytes())
        writer.close()
        c.close()
    assert (response.accepted, response.memory_sequence_number, response.durable_sequence_number) == (False, None, None)
    assert server.stats()["open_transactions"] == 0


def test_client_retries_until_the_lock_is_free(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(write_lock_timeout_s=0.05)
    client = SyncClient(f"grpc://127.0.0.1:{server.port}", "A", deadline_s=30.0)
    client.probe()
    server._lock.acquire()
    threading.Timer(0.3, server._lock.release).start()
    response = client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    assert response.accepted and response.memory_sequence_number == 1


def test_a_refused_connection_is_a_retryable_failure_that_ends_in_sync_unavailable() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    client = SyncClient(f"grpc://127.0.0.1:{port}", "A", deadline_s=0.0)
    with pytest.raises(SyncUnavailable, match="last: FlightUnavailableError"):
        client.probe()


class _LosesTheFirstAnswer(SyncClient):
    """A client whose first data put reaches the server but whose answer is lost on the way back."""

    lost = False

    def _call(self, put: SyncPut | None, sequence: int | None) -> SyncResponse:
        response = super()._call(put, sequence)
        if put is not None and sequence is not None and not self.lost:
            self.lost = True
            raise flight.FlightUnavailableError("the connection broke before the answer arrived")
        return response


def test_a_put_whose_answer_was_lost_is_not_sent_again(server_factory) -> None:  # type: ignore[no-untyped-def]
    """The reconnect's probe shows the server holds it: sending it again would be refused (a sequence
    number not above memory and not yet durable)."""
    server = server_factory()
    client = _LosesTheFirstAnswer(server.location, "A", deadline_s=30)
    response = client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    client.close()
    assert client.lost and response.memory_sequence_number == 1
    assert server.stats()["in_memory_bytes"] > 0 and flush_pending(server)


class _SleepsRecorded(ManualClock):
    """A manual clock that notes every sleep of the client (which moves it)."""

    def __init__(self) -> None:
        super().__init__()
        self.delays: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        super().sleep(seconds)


def test_retries_of_a_refused_connection_back_off_exponentially_up_to_the_cap_until_the_deadline() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    clock = _SleepsRecorded()
    client = SyncClient(f"grpc://127.0.0.1:{port}", "A", deadline_s=1.0, backoff_initial_s=0.02,
                        backoff_max_s=0.25, clock=clock)
    with pytest.raises(SyncUnavailable, match="within 1 s"):
        client.probe()
    steps = [0.02, 0.04, 0.08, 0.16, 0.25, 0.25]
    delays = clock.delays[:len(steps)]
    assert all(step / 2 <= delay <= step for delay, step in zip(delays, steps, strict=True)), delays  # jitter
    assert clock.now() == pytest.approx(1.0)  # it gave up at its deadline, on its own clock


def test_sixteen_clients_against_two_put_slots_all_succeed(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 37, reproduction 3: busy answers (every put slot taken, another origin's transaction open) are
    retried by the client until its deadline, so every transaction lands."""
    server = server_factory(max_concurrent_puts=2)
    start = threading.Barrier(16)
    failures: list[BaseException] = []

    def send(n: int) -> None:
        client = SyncClient(server.location, f"origin-{n}", deadline_s=60.0)
        first = rows_batch([(None, n * 1000 + i, "x" * 20) for i in range(500)])
        second = rows_batch([(None, n * 1000 + 500 + i, "y" * 20) for i in range(500)])
        start.wait()
        try:
            client.send_transaction(1, [SyncPut(f"t{n % 4}", first, DESCS), SyncPut(f"t{n % 4}", second, DESCS)])
        except BaseException as exc:
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=send, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert failures == []
    assert sum(raw_put(server.location, _cmd("", f"origin-{n}", None, ())).response.memory_sequence_number == 1  # type: ignore[union-attr]
               for n in range(16)) == 16


def test_background_task_flushes_by_lag(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(max_replication_lag_s=0.2, flush_task_interval_s=0.05, clock=MonotonicClock())
    client = SyncClient(f"grpc://127.0.0.1:{server.port}", "A")
    client.send_transaction(4, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    deadline = time.monotonic() + 30
    while client.probe().durable_sequence_number != 4:
        assert time.monotonic() < deadline, "lag flush never happened"
        time.sleep(0.05)
    assert DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "t")).to_pylist() == [{"id": 1, "v": "a"}]


def test_size_policy_flushes_the_largest_table(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(max_in_memory_bytes=1)
    client = SyncClient(f"grpc://127.0.0.1:{server.port}", "A")
    response = client.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    assert response.durable_sequence_number == 1
    assert server.stats()["in_memory_bytes"] == 0


@pytest.mark.parametrize("size_policy", [True, False], ids=["merged-by-size-policy", "merged-at-flush"])
def test_merged_puts_keep_a_key_swap(server_factory, tmp_path: Path, size_policy: bool) -> None:  # type: ignore[no-untyped-def]
    """Pending puts are merged when the size limit is crossed or else at the flush; a swap of keys
    1 and 2 inside one put must survive either merge, and memory counts what is held."""
    puts = [rows_batch([(None, 1, "a"), (None, 2, "b")]),
            rows_batch([(1, 3, "a"), (2, 1, "b"), (3, 2, "a")]),
            rows_batch([(None, 4, "d")])]
    schema = SyncSchema.validate(DESCS, puts[0].schema)
    sizes = [SquashedChange.of_put(schema, [p]).batch.nbytes for p in puts]
    server = server_factory(**({"max_in_memory_bytes": sum(sizes)} if size_policy else {}))
    client = SyncClient(f"grpc://127.0.0.1:{server.port}", "A")
    for seq, batch in enumerate(puts):
        client.send_transaction(seq, [SyncPut("t", batch, DESCS)])
    held = server.stats()["in_memory_bytes"]
    if size_policy:
        assert 0 < held < sum(sizes), "crossing the limit should merge the pending puts, not flush them"
    else:
        assert held == sum(sizes)
    assert flush_pending(server)
    rows = DeltaStore(str(tmp_path / "store")).read_table(str(tmp_path / "store" / "t")).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "b"), (2, "a"), (4, "d")]


def test_iceberg_is_refused(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory()
    c = flight.FlightClient(f"grpc://127.0.0.1:{server.port}")
    cmd = SyncCommand(path="t", origin="A", column_descriptors=DESCS, sequence_number=1, format=TableFormat.ICEBERG)
    writer, reader = c.do_put(flight.FlightDescriptor.for_command(cmd.to_descriptor_cmd()), rows_batch([]).schema)
    writer.write_table(rows_batch([(None, 1, "a")]))
    writer.done_writing()
    with pytest.raises(pa.ArrowException, match="Not implemented"):
        reader.read()
        writer.close()
    c.close()


def test_restart_seen_by_another_origin_first_is_still_replayed(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Only one response of a server's life says first=true, and with several origins another origin
    may take it; A must still see from its numbers that the restarted server lost its transaction 2
    (memory 2 was acknowledged, now memory 1), and replay it before sending 3."""
    store = tmp_path / "store"
    servers = [server_factory(store=store, max_replication_lag_s=3600.0)]
    a = SyncClient(lambda: f"grpc://127.0.0.1:{servers[-1].port}", "A", deadline_s=30.0, backoff_max_s=0.05)
    a.send_transaction(1, [SyncPut("t", rows_batch([(None, 1, "a")]), DESCS)])
    assert flush_pending(servers[0])
    assert a.send_transaction(2, [SyncPut("t", rows_batch([(None, 2, "b")]), DESCS)]).memory_sequence_number == 2
    servers[0].shutdown()  # a crash: transaction 2 was only in memory
    servers.append(server_factory(store=store, max_replication_lag_s=3600.0))
    probe_b = raw_put(f"grpc://127.0.0.1:{servers[1].port}", SyncCommand(path="", origin="B", sequence_number=None))
    assert probe_b.response is not None and probe_b.response.first  # B takes the restart's first=true
    response = a.send_transaction(3, [SyncPut("t", rows_batch([(None, 3, "c")]), DESCS)])
    assert response.memory_sequence_number == 3
    assert flush_pending(servers[1])
    rows = DeltaStore(str(store)).read_table(str(store / "t")).to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "a"), (2, "b"), (3, "c")]
