"""This project's wire (spec codec, CRC32C, record framing) interoperates with Spark 4.3.0's real handlers.

Spark's StreamingShuffleServerHandler / StreamingShuffleClientHandler run on Spark's transport in a JVM
(the ``spark-jvm`` conformance target); the Python side here is a scripted peer over a real loopback
socket, checksums on. Without a JDK the module is skipped with that reason, except under CI.
"""

from __future__ import annotations

import socket
from typing import Iterator

import pytest
from spark_jvm_support import expect_event, require_jdk

from conformance.shuffle.spark_jvm import Event, SparkJvm, SparkPeer
from spec.shuffle import codec
from spec.shuffle.checksum import payload_checksum, verify_payload
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.records import decode_records, encode_records

pytestmark = pytest.mark.jvm

DEADLINE_S = 30.0
WRITER, READER = 3, 0
BATCHES = [[b"k1=v1", b"k2=v2"], [b""], [bytes(range(256)) * 200]]  # the last one exceeds 32 KiB


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkJvm]:
    with SparkJvm(require_jdk()) as target:
        yield target


class Peer:
    """One framed loopback connection, every read bounded by the deadline."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(DEADLINE_S)
        self.sock = sock
        self.decoder = FrameDecoder()
        self.inbox: list[Message] = []

    def send(self, message: Message) -> None:
        self.sock.sendall(codec.encode_frame(message))

    def receive(self) -> Message:
        while not self.inbox:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("peer closed the connection")
            self.inbox.extend(self.decoder.feed(data))
        return self.inbox.pop(0)


def _event(peer: SparkPeer, name: str) -> Event:
    return expect_event(peer, name, DEADLINE_S)


def _data(seq: int, records: list[bytes]) -> DataMessage:
    payload = encode_records(records)
    return DataMessage(seq=seq, writer_id=WRITER, reader_id=READER, checksum=payload_checksum(payload),
                       payload=payload)


def _serve_spark_reader(spark: SparkJvm) -> tuple[Peer, SparkPeer]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(DEADLINE_S)
        reader = spark.reader("127.0.0.1", server.getsockname()[1], WRITER, READER, checksum=True)
        conn, _ = server.accept()
    return Peer(conn), reader


def test_python_writer_streams_to_spark_reader(spark: SparkJvm) -> None:
    peer, reader = _serve_spark_reader(spark)
    with peer.sock:
        assert peer.receive() == CreditMessage(writer_id=WRITER, reader_id=READER, num_messages=1,
                                               seq=0)  # Spark's handshake
        for seq, records in enumerate(BATCHES):
            peer.send(_data(seq, records))
            assert peer.receive() == CreditMessage(writer_id=WRITER, reader_id=READER, num_messages=1,
                                                   seq=0)  # one credit per DATA
        last = len(BATCHES)
        peer.send(TerminationControlMessage(seq=last, writer_id=WRITER, reader_id=READER))
        assert peer.receive() == TerminationAckMessage(seq=last, writer_id=WRITER, reader_id=READER)
        _event(reader, "ack_written")
    assert _event(reader, "termination")["seq"] == str(last)  # consumed after every DATA before it
    delivered = [e for e in reader.events.snapshot() if e["event"] == "data"]
    assert [int(e["seq"]) for e in delivered] == list(range(len(BATCHES)))
    assert [list(decode_records(bytes.fromhex(e["payload"]))) for e in delivered] == BATCHES
    _event(reader, "closed")  # closing after termination is clean: no error reported
    assert not [e for e in reader.events.snapshot() if e["event"] == "error"]


def test_spark_reader_rejects_a_bad_checksum(spark: SparkJvm) -> None:
    peer, reader = _serve_spark_reader(spark)
    with peer.sock:
        peer.receive()
        good = _data(0, [b"record"])
        peer.send(DataMessage(seq=good.seq, writer_id=WRITER, reader_id=READER, checksum=good.checksum ^ 1,
                              payload=good.payload))
        error = _event(reader, "error")
    assert error["condition"] == "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"
    assert error["parameters"] == {"writerId": str(WRITER), "expectedChecksum": str(good.checksum ^ 1),
                                   "calculatedChecksum": str(good.checksum),
                                   "dataLength": str(len(good.payload))}


def test_spark_writer_streams_to_python_reader(spark: SparkJvm) -> None:
    writer = spark.writer(WRITER, 1, checksum=True)
    writer.send_data(READER, encode_records(BATCHES[0]))  # before the bind: Spark queues it
    with socket.create_connection(("127.0.0.1", writer.port), timeout=DEADLINE_S) as sock:
        peer = Peer(sock)
        peer.send(CreditMessage(writer_id=WRITER, reader_id=READER, num_messages=1))
        _event(writer, "bound")
        for records in BATCHES[1:]:
            writer.send_data(READER, encode_records(records))
        writer.terminate(READER)
        received: list[list[bytes]] = []
        for seq in range(len(BATCHES)):
            message = peer.receive()
            assert isinstance(message, DataMessage) and message.seq == seq
            assert (message.writer_id, message.reader_id) == (WRITER, READER)
            verify_payload(message)
            received.append(list(decode_records(message.payload)))
            peer.send(CreditMessage(writer_id=WRITER, reader_id=READER, num_messages=1))
        assert received == BATCHES
        termination = peer.receive()
        assert termination == TerminationControlMessage(seq=len(BATCHES), writer_id=WRITER, reader_id=READER)
        peer.send(TerminationAckMessage(seq=termination.seq, writer_id=WRITER, reader_id=READER))
        ack = _event(writer, "ack")
        assert (ack["seq"], ack["counted"]) == (str(termination.seq), True)
        _event(writer, "all_acks")


def test_spark_writer_rejects_an_ack_with_the_wrong_seq(spark: SparkJvm) -> None:
    writer = spark.writer(WRITER, 1, checksum=True)
    with socket.create_connection(("127.0.0.1", writer.port), timeout=DEADLINE_S) as sock:
        peer = Peer(sock)
        peer.send(CreditMessage(writer_id=WRITER, reader_id=READER, num_messages=1))
        writer.terminate(READER)
        termination = peer.receive()
        assert termination == TerminationControlMessage(seq=0, writer_id=WRITER,
                                                        reader_id=READER)  # no DATA: TC takes seq 0
        peer.send(TerminationAckMessage(seq=5, writer_id=WRITER, reader_id=READER))
        error = _event(writer, "error")
    assert error["condition"] == "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER"
    assert error["parameters"] == {"messageType": "TERMINATION_ACK_MESSAGE", "writerId": str(WRITER),
                                   "readerId": str(READER), "expSeqNum": "0", "actSeqNum": "5"}
