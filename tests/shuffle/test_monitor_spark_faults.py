"""The monitor names each fault a proxy injects between Spark 4.3.0's own writer and reader handlers
(the ``spark-jvm`` adapter: StreamingShuffleServerHandler on Spark's TransportServer, the
StreamingShuffleClientHandler through Spark's client factory), as it does on the reference runtime
(tests/conformance/test_monitor_live.py).

The reader reaches the writer through the proxy on a loopback address of this run's own; the monitor
watches that address and the writer's port only. Needs root (a raw socket) and a JDK.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest
from spark_jvm_support import require_jdk

from conformance.shuffle.fault_proxy import Fault, FaultProxy
from conformance.shuffle.monitor import LiveMonitor, connection_filter
from conformance.shuffle.spark_jvm import SparkJvm
from conformance.shuffle.spark_write_loop import SparkWriteLoop
from spec.shuffle.settings import ShuffleSettings

pytestmark = [pytest.mark.jvm,
              pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (a raw AF_PACKET socket)")]

RECORDS = [f"row-{i:03d}".encode() for i in range(40)]
WAIT_S = 30.0


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkJvm]:
    with SparkJvm.open(require_jdk()) as jvm:
        yield jvm


@pytest.mark.parametrize(("fault", "rule"), [
    (Fault.FLIP_PAYLOAD_BYTE, "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"),
    (Fault.DROP_CREDIT, "CREDIT_MISSING"),
    (Fault.REORDER, "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER"),
])
def test_a_fault_between_sparks_writer_and_reader_is_named(spark: SparkJvm, fault: Fault, rule: str) -> None:
    host = f"127.93.{os.getpid() % 250 + 1}.{list(Fault).index(fault) + 1}"
    writer = spark.writer(writer_id=3, num_readers=1)
    proxy = FaultProxy(host, ("127.0.0.1", writer.port), fault)
    try:
        with LiveMonitor("lo", connection_filter("", f"host {host} or port {writer.port}")) as monitor:
            loop = SparkWriteLoop(writer, {0: RECORDS}, 1, ShuffleSettings()).start()
            reader = spark.reader(host, proxy.port, writer_id=3, reader_id=0)
            try:
                ended = reader.events.wait_for(lambda e: e["event"] in ("ack_written", "error"), WAIT_S)
                assert ended is not None, reader.events.snapshot()
            finally:
                reader.close()
                proxy.close()
                loop.stop()
    finally:
        writer.close()
    assert proxy.applied.is_set()
    report = monitor.report
    summaries = [c.summary() for c in report.connections]
    assert len(report.connections) == 2, summaries  # reader to proxy, proxy to writer
    assert rule in [v.rule for c in report.connections for v in c.violations], summaries
