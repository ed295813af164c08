"""The monitor on a committed capture of Spark 4.3.0's real-time mode, 6 micro-batches in one session.

``tests/conformance/fixtures/spark_rtm_6_batches.pcap`` was captured live by ``docs/examples/watch_rtm.py``
(the recipe of docs/conformance.md: ``streamwire monitor -i lo --pid <the driver JVM>``, a
LowLatencyMemoryStream of 2 partitions, ``repartition(2)``, a 5 s real-time batch, 280 rows offered and
280 delivered by the query's foreach sink, then ``query.stop()``). Every batch after the first names its
writers by map task ids (4, 5, 8, 9, ...) other than their partition ids (0, 1); the batch the stop cut
short had only done its handshakes. Re-run the script (as root, about a minute) to capture a new one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conformance.capture import Packet, PcapWriter, read_capture
from conformance.shuffle.monitor import connection_filter, observe
from conformance.tcp_streams import segment_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "conformance" / "fixtures" / "spark_rtm_6_batches.pcap"
ROWS = 280
DATA_TYPE = b"\0\0\0\1"


def _packets() -> list[Packet]:
    with open(FIXTURE, "rb") as stream:
        return list(read_capture(stream))


def test_six_real_time_batches_in_one_session_monitor_clean() -> None:
    report = observe(_packets(), connection_filter("", ""))
    summaries = [c.summary() for c in report.connections]
    assert (report.violations, report.incomplete, report.exit_code) == (0, [], 0), summaries
    assert {c.status.value for c in report.connections} == {"clean", "closed after the handshake, nothing owed"}
    assert sum(c.records for c in report.connections) == ROWS, summaries
    batches = {c.writer_id // 4 for c in report.connections}  # 2 map and 2 reduce task ids per batch
    assert len(batches) >= 6, summaries
    later = [c for c in report.connections if c.partition_id is not None and c.writer_id != c.partition_id]
    assert later and all(c.status.value == "clean" for c in later), summaries
    for connection in report.connections:
        if connection.status.value == "clean":
            assert connection.frames["CREDIT_CONTROL"] == connection.frames["DATA"] + 1, summaries


def test_the_same_capture_with_one_payload_byte_flipped_exits_1_naming_the_checksum(tmp_path: Path) -> None:
    packets = _packets()
    segments = [segment_of(p) for p in packets]
    # Spark writes a DATA's 32-byte header and its payload as two segments: flip the payload's last byte
    header = next(i for i, s in enumerate(segments) if s is not None and len(s.payload) == 32
                  and s.payload[:4] == DATA_TYPE)
    first = segments[header]
    assert first is not None
    index = next(i for i in range(header + 1, len(segments)) if (s := segments[i]) is not None and s.payload
                 and (s.src, s.dst) == (first.src, first.dst))
    data = bytearray(packets[index].data)
    data[-1] ^= 0x01
    packets[index] = Packet(packets[index].time, packets[index].linktype, bytes(data))
    with open(tmp_path / "flipped.pcap", "wb") as out:
        writer = PcapWriter(out)
        for packet in packets:
            writer.write(packet)
    done = subprocess.run([sys.executable, "-m", "streamwire", "monitor", "-r", str(tmp_path / "flipped.pcap")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "violation: STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED" in done.stdout
    assert "1 violation(s)" in done.stdout
