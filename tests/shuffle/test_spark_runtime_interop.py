"""The reference RUNTIME's tasks interoperate with Spark 4.3.0's real shuffle handlers, both directions.

Unlike ``test_spark_interop.py`` (scripted peers on the codec), the Python side here is the runtime
itself: a :class:`WriterTask` streams real records to Spark's ``StreamingShuffleClientHandler``, and a
:class:`ReaderTask` reads from Spark's ``StreamingShuffleServerHandler`` (the ``spark-jvm`` target),
checksums on, over many DATA buffers, through the termination handshake. The tasks find each other
through a fixed directory instead of a coordinator, since Spark's side registers nowhere.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Iterator

import pytest
from spark_jvm_support import expect_event, require_jdk

from conformance.shuffle.spark_jvm import SparkJvm
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterStats, WriterTask
from spec.shuffle import coordination
from spec.shuffle import writer as writer_machine
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.codec import decode_frame
from spec.shuffle.messages import CreditMessage, DataMessage, TerminationAckMessage, TerminationControlMessage
from spec.shuffle.records import decode_records, encode_records
from spec.shuffle.settings import ShuffleSettings

pytestmark = pytest.mark.jvm

DEADLINE_S = 60.0
"""Only to end a broken run (JVM start-up on a loaded machine included); nothing asserts on time."""

KEY = coordination.ShuffleKey(0, 0)
WRITER, READER = 3, 0
"""The writer's partition id, which its DATA and TERMINATION_CONTROL name, and the reader's."""
MAP_IDS = pytest.mark.parametrize("map_id", [WRITER, 11], ids=["first-job", "later-job"])
"""The writer's directory id, which a reader's handshake CREDIT names (Spark: the map task id, which
equals the partition id only in an application's first job; docs/spec/shuffle.md#channel-ids)."""
SETTINGS = ShuffleSettings(network_buffer_size=2048, network_buffer_max_wait_time_ms=5, checksum_enabled=True)
"""Small buffers: the records below span many DATA messages."""

RECORDS = [b"record %04d|" % i + bytes(range(i % 97)) for i in range(600)]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkJvm]:
    with SparkJvm(require_jdk()) as target:
        yield target


@MAP_IDS
def test_runtime_writer_task_streams_to_spark_reader(spark: SparkJvm, map_id: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_machine, "GATHER_MIN", 64)  # records of 64 bytes and more are gathered, the rest copied
    directory = StandaloneDirectory()
    task = WriterTask(KEY, WRITER, 1, SETTINGS, directory, directory_id=map_id)
    outcome: list[WriterStats | BaseException] = []

    def run() -> None:
        try:
            outcome.append(task.run((READER, record) for record in RECORDS))
        except BaseException as error:  # noqa: BLE001 - checked below
            outcome.append(error)

    thread = threading.Thread(target=run, name="writer-task")
    thread.start()
    try:
        assert directory.registered.wait(DEADLINE_S)
        (location,) = directory.writers
        assert location.writer_id == map_id
        # Spark's reader: createClientAsync((int) mapId, ...) gives its client handler the map task id
        reader = spark.reader(location.host, location.port, map_id, READER, checksum=True)
        termination = expect_event(reader, "termination", DEADLINE_S)
        expect_event(reader, "ack_written", DEADLINE_S)
    finally:
        thread.join(DEADLINE_S)
    assert not thread.is_alive()
    assert isinstance(outcome[0], WriterStats), outcome  # run() returns only after Spark's ack
    assert directory.failures == []

    delivered = [e for e in reader.events.snapshot() if e["event"] == "data"]
    assert len(delivered) > 5, "the records should span several DATA buffers"
    assert [int(e["seq"]) for e in delivered] == list(range(len(delivered)))
    assert int(termination["seq"]) == len(delivered)  # TERMINATION_CONTROL follows the last DATA
    payloads = [bytes.fromhex(e["payload"]) for e in delivered]
    assert all(int(e["checksum"]) == payload_checksum(p) != 0 for e, p in zip(delivered, payloads))
    assert [r for p in payloads for r in decode_records(p)] == RECORDS
    assert {e["writer_id"] for e in delivered} == {WRITER}
    assert not [e for e in reader.events.snapshot() if e["event"] == "error"]


@MAP_IDS
def test_spark_writer_streams_to_runtime_reader_task(spark: SparkJvm, tmp_path: Path, map_id: int) -> None:
    batches = [RECORDS[i:i + 40] for i in range(0, len(RECORDS), 40)]
    writer = spark.writer(WRITER, 1, checksum=True)
    writer.send_data(READER, encode_records(batches[0]))  # before the bind: Spark queues it
    transcript = tmp_path / "reader.jsonl"
    directory = StandaloneDirectory((coordination.WriterLocation(map_id, "spark-jvm", "127.0.0.1", writer.port),))
    task = ReaderTask(KEY, READER, [map_id], SETTINGS, directory, TaskOptions(transcript_path=str(transcript)))
    received: list[bytes] = []
    outcome: list[BaseException | None] = []

    def consume() -> None:
        try:
            received.extend(task.records())
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - checked below
            outcome.append(error)

    thread = threading.Thread(target=consume, name="reader-task")
    thread.start()
    try:
        expect_event(writer, "bound", DEADLINE_S)
        for batch in batches[1:]:
            writer.send_data(READER, encode_records(batch))
        writer.terminate(READER)
        ack = expect_event(writer, "ack", DEADLINE_S)
        expect_event(writer, "all_acks", DEADLINE_S)
    finally:
        thread.join(DEADLINE_S)
    assert not thread.is_alive()
    assert outcome == [None]
    assert received == RECORDS
    assert (ack["seq"], ack["counted"]) == (str(len(batches)), True)
    assert directory.failures == []

    frames = [(entry["dir"], decode_frame(bytes.fromhex(entry["hex"])))
              for entry in map(json.loads, transcript.read_text().splitlines())]
    data = [m for d, m in frames if d == "in" and isinstance(m, DataMessage)]
    assert [m.seq for m in data] == list(range(len(batches)))
    assert all(m.checksum == payload_checksum(m.payload) != 0 for m in data)  # verified by the reader
    sent = [m for d, m in frames if d == "out"]
    # the handshake names the directory id; every later CREDIT and the ack echo the partition id, as Spark's do
    assert sent == [CreditMessage(writer_id=map_id, reader_id=READER, num_messages=1)] + [
        CreditMessage(writer_id=WRITER, reader_id=READER, num_messages=1)] * len(batches) + [
        TerminationAckMessage(seq=len(batches), writer_id=WRITER, reader_id=READER)]
    assert [m for d, m in frames if d == "in" and isinstance(m, TerminationControlMessage)] == [
        TerminationControlMessage(seq=len(batches), writer_id=WRITER, reader_id=READER)]
