"""Trace vectors of the shuffle machines: what a peer sends, what must come back, or which error.

A trace plays one side (``role`` writer or reader) against a scripted peer: each step is one input
(a message received, a connection event, a record to write, a completed socket write, a consumer
release, time passing) and lists the messages the side must send and the events it must surface
in answer, ending with ``Failed`` (condition and parameters) when the trace is a fault. The replay
(:func:`check_trace_vectors`) feeds the steps to the target and compares every answer.

``python -m conformance.shuffle.vector_traces --write`` regenerates ``traces.json`` from
:data:`SCENARIOS`: each scenario states the error it must end in, and generation refuses a
scenario whose run disagrees, so the golden answers are never taken on the reference's word alone.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Final, Iterator, Mapping, Sequence

from conformance.framework import VectorResult
from conformance.external import declared_capabilities
from conformance.shuffle.vector_exec import (
    ANSWER_TIMEOUT_S,
    RESET,
    TRACES,
    TraceDriverError,
    exec_each,
    missing_capability,
)
from spec.shuffle.jsonform import from_json, to_json
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.records import encode_records
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import (
    Bound,
    Completed,
    Deliver,
    Event,
    Failed,
    PauseReading,
    ProducerBlocked,
    ProducerUnblocked,
    ResumeReading,
    Step,
)
from spec.shuffle.writer import WriterMachine

VECTOR_FILE: Final = Path(__file__).resolve().parent / "vectors" / "traces.json"
SCHEMA_NAME: Final = "traces.schema.json"
TARGETS: Final = ("reference",)
SPEC: Final = "docs/spec/shuffle.md#"

Json = Mapping[str, Any]

NOTES: Final[dict[str, dict[str, str]]] = {
    "Handshake": {"bugType": "Functionality", "description": "The reader's first CREDIT binds the writer's channel; data produced earlier is queued in order and sent after the bind."},
    "Credits": {"bugType": "Functionality", "description": "The reader sends CREDIT(writer, reader, 1) after every DATA; Spark 4.3.0's writer ignores every credit after the first."},
    "SequenceCheck": {"bugType": "ModifiedSequence", "description": "Sequence numbers are per (writer, reader) from 0; the reader requires exactly last+1 for every message and fails with STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER (expected, actual)."},
    "Checksum": {"bugType": "ModifiedChecksum", "description": "CRC32C of each DATA payload is verified before the records are surfaced."},
    "Quota": {"bugType": "Functionality", "description": "Each writer's unconsumed DATA (whole bodies) counts against readerMaxMemory / M; the reader pauses reading at zero and resumes as the consumer releases."},
    "FlushRule": {"bugType": "Functionality", "description": "A buffer is sent when it holds >= 90% of networkBufferSize (integer maths) or is older than networkBufferMaxWaitTimeMs, and by the periodic flush."},
    "Permits": {"bugType": "Functionality", "description": "Each open buffer holds networkBufferSize byte permits until its socket write completes; without a free permit the writer flushes everything and blocks its producer."},
    "Termination": {"bugType": "Functionality", "description": "TERMINATION_CONTROL follows the last DATA; the reader answers TERMINATION_ACK echoing its seq; each side ends only when every peer terminated and every ack was written / received."},
    "AckCheck": {"bugType": "ModifiedSequence", "description": "The writer checks an ack's seq against the last seq it sent before counting it; duplicate acks are ignored."},
    "ConnectionTimeout": {"bugType": "Functionality", "description": "A reader that does not bind within writerConnectionTimeout fails the writer with STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT."},
    "EarlyClose": {"bugType": "Functionality", "description": "A connection that closes before its terminator fails the reader (Spark: 'closed before termination; the writer task likely failed')."},
    "UnexpectedType": {"bugType": "ModifiedType", "description": "A message type the side never receives (CREDIT or ACK at a reader, DATA or TERMINATION_CONTROL at a writer) fails it with Spark's handler text."},
    "RecordFraming": {"bugType": "Functionality", "description": "A DATA payload is a run of records, each a big-endian int32 length and its bytes; records are never split across DATA messages."},
    "StricterThanSpark": {"bugType": "Legacy", "description": "Spark 4.3.0 accepts this (counts an early ack, queues DATA after the terminator, or never notices a reader's close); the reference rejects it. A compatible peer never sends it, so this is a SHOULD."},
    "ChannelIds": {"bugType": "Functionality", "description": "A reader knows a writer by its directory id (Spark: the map task id) and names it in the handshake CREDIT; the writer names itself by its partition id in DATA and TERMINATION_CONTROL, which the reader echoes in later CREDITs and the ack. They differ after an application's first job."},
    "ExclusiveBinding": {"bugType": "Legacy", "description": "A reader id is bound once and a connection carries one (writer, reader) pair: a second claimant, or a message naming another pair, is rejected. Spark 4.3.0 keeps the first binding and never compares the ids, so this is a SHOULD."},
    "OptIn": {"bugType": "Functionality", "description": "Behaviour of an option Spark 4.3.0 does not have (the termination-ack timeout): only for targets that offer it."},
    "Counterexample": {"bugType": "EdgeCase", "description": "A schedule the model checks found while the machines were built (shrunk), kept as a regression."},
}


@dataclass(frozen=True)
class Scenario:
    """One trace to generate: inputs only; the expected answers are recorded from the run."""

    name: str
    comment: str
    role: str
    flags: tuple[str, ...]
    spec_ref: str
    steps: tuple[dict[str, Any], ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    level: str = "MUST"
    error: str | None = None
    error_params: Mapping[str, Any] | None = None
    peers: int = 1
    ack_timeout_ms: int = -1
    writer_ids: tuple[int, ...] | None = None
    """Reader traces: the directory ids of its writers (None: 0..peers-1, as in an application's first job)."""
    directory_id: int | None = None
    """Writer traces: the directory id the writer is registered under (None: its partition id 0)."""


def new_machine(role: str, group: Json) -> WriterMachine | ReaderMachine:
    """The machine under test for a trace group (shuffle 0; writer partition 0 or reader 0)."""
    settings = ShuffleSettings.from_dict(group["settings"])
    if role == "writer":
        return WriterMachine(0, 0, int(group["peers"]), settings, 0.0, int(group.get("ackTimeoutMs", -1)),
                             readers_may_leave=bool(group.get("readersMayLeave")), directory_id=group.get("directoryId"))
    connect_ms = group.get("connectTimeoutMs")
    return ReaderMachine(0, 0, group.get("writerIds", list(range(int(group["peers"])))), settings, 0.0,
                         connect_timeout=None if connect_ms is None else int(connect_ms) / 1000.0)


def apply_input(machine: WriterMachine | ReaderMachine, step: Json) -> Step:
    """Feed one trace input to a machine (the target adapter of the reference)."""
    now = int(step.get("t", 0)) / 1000.0
    kind = step["input"]
    peer = int(step.get("peer", 0))
    if isinstance(machine, WriterMachine):
        conn = f"c{peer}"
        if kind == "accepted":
            return machine.connection_accepted(conn, now)
        if kind == "received":
            return machine.received(step.get("conn", conn), from_json(step["message"]), now)
        if kind == "write":
            return machine.write(peer, bytes.fromhex(step["record"]), now)
        if kind == "finish":
            return machine.finish(now)
        if kind == "sendCompleted":
            return machine.send_completed(peer, int(step["seq"]), now)
        if kind == "sendFailed":
            return machine.send_failed(peer, int(step["seq"]), step["cause"], now)
        if kind == "closed":
            return machine.connection_closed(step.get("conn", conn), now)
        if kind == "readerLeft":
            return machine.reader_left(peer, now)
        if kind == "tick":
            return machine.tick(now)
    else:
        if kind == "connected":
            return machine.connected(peer, now)
        if kind == "connectFailed":
            return machine.connect_failed(peer, str(step.get("cause", "")), now)
        if kind == "received":
            return machine.received(peer, from_json(step["message"]), now)
        if kind == "sendCompleted":
            return machine.send_completed(peer, int(step["seq"]), now)
        if kind == "sendFailed":
            return machine.send_failed(peer, int(step["seq"]), step["cause"], now)
        if kind == "release":
            return machine.release(peer, int(step["seq"]), now)
        if kind == "closed":
            return machine.connection_closed(peer, now)
        if kind == "tick":
            return machine.tick(now)
    raise ValueError(f"unknown {type(machine).__name__} input {kind!r}")


def event_json(event: Event) -> dict[str, Any]:
    """An event as traces record it."""
    if isinstance(event, Deliver):
        return {"event": "Deliver", "writer": event.writer_id, "seq": str(event.seq),
                "records": [r.hex() for r in event.records]}
    if isinstance(event, Failed):
        params = {k: v for k, v in event.error.to_json().items() if k not in ("error", "message")}
        return {"event": "Failed", "error": event.error.condition, "errorParams": params}
    if isinstance(event, Bound):
        return {"event": "Bound", "reader": event.reader_id}
    if isinstance(event, (PauseReading, ResumeReading)):
        return {"event": type(event).__name__, "writer": event.writer_id}
    assert isinstance(event, (Completed, ProducerBlocked, ProducerUnblocked))
    return {"event": type(event).__name__}


def answer_json(step: Step, deadline: bool = False) -> dict[str, Any]:
    """A step as a trace answer; with ``deadline``, also the instant (ms) the machine next needs a tick."""
    answer: dict[str, Any] = {"sends": [{"to": s.peer, "message": to_json(s.message)} for s in step.sends],
                              "events": [event_json(e) for e in step.events]}
    if deadline:
        answer["deadline"] = None if step.deadline is None else round(step.deadline * 1000, 3)
    return answer


def run_trace(role: str, group: Json, steps: Sequence[Json]) -> list[dict[str, Any]]:
    """The answers of the reference machine to every step."""
    machine = new_machine(role, group)
    return [answer_json(apply_input(machine, step), bool(group.get("deadlines"))) for step in steps]


# -- scenarios ------------------------------------------------------------------------------------

SMALL: Final = {"network_buffer_size": 16, "network_buffer_max_wait_time_ms": 50, "writer_max_memory": 1,
                "reader_max_memory": 200, "writer_connection_timeout_ms": 1000}


def _m(message: Message) -> dict[str, Any]:
    return to_json(message)


def data(seq: int, *records: bytes, writer: int = 0, reader: int = 0, checksum: int | None = None,
         peer: int | None = None) -> dict[str, Any]:
    """DATA naming partition ``writer``, received on the connection to directory id ``peer`` (the same by default)."""
    payload = encode_records(records)
    crc = payload_checksum(payload) if checksum is None else checksum
    message = DataMessage(seq=seq, writer_id=writer, reader_id=reader, checksum=crc, payload=payload)
    return {"input": "received", "peer": writer if peer is None else peer, "message": _m(message)}


def tc(seq: int, writer: int = 0, peer: int | None = None) -> dict[str, Any]:
    return {"input": "received", "peer": writer if peer is None else peer,
            "message": _m(TerminationControlMessage(seq=seq, writer_id=writer, reader_id=0))}


def credit(reader: int = 0, writer: int = 0) -> dict[str, Any]:
    return {"input": "received", "peer": reader, "message": _m(CreditMessage(writer_id=writer, reader_id=reader,
                                                                             num_messages=1))}


def ack(seq: int, reader: int = 0, writer: int = 0) -> dict[str, Any]:
    return {"input": "received", "peer": reader, "message": _m(TerminationAckMessage(seq=seq, writer_id=writer,
                                                                                     reader_id=reader))}


def _seq_error(kind: str, expected: int, actual: int, writer: int = 0) -> dict[str, Any]:
    return dict(error="STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER", error_params={
        "messageType": kind, "writerId": str(writer), "readerId": "0", "expSeqNum": str(expected), "actSeqNum": str(actual)})


CONNECT = {"input": "connected", "peer": 0}
R = "reader"
W = "writer"
DATA_T, TC_T, ACK_T = "DATA_MESSAGE_UNSAFE_ROW", "TERMINATION_CONTROL_MESSAGE", "TERMINATION_ACK_MESSAGE"

SCENARIOS: Final[tuple[Scenario, ...]] = (
    # reader under test
    Scenario("reader-handshake", "the reader sends CREDIT(writer, reader, 1) as soon as it is connected", R,
             ("Handshake",), "reader-machine", (CONNECT,), SMALL),
    Scenario("reader-happy-path", "DATA 0, DATA 1, TERMINATION_CONTROL 2: records surfaced in order, a CREDIT after each DATA, ACK echoing 2, end of stream once the ack is written",
             R, ("Credits", "Termination", "RecordFraming"), "reader-machine",
             (CONNECT, data(0, b"a", b"bc"), data(1, b""), tc(2), {"input": "sendCompleted", "peer": 0, "seq": "2"}), SMALL),
    Scenario("reader-empty-stream", "TERMINATION_CONTROL 0 with no data: ACK 0, then end of stream", R,
             ("Termination",), "reader-machine", (CONNECT, tc(0), {"input": "sendCompleted", "peer": 0, "seq": "0"}), SMALL),
    Scenario("reader-no-end-before-ack-written", "the stream does not end when TERMINATION_CONTROL arrives, only after the ack's write completes", R,
             ("Termination",), "reader-machine", (CONNECT, tc(0)), SMALL),
    Scenario("reader-waits-for-every-writer", "two writers: the stream ends only after both terminated and both acks were written", R,
             ("Termination",), "reader-machine",
             (CONNECT, {"input": "connected", "peer": 1}, tc(0), {"input": "sendCompleted", "peer": 0, "seq": "0"},
              data(0, b"x", writer=1), tc(1, writer=1), {"input": "sendCompleted", "peer": 1, "seq": "1"}), SMALL, peers=2),
    Scenario("reader-duplicate-data", "DATA 0 twice: the duplicate fails the reader (expected 1, actual 0)", R,
             ("SequenceCheck",), "sequence-numbers", (CONNECT, data(0, b"a"), data(0, b"a")), SMALL, **_seq_error(DATA_T, 1, 0)),
    Scenario("reader-gap", "DATA 0 then DATA 2: a missing message fails the reader (expected 1, actual 2)", R,
             ("SequenceCheck",), "sequence-numbers", (CONNECT, data(0, b"a"), data(2, b"c")), SMALL, **_seq_error(DATA_T, 1, 2)),
    Scenario("reader-first-seq-not-zero", "the first DATA must carry seq 0", R, ("SequenceCheck",), "sequence-numbers",
             (CONNECT, data(1, b"a")), SMALL, **_seq_error(DATA_T, 0, 1)),
    Scenario("reader-reorder", "DATA 1 before DATA 0 fails the reader, and DATA 1 is not surfaced", R, ("SequenceCheck",),
             "sequence-numbers", (CONNECT, data(1, b"b"), data(0, b"a")), SMALL, **_seq_error(DATA_T, 0, 1)),
    Scenario("reader-missing-at-end", "DATA 0 then TERMINATION_CONTROL 2: the missing DATA 1 is caught at the terminator", R,
             ("SequenceCheck", "Termination"), "sequence-numbers", (CONNECT, data(0, b"a"), tc(2)), SMALL, **_seq_error(TC_T, 1, 2)),
    Scenario("reader-duplicate-termination", "a second TERMINATION_CONTROL with the same seq fails the reader", R,
             ("SequenceCheck", "Termination"), "sequence-numbers", (CONNECT, tc(0), tc(0)), SMALL, **_seq_error(TC_T, 1, 0)),
    Scenario("reader-negative-seq", "seq -1 on the first DATA fails the reader (expected 0)", R, ("SequenceCheck",),
             "sequence-numbers", (CONNECT, data(-1, b"a")), SMALL, **_seq_error(DATA_T, 0, -1)),
    Scenario("reader-checksum-mismatch", "a DATA whose checksum is not its payload's CRC32C fails the reader and is not surfaced", R,
             ("Checksum",), "checksums", (CONNECT, data(0, b"abc", checksum=1)), SMALL,
             error="STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED",
             error_params={"writerId": "0", "expectedChecksum": "1",
                           "calculatedChecksum": str(payload_checksum(encode_records([b"abc"]))), "dataLength": "7"}),
    Scenario("reader-checksum-high-bits", "a checksum with high bits set never matches (Spark compares all 64 bits)", R,
             ("Checksum",), "checksums", (CONNECT, data(0, b"abc", checksum=payload_checksum(encode_records([b"abc"])) + (1 << 32))), SMALL,
             error="STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED",
             error_params={"writerId": "0", "expectedChecksum": str(payload_checksum(encode_records([b"abc"])) + (1 << 32)),
                           "calculatedChecksum": str(payload_checksum(encode_records([b"abc"]))), "dataLength": "7"}),
    Scenario("reader-checksum-disabled", "with checksums disabled a checksum of 0 is accepted", R, ("Checksum",), "checksums",
             (CONNECT, data(0, b"abc", checksum=0)), {**SMALL, "checksum_enabled": False}),
    Scenario("reader-quota-pause-resume", "quota 100 per writer: two 39-byte DATA bodies leave 22, a third pauses reading; releasing one resumes it", R,
             ("Quota",), "reader-quota",
             (CONNECT, data(0, b"a" * 3), data(1, b"b" * 3), data(2, b"c" * 3),
              {"input": "release", "peer": 0, "seq": "0"}), {**SMALL, "reader_max_memory": 100}),
    Scenario("reader-quota-split", "readerMaxMemory 100 over two writers is 50 each: one 39-byte body leaves 11, a second pauses that writer only", R,
             ("Quota",), "reader-quota",
             (CONNECT, {"input": "connected", "peer": 1}, data(0, b"a" * 3), data(1, b"b" * 3), data(0, b"c" * 3, writer=1)),
             {**SMALL, "reader_max_memory": 100}, peers=2),
    Scenario("reader-data-for-another-writer", "after a DATA naming partition 0, a DATA naming writer 1 on the same connection fails the reader; nothing of it is surfaced or credited", R,
             ("ExclusiveBinding",), "channel-ids", (CONNECT, data(0, b"a"), data(1, b"b", writer=1, peer=0)), SMALL,
             level="SHOULD", error="MISMATCHED_CHANNEL_IDS",
             error_params={"messageType": DATA_T, "writerId": "1", "readerId": "0", "expectedWriterId": "0", "expectedReaderId": "0"}),
    Scenario("reader-termination-for-another-reader", "a TERMINATION_CONTROL naming reader 2 is not acknowledged: it fails the reader", R,
             ("ExclusiveBinding", "Termination"), "exclusive-binding",
             (CONNECT, {"input": "received", "peer": 0, "message": _m(TerminationControlMessage(seq=0, writer_id=0, reader_id=2))}),
             SMALL, level="SHOULD", error="MISMATCHED_CHANNEL_IDS",
             error_params={"messageType": TC_T, "writerId": "0", "readerId": "2", "expectedWriterId": "0", "expectedReaderId": "0"}),
    Scenario("reader-close-before-termination", "the writer's connection closes before TERMINATION_CONTROL: the reader fails instead of waiting", R,
             ("EarlyClose",), "failures", (CONNECT, data(0, b"a"), {"input": "closed", "peer": 0}), SMALL,
             error="CONNECTION_CLOSED_BEFORE_TERMINATION", error_params={"role": "writer", "peerId": "0"}),
    Scenario("reader-close-after-termination", "a close after TERMINATION_CONTROL is normal", R, ("EarlyClose", "Termination"),
             "failures", (CONNECT, tc(0), {"input": "closed", "peer": 0}, {"input": "sendCompleted", "peer": 0, "seq": "0"}), SMALL),
    Scenario("reader-ack-write-fails", "the connection breaks while the TERMINATION_ACK is being written: the reader fails instead of waiting for a completion that never comes", R,
             ("Termination", "Counterexample"), "failures",
             (CONNECT, tc(0), {"input": "closed", "peer": 0},
              {"input": "sendFailed", "peer": 0, "seq": "0", "cause": "java.nio.channels.ClosedChannelException"}), SMALL,
             error="STREAMING_SHUFFLE_SEND_FAILED",
             error_params={"what": "termination acknowledgment", "role": "writer", "peerId": "0",
                           "cause": "java.nio.channels.ClosedChannelException"}),
    Scenario("reader-credit-unexpected", "a CREDIT arriving at a reader fails it (after the sequence check passes)", R,
             ("UnexpectedType",), "failures", (CONNECT, {"input": "received", "peer": 0,
                                                         "message": _m(CreditMessage(writer_id=0, reader_id=0,
                                                                                     num_messages=1, seq=0))}), SMALL,
             error="STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE",
             error_params={"handler": "ShuffleClientHandler", "messageType": "CREDIT_CONTROL_MESSAGE"}),
    Scenario("reader-ack-seq-checked-first", "a TERMINATION_ACK arriving at a reader is caught by the sequence check first", R,
             ("UnexpectedType", "SequenceCheck"), "failures", (CONNECT, data(0, b"a"), {
                 "input": "received", "peer": 0, "message": _m(TerminationAckMessage(seq=5, writer_id=0,
                                                                                     reader_id=0))}),
             SMALL, **_seq_error(ACK_T, 1, 5)),
    Scenario("reader-data-after-termination", "DATA after TERMINATION_CONTROL (seq last+1) is rejected", R,
             ("StricterThanSpark", "Termination"), "failures", (CONNECT, tc(0), data(1, b"a")), SMALL, level="SHOULD",
             error="STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE",
             error_params={"handler": "ShuffleClientHandler", "messageType": DATA_T}),
    Scenario("reader-records-framing", "one DATA carries many records, including empty ones", R, ("RecordFraming",), "record-framing",
             (CONNECT, data(0, b"", b"x", b"yz" * 4, b"")), SMALL),
    # writer under test
    Scenario("writer-queues-before-bind", "records written before the reader binds are sent in order, right after its first CREDIT", W,
             ("Handshake", "FlushRule"), "writer-machine",
             ({"input": "accepted"}, {"input": "write", "record": "6161616161616161616161", "t": 1}, credit()), SMALL),
    Scenario("writer-flush-at-90-percent", "networkBufferSize 16: 14 framed bytes (90%, integer maths) flush at once; 13 do not", W,
             ("FlushRule",), "writer-buffers",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "00" * 10}, {"input": "write", "record": "00" * 9}), SMALL),
    Scenario("writer-flush-by-age", "a buffer older than networkBufferMaxWaitTimeMs is sent with the next record", W,
             ("FlushRule",), "writer-buffers",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "01", "t": 0}, {"input": "write", "record": "02", "t": 60}), SMALL),
    Scenario("writer-periodic-flush", "the periodic flush sends a non-empty buffer at its deadline", W, ("FlushRule",), "writer-buffers",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "01", "t": 10}, {"input": "tick", "t": 50}), SMALL),
    Scenario("writer-blocks-without-permits", "one reader, networkBufferSize 16: permits for two buffers; the third blocks the producer until a write completes", W,
             ("Permits",), "writer-memory",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "00" * 12}, {"input": "write", "record": "00" * 12},
              {"input": "write", "record": "00" * 12}, {"input": "sendCompleted", "seq": "0"}), SMALL),
    Scenario("writer-termination", "finish: last flush, then TERMINATION_CONTROL with the next seq; the ack completes the writer", W,
             ("Termination",), "termination",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "01"}, {"input": "finish"},
              {"input": "sendCompleted", "seq": "0"}, ack(1)), SMALL),
    Scenario("writer-termination-empty", "with no data the terminator carries seq 0", W, ("Termination",), "termination",
             ({"input": "accepted"}, credit(), {"input": "finish"}, ack(0)), SMALL),
    Scenario("writer-wrong-ack-seq", "an ack whose seq is not the terminator's fails the writer before it counts", W,
             ("AckCheck",), "termination",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "01"}, {"input": "finish"}, ack(0)), SMALL,
             error="STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER",
             error_params={"messageType": ACK_T, "writerId": "0", "readerId": "0", "expSeqNum": "1", "actSeqNum": "0"}),
    Scenario("writer-duplicate-ack", "a duplicate ack after completion is ignored", W, ("AckCheck",), "termination",
             ({"input": "accepted"}, {"input": "accepted", "peer": 1}, credit(), credit(1), {"input": "finish"}, ack(0), ack(0), ack(0, reader=1)),
             SMALL, peers=2),
    Scenario("writer-waits-for-every-ack", "two readers: one ack is not enough", W, ("Termination",), "termination",
             ({"input": "accepted"}, {"input": "accepted", "peer": 1}, credit(), credit(1), {"input": "finish"}, ack(0)), SMALL, peers=2),
    Scenario("writer-later-credits-ignored", "credits after the first change nothing (advisory in 4.3.0)", W, ("Credits",), "writer-machine",
             ({"input": "accepted"}, credit(), credit(), credit()), SMALL),
    Scenario("writer-connection-timeout", "a reader that never binds fails the writer at writerConnectionTimeout", W,
             ("ConnectionTimeout",), "failures", ({"input": "tick", "t": 999}, {"input": "tick", "t": 1000}), SMALL,
             error="STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT",
             error_params={"shuffleId": "0", "writerId": "0", "timeoutMs": "1000", "readerId": "0"}),
    Scenario("writer-unknown-reader", "a CREDIT naming a reader outside the shuffle fails the writer", W, ("Handshake",), "failures",
             ({"input": "accepted"}, credit(7)), SMALL,
             error="UNKNOWN_PEER_ID", error_params={"role": "reader", "peerId": "7", "count": "1"}),
    Scenario("writer-second-binding", "reader 0 is bound to connection c0; a CREDIT for reader 0 on another connection fails the writer (a reader id is claimed once)", W,
             ("ExclusiveBinding", "Handshake"), "exclusive-binding",
             ({"input": "accepted"}, credit(), {"input": "accepted", "peer": 9}, {**credit(), "peer": 9}), SMALL, level="SHOULD",
             error="READER_ALREADY_BOUND", error_params={"writerId": "0", "readerId": "0"}),
    Scenario("writer-ack-on-another-connection", "a TERMINATION_ACK for reader 0 on a connection other than the one it bound fails the writer", W,
             ("ExclusiveBinding", "AckCheck"), "exclusive-binding",
             ({"input": "accepted"}, credit(), {"input": "finish"}, {"input": "accepted", "peer": 9}, {**ack(0), "peer": 9}), SMALL,
             level="SHOULD", error="READER_ALREADY_BOUND", error_params={"writerId": "0", "readerId": "0"}),
    Scenario("writer-credit-for-another-writer", "a CREDIT naming writer 5 reaches writer 0: the connection does not carry that pair", W,
             ("ExclusiveBinding", "Handshake"), "exclusive-binding",
             ({"input": "accepted"}, {"input": "received", "peer": 0,
                                      "message": _m(CreditMessage(writer_id=5, reader_id=0, num_messages=1))}), SMALL,
             level="SHOULD", error="MISMATCHED_CHANNEL_IDS",
             error_params={"messageType": "CREDIT_CONTROL_MESSAGE", "writerId": "5", "readerId": "0",
                           "expectedWriterId": "0", "expectedReaderId": "0"}),
    Scenario("writer-data-unexpected", "DATA arriving at a writer fails it with Spark's handler text", W, ("UnexpectedType",), "failures",
             ({"input": "accepted"}, {"input": "received", "message": _m(DataMessage(seq=0, writer_id=0, reader_id=0,
                                                                                     checksum=0, payload=b""))}), SMALL,
             error="STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE",
             error_params={"handler": "ShuffleServerHandler", "messageType": DATA_T}),
    Scenario("writer-ack-before-termination", "an ack before TERMINATION_CONTROL (even with a matching seq) is rejected", W,
             ("StricterThanSpark", "AckCheck"), "termination", ({"input": "accepted"}, credit(), ack(-1)), SMALL, level="SHOULD",
             error="STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE",
             error_params={"handler": "ShuffleServerHandler", "messageType": ACK_T}),
    Scenario("writer-reader-closes-early", "a bound reader's connection closing before its ack fails the writer", W,
             ("StricterThanSpark", "EarlyClose"), "failures", ({"input": "accepted"}, credit(), {"input": "closed"}), SMALL, level="SHOULD",
             error="CONNECTION_CLOSED_BEFORE_TERMINATION", error_params={"role": "reader", "peerId": "0"}),
    Scenario("writer-ack-timeout", "with the opt-in ack timeout, a missing ack fails the writer instead of waiting forever", W,
             ("OptIn", "Termination"), "termination", ({"input": "accepted"}, credit(), {"input": "finish", "t": 10}, {"input": "tick", "t": 310}),
             SMALL, level="SHOULD", ack_timeout_ms=300,
             error="STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT",
             error_params={"shuffleId": "0", "writerId": "0", "timeoutMs": "300", "readerId": "0"}),
    Scenario("writer-data-write-fails", "a DATA whose socket write fails fails the writer", W, ("Permits", "EarlyClose"), "failures",
             ({"input": "accepted"}, credit(), {"input": "write", "record": "00" * 12},
              {"input": "sendFailed", "seq": "0", "cause": "Connection reset by peer"}), SMALL,
             error="STREAMING_SHUFFLE_SEND_FAILED",
             error_params={"what": "data", "role": "reader", "peerId": "0", "cause": "Connection reset by peer"}),
    Scenario("writer-finish-before-bind", "finish before the reader binds: data and terminator are queued and sent in order after the bind", W,
             ("Handshake", "Termination", "Counterexample"), "writer-machine",
             ({"input": "write", "record": "01"}, {"input": "finish"}, {"input": "accepted"}, credit(), ack(1)), SMALL),
    # a later job: directory ids (map task ids) differ from partition ids
    Scenario("reader-second-job-ids", "a later job (Spark: map task ids 4 and 5 in the directory, partitions 0 and 1 on the wire): the handshake CREDIT names the directory id, the CREDIT after each DATA and the ack echo the partition id the writer named", R,
             ("ChannelIds", "Credits", "Termination"), "channel-ids",
             ({"input": "connected", "peer": 4}, {"input": "connected", "peer": 5}, data(0, b"a", peer=4),
              data(0, b"b", writer=1, peer=5), tc(1, peer=4), tc(1, writer=1, peer=5),
              {"input": "sendCompleted", "peer": 4, "seq": "1"}, {"input": "sendCompleted", "peer": 5, "seq": "1"}),
             SMALL, peers=2, writer_ids=(4, 5)),
    Scenario("reader-second-job-partition-changes", "a later job: the first DATA on directory id 4's connection names partition 0; a second naming partition 1 fails the reader (Spark's writer names one partition id per connection)", R,
             ("ChannelIds", "ExclusiveBinding"), "channel-ids",
             ({"input": "connected", "peer": 4}, data(0, b"a", peer=4), data(1, b"b", writer=1, peer=4)), SMALL,
             level="SHOULD", error="MISMATCHED_CHANNEL_IDS", writer_ids=(4,),
             error_params={"messageType": DATA_T, "writerId": "1", "readerId": "0", "expectedWriterId": "0", "expectedReaderId": "0"}),
    Scenario("writer-second-job-ids", "a later job (directory id 4, partition 0): the handshake CREDIT names 4 and binds; DATA and TERMINATION_CONTROL name 0; the later CREDIT and the ack naming 0 are accepted", W,
             ("ChannelIds", "Handshake", "Termination"), "channel-ids",
             ({"input": "accepted"}, credit(writer=4), {"input": "write", "record": "01"}, {"input": "tick", "t": 60},
              {"input": "sendCompleted", "seq": "0", "t": 60}, credit(), {"input": "finish", "t": 60}, ack(1, writer=0)),
             SMALL, directory_id=4),
    Scenario("writer-second-job-handshake-names-partition", "a later job (directory id 4, partition 0): a handshake CREDIT naming the partition id is not what a reader learns from the directory", W,
             ("ChannelIds", "ExclusiveBinding", "Handshake"), "channel-ids",
             ({"input": "accepted"}, credit(writer=0)), SMALL, level="SHOULD", error="MISMATCHED_CHANNEL_IDS",
             directory_id=4, error_params={"messageType": "CREDIT_CONTROL_MESSAGE", "writerId": "0", "readerId": "0",
                                           "expectedWriterId": "4", "expectedReaderId": "0"}),
    Scenario("writer-second-job-ack-names-directory-id", "a later job (directory id 4, partition 0): an ack naming the directory id instead of the partition id the TERMINATION_CONTROL named fails the writer", W,
             ("ChannelIds", "ExclusiveBinding", "AckCheck"), "channel-ids",
             ({"input": "accepted"}, credit(writer=4), {"input": "finish"}, ack(0, writer=4)), SMALL, level="SHOULD",
             error="MISMATCHED_CHANNEL_IDS", directory_id=4,
             error_params={"messageType": ACK_T, "writerId": "4", "readerId": "0", "expectedWriterId": "0",
                           "expectedReaderId": "0"}),
)


def _group(s: Scenario) -> dict[str, Any]:
    settings = ShuffleSettings(**{**SMALL, **s.settings}).to_dict()
    group: dict[str, Any] = {"settings": settings, "peers": s.peers}
    if s.ack_timeout_ms >= 0:
        group["ackTimeoutMs"] = s.ack_timeout_ms
    if s.writer_ids is not None:
        group["writerIds"] = list(s.writer_ids)
    if s.directory_id is not None:
        group["directoryId"] = s.directory_id
    return group


def build() -> dict[str, Any]:
    """The whole vector file, answers recorded from the reference and checked against each scenario."""
    tests = []
    for tc_id, s in enumerate(SCENARIOS, start=1):
        group = _group(s)
        answers = run_trace(s.role, group, s.steps)
        failures = [e for a in answers for e in a["events"] if e["event"] == "Failed"]
        declared = [{"event": "Failed", "error": s.error, "errorParams": dict(s.error_params or {})}] if s.error else []
        if failures != declared:
            raise AssertionError(f"scenario {s.name}: the run ended in {failures}, the scenario says {declared}")
        tests.append({
            "tcId": tc_id, "name": s.name, "comment": s.comment, "role": s.role, "level": s.level,
            "flags": list(s.flags), "specRef": SPEC + s.spec_ref, "result": "invalid" if s.error else "valid",
            **group, "steps": [{**step, **answer} for step, answer in zip(s.steps, answers)],
        })
    return {
        "algorithm": "streaming-shuffle-traces", "schema": SCHEMA_NAME, "sparkVersion": "4.3.0",
        "generatorVersion": "1", "numberOfTests": len(tests),
        "header": ["Scripted traces for a writer or a reader under test: each step is one input to the side under",
                   "test (t in ms) followed by the sends and events it must answer with, in order. Writer traces play",
                   "writer partition 0 of shuffle 0 (connections c<peer>), registered under 'directoryId' (default 0);",
                   "reader traces play reader 0, whose writers have the directory ids 'writerIds' (default 0..M-1); 'peers' is R or M;",
                   "'settings' are Spark keys. Sends list the peer id ('to') and the message."],
        "notes": NOTES, "tests": tests,
    }


def _inputs(step: Json) -> dict[str, Any]:
    return {k: v for k, v in step.items() if k not in ("sends", "events")}


Answers = Callable[[Json, Sequence[Json]], Sequence[Mapping[str, Any]]]
"""A target: a trace and its inputs -> the answer to every input."""


def reference_answers(test: Json, inputs: Sequence[Json]) -> list[dict[str, Any]]:
    return run_trace(test["role"], test, inputs)


def check_trace(test: Json, answers_of: Answers = reference_answers) -> str | None:
    """Replay one trace against a target (the reference machine by default); the first difference, or None."""
    try:
        answers = answers_of(test, [_inputs(s) for s in test["steps"]])
    except Exception as exc:  # a target crash is a failed vector, reported with its type
        return f"raised {type(exc).__name__}: {exc}"
    if len(answers) != len(test["steps"]):
        return f"{len(answers)} answers to {len(test['steps'])} inputs"
    for index, (step, answer) in enumerate(zip(test["steps"], answers)):
        expected = {"sends": step["sends"], "events": step["events"]}
        if answer != expected:
            return f"step {index} ({step['input']}): expected {json.dumps(expected)[:300]}, got {json.dumps(answer)[:300]}"
    return None


def check_trace_vectors(target: str) -> Iterator[VectorResult]:
    """``traces.json``: one result per trace, against ``reference`` or an ``exec:`` trace driver (every trace it can
    play by one process when it declares ``trace-reset``, as :func:`~conformance.shuffle.vector_exec.exec_each`
    plays them)."""
    declared = frozenset({"writer", "reader", TRACES})
    answers_of: Answers = reference_answers
    tests = json.loads(VECTOR_FILE.read_text())["tests"]
    if target.startswith("exec:"):
        command = target[len("exec:"):]
        declared = declared_capabilities(command, ANSWER_TIMEOUT_S)
        playable = [t for t in tests if missing_capability(declared, t["role"]) is None]
        answers_of = in_turn(exec_each(command, [(t, [_inputs(s) for s in t["steps"]]) for t in playable],
                                       RESET in declared))
    elif target not in TARGETS:
        raise SystemExit(f"error: unknown shuffle trace target {target!r}; known: {', '.join(TARGETS)}, exec:CMD")
    for test in tests:
        group = f"traces/{test['role']}"
        name = f"tcId {test['tcId']} [{test['level']}] {test['name']}: {test['comment']}"
        lacking = missing_capability(declared, test["role"])
        if lacking is not None:
            yield VectorResult(group, name, False, lacking, unsupported=True)
            continue
        detail = check_trace(test, answers_of)
        yield VectorResult(group, name, detail is None, detail or "")


def in_turn(played: Iterator[list[dict[str, Any]] | TraceDriverError]) -> Answers:
    """Answers taken from ``played`` one trace at a time, in the order the traces are checked; a contract breach is
    raised for the trace it stopped."""
    def answers_of(test: Json, inputs: Sequence[Json]) -> list[dict[str, Any]]:
        answers = next(played)
        if isinstance(answers, TraceDriverError):
            raise answers
        return answers

    return answers_of


def main(argv: Sequence[str]) -> int:
    """``--write`` regenerates traces.json; ``--check`` exits 1 when it is stale."""
    text = json.dumps(build(), indent=1) + "\n"
    if "--write" in argv:
        VECTOR_FILE.write_text(text)
        return 0
    if "--check" in argv:
        return 0 if VECTOR_FILE.exists() and VECTOR_FILE.read_text() == text else 1
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
