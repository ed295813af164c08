"""The monitor on live loopback traffic of the reference runtime, clean and through a fault proxy.

Each run binds its writers (and the proxy) to a loopback address of its own, and the monitor watches
only that address, so other traffic on the machine is never captured. Needs root (a raw socket).
"""

from __future__ import annotations

import os
import struct
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from conformance.shuffle.monitor import LiveMonitor, MonitorReport, connection_filter
from conformance.shuffle.fault_proxy import Fault, FaultProxy
from reference.cluster.memory import InProcessCluster
from reference.shuffle.cluster_directory import ClusterDirectory
from reference.shuffle.local import LocalShuffleError, TaskDirectory, run_local_shuffle
from reference.shuffle.task import TaskOptions
from spec.auth import AuthConfig
from spec.shuffle import coordination
from spec.shuffle.settings import ShuffleSettings

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (a raw AF_PACKET socket)")

ROWS = 300


def _host(n: int) -> str:
    return f"127.{77 + n}.{os.getpid() % 250 + 1}.{os.getpid() // 250 % 250 + 1}"


def _inputs(writers: int, readers: int) -> list[list[tuple[int, bytes]]]:
    return [[(i % readers, struct.pack(">q", i)) for i in range(w, ROWS, writers)] for w in range(writers)]


def test_every_connection_of_a_clean_run_is_decoded_with_zero_violations(tmp_path: Path) -> None:
    host = _host(0)
    with LiveMonitor("lo", connection_filter("", f"host {host}")) as monitor:
        outputs, _ = run_local_shuffle(_inputs(2, 2), 2, ShuffleSettings(), TaskOptions(bind_host=host))
    report = monitor.report
    assert [c.status.value for c in report.connections] == ["clean"] * 4, [c.summary() for c in report.connections]
    assert sorted((c.writer_id, c.reader_id) for c in report.connections) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert report.violations == 0
    assert sum(c.records for c in report.connections) == sum(len(o) for o in outputs) == ROWS
    for c in report.connections:
        assert c.frames["CREDIT_CONTROL"] == c.frames["DATA"] + 1
        assert c.frames["TERMINATION_CONTROL"] == c.frames["TERMINATION_ACK"] == 1


def test_connections_with_the_encrypted_handshake_are_reported_encrypted_not_decoded() -> None:
    host = _host(9)
    options = TaskOptions(bind_host=host, auth=AuthConfig(b"secret", "streamwire-monitor"))
    with LiveMonitor("lo", connection_filter("", f"host {host}")) as monitor:
        outputs, _ = run_local_shuffle(_inputs(1, 2), 2, ShuffleSettings(), options)
    report = monitor.report
    assert sum(len(o) for o in outputs) == ROWS
    assert [c.status.value for c in report.connections] == ["encrypted, not decoded"] * 2
    assert report.violations == 0


class _ProxiedDirectory:
    """A task's directory whose writers are registered behind a fault proxy."""

    def __init__(self, inner: ClusterDirectory, fault: Fault, proxies: list[FaultProxy]) -> None:
        self._inner, self._fault, self._proxies = inner, fault, proxies

    def register(self, key: coordination.ShuffleKey, writer: coordination.WriterLocation) -> None:
        proxy = FaultProxy(writer.host, (writer.host, writer.port), self._fault)
        self._proxies.append(proxy)
        self._inner.register(key, replace(writer, port=proxy.port))

    def lookup(self, key: coordination.ShuffleKey) -> coordination.Writers:
        return self._inner.lookup(key)

    def unregister(self, key: coordination.ShuffleKey, writer_id: int) -> None:
        self._inner.unregister(key, writer_id)

    def report_failure(self, key: coordination.ShuffleKey, role: coordination.Role, task: int,
                       description: str) -> None:
        self._inner.report_failure(key, role, task, description)

    def close(self) -> None:
        self._inner.close()


def _faulted_run(fault: Fault, host: str) -> Iterator[MonitorReport]:
    cluster = InProcessCluster()
    holder = ClusterDirectory(cluster, "driver-shuffle0", launcher=lambda key: None)
    proxies: list[FaultProxy] = []

    def directories(role: coordination.Role, task: int) -> TaskDirectory:
        return _ProxiedDirectory(ClusterDirectory(cluster, f"{role.name.lower()}{task}", holder.shard), fault, proxies)

    try:
        with LiveMonitor("lo", connection_filter("", f"host {host}")) as monitor:
            try:
                run_local_shuffle(_inputs(1, 1), 1, ShuffleSettings(), TaskOptions(bind_host=host),
                                  directories=directories, timeout_s=30.0)
            except LocalShuffleError:
                pass  # the runtime's own reader or writer may fail on the fault too
            finally:
                for proxy in proxies:
                    proxy.close()
        assert proxies and all(p.applied.is_set() for p in proxies), "the fault was never applied"
        yield monitor.report
    finally:
        holder.close()
        cluster.close()


@pytest.mark.parametrize(("fault", "rule"), [
    (Fault.FLIP_PAYLOAD_BYTE, "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"),
    (Fault.DROP_CREDIT, "CREDIT_MISSING"),
    (Fault.REORDER, "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER"),
])
def test_a_fault_injected_between_writer_and_reader_is_named(fault: Fault, rule: str) -> None:
    for report in _faulted_run(fault, _host(1 + list(Fault).index(fault))):
        rules = [v.rule for c in report.connections for v in c.violations]
        assert rule in rules, [c.summary() for c in report.connections]
        assert all(v.spec_section.startswith("docs/spec/shuffle.md#") for c in report.connections
                   for v in c.violations)
