"""The generated Wireshark dissector (docs/spec/shuffle.lua) read by ``tshark`` agrees, field by field,
with the project's layouts and codec on a capture of Spark's real-time mode (a committed fixture,
captured by the monitor from Spark 4.3.0's own StreamingShuffleWriter/Reader on loopback)."""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from conformance.capture import read_capture
from conformance.shuffle.monitor import connection_filter, observe
from conformance.tcp_streams import Flow, TcpTracker
from spec.docs import DOCS_DIR
from spec.shuffle import decode_frame
from spec.shuffle.codec import FRAME_HEADER_LENGTH, SPARK_MAX_FRAME_LENGTH, check_frame_header
from spec.docs.shuffle_dissector import FILE_NAME, PROTOCOL
from spec.shuffle.layouts import FRAME

FIXTURE = Path(__file__).parent / "fixtures" / "spark_rtm_shuffle.pcap"


@pytest.fixture(scope="module")
def tshark() -> str:
    """Without tshark on PATH, the test fails in CI and skips (saying why) locally."""
    binary = shutil.which("tshark")
    if binary is None:
        message = "tshark not on PATH (Debian package tshark; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


def _dissected(tshark: str, capture: Path) -> list[dict[str, str]]:
    """Every shuffle frame tshark dissects, in order: field name -> the value it shows."""
    pdml = subprocess.run([tshark, "-r", str(capture), "-X", f"lua_script:{DOCS_DIR / FILE_NAME}", "-Y", PROTOCOL,
                           "-T", "pdml"], capture_output=True, text=True, check=True, timeout=120).stdout
    frames = []
    for proto in ElementTree.fromstring(pdml).iter("proto"):
        if proto.get("name") == PROTOCOL:
            frames.append({field.get("name", "").removeprefix(f"{PROTOCOL}."): field.get("value" if field.get(
                "name", "").endswith(".payload") else "show", "") for field in proto.iter("field")})
    return frames


class _Frames:
    """Splits each direction's reassembled bytes into whole transport frames, in capture order."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def sink(self, flow: Flow) -> _Frames._Sink:
        return _Frames._Sink(self.frames)

    class _Sink:
        def __init__(self, out: list[bytes]) -> None:
            self._out = out
            self._pending = (bytearray(), bytearray())

        def data(self, from_client: bool, data: bytes, time: float) -> None:
            pending = self._pending[0 if from_client else 1]
            pending += data
            while len(pending) >= FRAME_HEADER_LENGTH:
                length = FRAME_HEADER_LENGTH + check_frame_header(pending, SPARK_MAX_FRAME_LENGTH)
                if len(pending) < length:
                    break
                self._out.append(bytes(pending[:length]))
                del pending[:length]

        def closed(self, time: float, reset: bool, gap: bool) -> None:
            assert not any(self._pending) and not gap


def _decoded(capture: Path) -> list[dict[str, str]]:
    """The same frames as the project reads them: the construct layout for every field, the codec agreeing."""
    frames = _Frames()
    with open(capture, "rb") as stream:
        TcpTracker(frames.sink, lambda src, dst: True).packets(read_capture(stream))
    out = []
    for raw in frames.frames:
        parsed = FRAME.parse(raw)
        message = decode_frame(raw)
        fields = {name: str(value) for part in (parsed.header, parsed.body.header, parsed.body.fields)
                  for name, value in part.items() if not name.startswith("_")}
        if parsed.body.payload is not None:
            fields["payload"] = bytes(parsed.body.payload).hex()
            assert bytes(message.payload) == parsed.body.payload  # type: ignore[union-attr]
        assert (message.seq, message.writer_id, message.reader_id) == (
            parsed.body.header.seq, parsed.body.fields.writer_id, parsed.body.fields.reader_id)
        out.append(fields)
    return out


def test_tshark_shows_every_field_of_every_frame_as_the_decoder_reads_it(tshark: str) -> None:
    decoded = _decoded(FIXTURE)
    assert len(decoded) == 88  # 4 connections of Spark's real-time mode: 38 DATA, 42 CREDIT, 4 + 4 termination
    assert {f["type_id"] for f in decoded} == {"1", "2", "3", "4"}
    assert _dissected(tshark, FIXTURE) == decoded


def test_the_monitor_reads_the_capture_alike_as_pcap_and_as_wiresharks_pcapng(tshark: str, tmp_path: Path) -> None:
    editcap = Path(tshark).with_name("editcap")
    subprocess.run([str(editcap), "-F", "pcapng", str(FIXTURE), str(tmp_path / "capture.pcapng")], check=True,
                   capture_output=True, timeout=60)
    reports = []
    for path in (FIXTURE, tmp_path / "capture.pcapng"):
        with open(path, "rb") as stream:
            reports.append(observe(read_capture(stream), connection_filter("", "")).to_json())
    assert reports[0] == reports[1]
    assert reports[0]["violations"] == 0 and len(reports[0]["connections"]) == 4
    assert sum(c["records"] for c in reports[0]["connections"]) == 300  # the rows the query delivered
