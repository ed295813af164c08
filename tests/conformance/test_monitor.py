"""The monitor on captures built here: pcap and pcapng reading, TCP reassembly under loss-free
disorder (out of order, retransmitted, overlapping segments), recognition, the JSON report and its
schema, and the command line's exit codes."""

from __future__ import annotations

import io
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conformance.bpf import Endpoints
from conformance.capture import LINKTYPE_ETHERNET, CaptureError, Packet, PcapWriter, read_capture
from conformance.shuffle.monitor import SCHEMA, connection_filter, observe
from conformance.packet_filter import FilterError, compile_filter
from conformance.tcp_streams import ACK, FIN, SYN, Direction, Segment
from spec.shuffle import encode_frame
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.records import encode_records

READER = ("127.0.0.1", 40000)
WRITER = ("127.0.0.2", 7077)
ROOT = Path(__file__).resolve().parents[2]


def _ip(address: str) -> bytes:
    return bytes(int(part) for part in address.split("."))


def _frame(src: tuple[str, int], dst: tuple[str, int], seq: int, flags: int, payload: bytes = b"") -> bytes:
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq, 0, 5 << 4, flags, 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, _ip(src[0]), _ip(dst[0])) + tcp
    return b"\0" * 12 + b"\x08\x00" + ip


class _Wire:
    """Builds a capture of one connection: the handshake, then frames cut into segments."""

    def __init__(self) -> None:
        self.packets: list[Packet] = []
        self.seq = {READER: 1000, WRITER: 5000}
        self.time = 1_700_000_000.0
        self._add(READER, WRITER, 999, SYN)
        self._add(WRITER, READER, 4999, SYN | ACK)

    def _add(self, src: tuple[str, int], dst: tuple[str, int], seq: int, flags: int, payload: bytes = b"") -> None:
        self.time += 0.001
        self.packets.append(Packet(self.time, LINKTYPE_ETHERNET, _frame(src, dst, seq, flags, payload)))

    def send(self, src: tuple[str, int], data: bytes, cut: int = 7) -> None:
        dst = WRITER if src == READER else READER
        for start in range(0, len(data), cut):
            self._add(src, dst, self.seq[src] + start, ACK, data[start:start + cut])
        self.seq[src] += len(data)

    def frames(self, src: tuple[str, int], *messages: Message) -> None:
        self.send(src, b"".join(encode_frame(m) for m in messages))

    def close(self) -> None:
        self._add(WRITER, READER, self.seq[WRITER], FIN | ACK)
        self._add(READER, WRITER, self.seq[READER], FIN | ACK)

    def pcap(self) -> bytes:
        out = io.BytesIO()
        writer = PcapWriter(out)
        for packet in self.packets:
            writer.write(packet)
        return out.getvalue()


def _data(seq: int, records: list[bytes], checksum: int | None = None) -> DataMessage:
    payload = encode_records(records)
    return DataMessage(seq=seq, writer_id=3, reader_id=7, payload=payload,
                       checksum=payload_checksum(payload) if checksum is None else checksum)


CREDIT = CreditMessage(writer_id=3, reader_id=7)


def _clean_exchange(wire: _Wire) -> None:
    wire.frames(READER, CREDIT)
    wire.frames(WRITER, _data(0, [b"a", b"bc"]))
    wire.frames(READER, CREDIT)
    wire.frames(WRITER, _data(1, [b"def"]), TerminationControlMessage(seq=2, writer_id=3, reader_id=7))
    wire.frames(READER, CREDIT, TerminationAckMessage(seq=2, writer_id=3, reader_id=7))
    wire.close()


def test_a_clean_connection_is_decoded_whole_and_judged_clean() -> None:
    wire = _Wire()
    _clean_exchange(wire)
    report = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", ""))
    [connection] = report.connections
    assert connection.to_json() | {"round_trips_ms": None} == {
        "client": "127.0.0.1:40000", "server": "127.0.0.2:7077", "status": "clean", "writer_id": 3, "reader_id": 7,
        "partition_id": 3,
        "frames": {"DATA": 2, "CREDIT_CONTROL": 3, "TERMINATION_CONTROL": 1, "TERMINATION_ACK": 1},
        "records": 3, "bytes": 3 * 37 + 2 * 33 + 2 * (13 + 32) + 11 + 7, "violations": [], "round_trips_ms": None,
        "outstanding": [], "anomalies": []}
    assert connection.to_json()["round_trips_ms"]["samples"] == 2


def test_segments_out_of_order_retransmitted_and_overlapping_give_the_same_report() -> None:
    wire = _Wire()
    _clean_exchange(wire)
    clean = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).to_json()
    shuffled = wire.packets[:2]
    rng = random.Random(28)
    body = wire.packets[2:-2]
    for i in range(0, len(body), 4):  # disorder within windows of 4 segments, never across directions' causality
        window = body[i:i + 4]
        rng.shuffle(window)
        shuffled += window
        shuffled += rng.sample(window, 2)  # retransmissions
    shuffled += wire.packets[-2:]
    disordered = observe(shuffled, connection_filter("", "")).to_json()
    for report in (clean, disordered):
        for connection in report["connections"]:
            connection["round_trips_ms"] = None
    assert disordered == clean


def test_reassembly_delivers_each_byte_once_in_order() -> None:
    direction = Direction()
    got = [direction.accept(Segment(0.0, READER, WRITER, 99, SYN, b""))]
    for seq, payload in [(105, b"fghij"), (100, b"abc"), (102, b"cdefg"), (100, b"abcdefgh"), (110, b"klm"),
                         (104, b"efghijk")]:
        got.append(direction.accept(Segment(0.0, READER, WRITER, seq, ACK, payload)))
    assert b"".join(got) == b"abcdefghijklm"
    assert got == [b"", b"", b"abc", b"defghij", b"", b"klm", b""]


def test_reassembly_survives_sequence_number_wraparound() -> None:
    direction = Direction()
    start = 2**32 - 3
    direction.accept(Segment(0.0, READER, WRITER, start - 1, SYN, b""))
    assert direction.accept(Segment(0.0, READER, WRITER, 0, ACK, b"def")) == b""  # "d" overlaps the next
    assert direction.accept(Segment(0.0, READER, WRITER, start, ACK, b"abcd")) == b"abcdef"


def _later_job_exchange(wire: _Wire, partitions: tuple[int, int] = (3, 3)) -> None:
    """A later job's conversation as Spark holds it: the handshake names the writer's map task id (12),
    its DATA and TERMINATION_CONTROL name its partition id (3), which the reader's later CREDITs and ack
    echo (docs/spec/shuffle.md#channel-ids)."""
    first, second = partitions
    payload = encode_records([b"a"])
    wire.frames(READER, CreditMessage(writer_id=12, reader_id=7))
    wire.frames(WRITER, DataMessage(seq=0, writer_id=first, reader_id=7, payload=payload,
                                    checksum=payload_checksum(payload)))
    wire.frames(READER, CreditMessage(writer_id=first, reader_id=7))
    wire.frames(WRITER, TerminationControlMessage(seq=1, writer_id=second, reader_id=7))
    wire.frames(READER, TerminationAckMessage(seq=1, writer_id=second, reader_id=7))
    wire.close()


def test_a_later_jobs_connection_whose_map_id_is_not_its_partition_id_is_clean() -> None:
    wire = _Wire()
    _later_job_exchange(wire)
    [connection] = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections
    assert (connection.status.value, connection.violations) == ("clean", [])
    assert (connection.writer_id, connection.partition_id, connection.reader_id) == (12, 3, 7)
    assert "writer 12 (partition 3) -> reader 7 clean" in connection.summary()


def test_a_connection_whose_writer_changes_its_partition_id_is_a_mismatch() -> None:
    wire = _Wire()
    _later_job_exchange(wire, partitions=(3, 4))
    [connection] = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections
    assert [(v.rule, v.frame_index) for v in connection.violations] == [("MISMATCHED_CHANNEL_IDS", 3)]
    assert connection.violations[0].spec_section == "docs/spec/shuffle.md#reader-machine"


def test_a_close_after_the_handshake_with_nothing_owed_is_not_a_violation() -> None:
    """A query stopped between batches: its readers had connected and sent the handshake, its writers had
    nothing to send yet. Whoever closes first, nothing was owed."""
    for writer_first in (True, False):
        wire = _Wire()
        wire.frames(READER, CREDIT)
        if writer_first:
            wire.close()
        else:
            wire._add(READER, WRITER, wire.seq[READER], FIN | ACK)
            wire._add(WRITER, READER, wire.seq[WRITER], FIN | ACK)
        [connection] = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections
        assert (connection.status.value, connection.violations) == ("closed after the handshake, nothing owed", [])


@pytest.mark.parametrize(("fault", "rule", "frame_index"), [
    ("checksum", "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED", 1),
    ("gap", "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER", 1),
    ("credit", "CREDIT_MISSING", 3),
    ("ack", "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER", 4),
    ("ack-early", "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER", 2),
])
def test_each_broken_rule_is_named_with_its_frame_and_section(fault: str, rule: str, frame_index: int) -> None:
    wire = _Wire()
    wire.frames(READER, CREDIT)
    wire.frames(WRITER, _data(1 if fault == "gap" else 0, [b"a"], checksum=1 if fault == "checksum" else None))
    if fault == "ack-early":
        wire.frames(READER, TerminationAckMessage(seq=1, writer_id=3, reader_id=7))
    else:
        if fault != "credit":
            wire.frames(READER, CREDIT)
        wire.frames(WRITER, TerminationControlMessage(seq=1, writer_id=3, reader_id=7))
        wire.frames(READER, TerminationAckMessage(seq=0 if fault == "ack" else 1, writer_id=3, reader_id=7))
    wire.close()
    [connection] = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections
    first = connection.violations[0]
    assert (first.rule, first.frame_index) == (rule, frame_index)
    assert first.spec_section.startswith("docs/spec/shuffle.md#")


@pytest.mark.parametrize(("outstanding", "frame_index"), [("records", 2), ("ack", 4)])
def test_a_close_with_records_or_an_ack_outstanding_is_incomplete_not_a_violation(
        outstanding: str, frame_index: int, tmp_path: Path) -> None:
    """A task stopped (or dead) mid-conversation: records not terminated, or a terminator not acked. Nothing
    broke a rule, so no violation is named; the conversation is INCOMPLETE and the monitor still exits 1."""
    wire = _Wire()
    wire.frames(READER, CREDIT)
    wire.frames(WRITER, _data(0, [b"a"]))
    if outstanding == "ack":
        wire.frames(READER, CREDIT)
        wire.frames(WRITER, TerminationControlMessage(seq=1, writer_id=3, reader_id=7))
    wire.close()
    (tmp_path / "unfinished.pcap").write_bytes(wire.pcap())
    done = _cli("-r", str(tmp_path / "unfinished.pcap"), "--json-report", str(tmp_path / "unfinished.json"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "1 connection(s), 0 violation(s), 1 incomplete"
    report = json.loads((tmp_path / "unfinished.json").read_text())
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    [connection] = report["connections"]
    assert (connection["status"], connection["violations"], report["violations"]) == (
        "incomplete, closed with records or an ack outstanding", [], 0)
    assert [(o["rule"], o["frame_index"]) for o in connection["outstanding"]] == [
        ("CONNECTION_CLOSED_BEFORE_TERMINATION", frame_index)]


def test_a_connection_that_starts_with_an_auth_message_is_reported_encrypted_not_decoded() -> None:
    wire = _Wire()
    body = b"\xfb" + b"\0\0\0\3app" + b"\0" * 40
    wire.send(READER, struct.pack(">qbqi", 13 + 8 + len(body), 3, 1, len(body)) + body)
    wire.send(WRITER, bytes(range(256)))
    wire.close()
    [connection] = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections
    assert (connection.status.value, connection.violations) == ("encrypted, not decoded", [])


def test_a_connection_whose_opening_was_not_captured_is_reported_but_not_judged() -> None:
    wire = _Wire()
    _clean_exchange(wire)
    without_opening = wire.packets[2:]  # the capture started after SYN and SYN-ACK
    [connection] = observe(without_opening, connection_filter("", "")).connections
    assert (connection.status.value, connection.violations) == ("joined mid-stream, not judged", [])


def test_a_connection_is_judged_up_to_its_first_violation_and_counted_to_its_end() -> None:
    for extra_credit, rule, frame_index in [(True, "CREDIT_UNSOLICITED", 1),
                                            (False, "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE", 3)]:
        wire = _Wire()
        wire.frames(READER, CREDIT)
        if extra_credit:
            wire.frames(READER, CREDIT)
        wire.frames(WRITER, _data(0, [b"a"]))
        wire.frames(READER, CREDIT, _data(0, [b"b", b"c"]))
        wire.close()
        [connection] = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections
        assert [(v.rule, v.frame_index) for v in connection.violations] == [(rule, frame_index)]
        assert (connection.records, connection.frames["DATA"]) == (3, 2)
    assert connection.violations[0].message.endswith("Unexpected message type in ShuffleServerHandler: "
                                                     "DATA_MESSAGE_UNSAFE_ROW")


def test_a_new_opening_on_the_ends_of_a_connection_whose_end_was_missed_starts_afresh() -> None:
    first, second = _Wire(), _Wire()
    _clean_exchange(first)
    _clean_exchange(second)
    packets = first.packets[:-2] + second.packets  # the first connection's FINs were not captured
    reports = observe(packets, connection_filter("", "")).connections
    assert [c.status.value for c in reports] == ["capture missed bytes", "clean"]


def test_other_tcp_traffic_is_ignored() -> None:
    wire = _Wire()
    wire.send(READER, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    wire.close()
    assert observe(read_capture(io.BytesIO(wire.pcap())), connection_filter("", "")).connections == []


def test_ports_and_filter_narrow_what_is_watched() -> None:
    wire = _Wire()
    _clean_exchange(wire)
    for ports, expression, seen in [("7077", "", 1), ("7078", "", 0), ("", "dst port 7077 and src host 127.0.0.1", 1),
                                    ("", "not (host 127.0.0.2 or port 1)", 0), ("", "net 127.0.0.0/8", 1)]:
        report = observe(read_capture(io.BytesIO(wire.pcap())), connection_filter(ports, expression))
        assert len(report.connections) == seen, (ports, expression)
    assert compile_filter("host 127.0.0.9 and not port 22").endpoints == Endpoints(hosts=frozenset({"127.0.0.9"}))
    assert compile_filter("(host 127.0.0.9 or dst port 5) and net 10.0.0.0/8").endpoints == Endpoints(
        frozenset({"127.0.0.9"}), frozenset({5}))
    for unbounded in ["net 127.0.0.0/8", "not host 127.0.0.9", "host ::1", "port 5 or net 10.0.0.0/8", ""]:
        assert compile_filter(unbounded).endpoints is None, unbounded
    assert connection_filter("7077,7078", "host 127.0.0.9").endpoints == Endpoints(ports=frozenset({7077, 7078}))
    for bad in ["port", "port x", "hots 1.2.3.4", "(port 1", "port 1 port 2"]:
        with pytest.raises(FilterError):
            compile_filter(bad)


def _pcapng(wire: _Wire) -> bytes:
    def block(kind: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, 65535) + struct.pack("<HHB3x", 9, 1, 9) + b"\0" * 4)
    for packet in wire.packets:
        stamp = int(packet.time * 1e9)
        out += block(6, struct.pack("<IIIII", 0, stamp >> 32, stamp & 0xFFFFFFFF, len(packet.data),
                                    len(packet.data)) + packet.data)
    return out


def test_pcapng_reads_as_the_same_packets() -> None:
    wire = _Wire()
    _clean_exchange(wire)
    packets = list(read_capture(io.BytesIO(_pcapng(wire))))
    assert [p.data for p in packets] == [p.data for p in wire.packets]
    assert packets[0].time == pytest.approx(wire.packets[0].time, abs=1e-6)
    with pytest.raises(CaptureError):
        list(read_capture(io.BytesIO(b"not a capture at all")))
    with pytest.raises(CaptureError):
        list(read_capture(io.BytesIO(wire.pcap()[:-5])))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", "monitor", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_the_command_line_reports_exits_and_writes_a_report_its_schema_accepts(tmp_path: Path) -> None:
    clean, broken = _Wire(), _Wire()
    _clean_exchange(clean)
    broken.frames(READER, CREDIT)
    broken.frames(WRITER, _data(0, [b"a"], checksum=1))
    broken.close()
    (tmp_path / "clean.pcap").write_bytes(clean.pcap())
    (tmp_path / "broken.pcapng").write_bytes(_pcapng(broken))
    schema = json.loads(SCHEMA.read_text())
    done = _cli("-r", str(tmp_path / "clean.pcap"), "--json-report", str(tmp_path / "clean.json"),
                "--html", str(tmp_path / "clean.html"))
    assert done.returncode == 0, done.stderr
    assert "writer 3 -> reader 7 clean" in done.stdout
    jsonschema.validate(json.loads((tmp_path / "clean.json").read_text()), schema)
    assert "<td>clean</td>" in (tmp_path / "clean.html").read_text()
    done = _cli("-r", str(tmp_path / "broken.pcapng"), "--json-report", str(tmp_path / "broken.json"),
                "--html", str(tmp_path / "broken.html"))
    assert done.returncode == 1
    assert "<b>STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED</b> at frame 1" in (tmp_path / "broken.html").read_text()
    report = json.loads((tmp_path / "broken.json").read_text())
    jsonschema.validate(report, schema)
    assert report["violations"] == 1
    assert report["connections"][0]["violations"][0]["rule"] == "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"
    for args in (["-r", str(tmp_path / "clean.pcap"), "--filter", "port x"], ["-r", str(tmp_path / "nothing")],
                 ["-r", str(tmp_path / "clean.json")], ["--duration", "1"], ["-r", str(tmp_path / "clean.pcap"),
                                                                            "--ports", "0"]):
        done = _cli(*args)
        assert done.returncode == 2, (args, done.stdout)
        assert len(done.stderr.strip().splitlines()) == 1 or "usage:" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def _retransmitted(flip: bool) -> _Wire:
    """The clean exchange, then the writer's first DATA segment sent again (a retransmission), its payload
    byte flipped when ``flip``."""
    wire = _Wire()
    _clean_exchange(wire)
    first_data = next(p for p in wire.packets if p.data[34:36] == struct.pack(">H", WRITER[1]) and len(p.data) > 54)
    data = bytearray(first_data.data)
    if flip:
        data[-1] ^= 0x01
    wire.packets.insert(-2, Packet(wire.packets[-3].time, LINKTYPE_ETHERNET, bytes(data)))
    return wire


def test_a_retransmission_that_contradicts_the_first_copy_is_an_anomaly_naming_its_seq(tmp_path: Path) -> None:
    [same] = observe(_retransmitted(flip=False).packets, connection_filter("", "")).connections
    assert (same.status.value, same.anomalies) == ("clean", [])
    report = observe(_retransmitted(flip=True).packets, connection_filter("", ""))
    [connection] = report.connections
    seq = 5000 + 6  # the writer's first segment: 7 bytes from its first data byte on, the last one flipped
    assert connection.anomalies == [f"a retransmission from 127.0.0.2:7077 differs from the first copy at TCP seq "
                                    f"{seq} (the first copy was judged)"]
    assert report.exit_code == 1 and report.incomplete == ["1 capture anomaly"]
    (tmp_path / "conflict.pcap").write_bytes(_retransmitted(flip=True).pcap())
    done = _cli("-r", str(tmp_path / "conflict.pcap"), "--json-report", str(tmp_path / "conflict.json"))
    assert done.returncode == 1 and f"TCP seq {seq}" in done.stdout and "verdict incomplete" in done.stdout
    jsonschema.validate(json.loads((tmp_path / "conflict.json").read_text()), json.loads(SCHEMA.read_text()))


def _syn(port: int) -> Packet:
    return Packet(1_600_000_000.0 + port / 1e6, LINKTYPE_ETHERNET, _frame(("127.0.0.3", port), WRITER, 1, SYN))


def test_at_the_connection_cap_half_open_connections_are_evicted_first_and_counted() -> None:
    """A SYN flood before a good capture: the good connection is still judged, and the verdict says what
    the cap cost (it can no longer come out clean and silent)."""
    wire = _Wire()
    _clean_exchange(wire)
    report = observe([_syn(port) for port in range(1000, 1020)] + wire.packets, connection_filter("", ""),
                     max_connections=8)
    [connection] = report.connections
    assert (connection.status.value, connection.records) == ("clean", 3)
    assert (report.evicted, report.ignored, report.exit_code) == (13, 0, 1)
    assert report.incomplete == ["13 half-open connection(s) evicted at the tracked-connection cap"]


def test_at_the_connection_cap_with_none_half_open_new_connections_are_ignored_and_counted() -> None:
    busy = []
    for port in range(1000, 1008):  # connections that carried a byte: never evicted
        busy += [_syn(port), Packet(1_600_000_001.0, LINKTYPE_ETHERNET,
                                    _frame(("127.0.0.3", port), WRITER, 2, ACK, b"x"))]
    wire = _Wire()
    _clean_exchange(wire)
    report = observe(busy + wire.packets, connection_filter("", ""), max_connections=8)
    assert (report.connections, report.evicted, report.ignored, report.exit_code) == ([], 0, 1, 1)
