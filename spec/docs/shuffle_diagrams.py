"""The state-machine section of the generated specification: Mermaid diagrams and tables from
:mod:`spec.shuffle.transitions`, so the document cannot disagree with the machines."""

from __future__ import annotations

from typing import Any

from spec.shuffle.records import RECORD_LENGTH
from spec.shuffle.steps import UsageError
from spec.shuffle.transitions import READER_TABLE, WRITER_TABLE, Table
from spec.shuffle.writer import TCP_RECEIVE_BUFFER, TCP_SEND_BUFFER


def mermaid(table: Table[Any, Any]) -> str:
    """A ``stateDiagram-v2`` of the listed transitions; parallel edges share one arrow."""
    edges: dict[tuple[str, str], list[str]] = {}
    for (state, event), target in table.transitions.items():
        edges.setdefault((state.value, target.value), []).append(event.value)
    lines = ["```mermaid", "stateDiagram-v2", f"    [*] --> {table.initial.value}"]
    for (source, target), events in edges.items():
        lines.append(f"    {source} --> {target}: {', '.join(events)}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def failure_rows(table: Table[Any, Any]) -> str:
    """Every pair that fails the machine: the listed failures and the peer-caused rejections."""
    rows = [f"| {s.value} | {e.value} | `{cls.condition}` | listed |" for (s, e), cls in table.failures.items()]
    rows += [f"| {s.value} | {e.value} | `{getattr(cls, 'condition', cls.__name__)}` | not listed |"
             for (s, e), cls in table.rejections.items() if cls is not UsageError]
    return "| state | event | error | |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


def event_rows(table: Table[Any, Any]) -> str:
    """What each event of the table means."""
    return "| event | meaning |\n|---|---|\n" + "".join(f"| {e.value} | {text} |\n" for e, text in table.meanings.items())


def state_machines() -> str:
    """The whole section."""
    return (
        '<a id="state-machines"></a>\n## State machines\n\n'
        "Both sides are sans-IO machines (`spec/shuffle/writer.py`, `spec/shuffle/reader.py`): each input "
        "(a decoded message, a connection event, a record, a completed socket write, a consumer release, "
        "time) returns the messages to send, the events to surface and the next deadline. Each channel "
        "follows the table below; a pair not listed is an error: the peer's fault where the failure table "
        "says so, otherwise a misuse of the machine by its caller (`UsageError`). The machines move a "
        "channel only by looking its pair up in these tables (`spec/shuffle/transitions.py`), so every "
        "failure reports the error the failure table names for its pair. After a failure a machine "
        "ignores all input.\n\n"
        '<a id="writer-machine"></a>\n### Writer: one channel per reader\n\n'
        "The reader's first CREDIT binds the channel to its connection; every credit after it is advisory "
        "(Spark 4.3.0 ignores it). Records written before the bind are buffered and flushed as usual; the "
        "resulting DATA (already carrying sequence numbers) wait in order and are sent right after the bind.\n\n"
        '<a id="exclusive-binding"></a>\n'
        "Binding is exclusive (SHOULD; Spark 4.3.0 keeps the first binding and silently ignores the rest, "
        "and never compares the ids a message names). A reader id is claimed once: a CREDIT or "
        "TERMINATION_ACK for a reader whose channel is bound to another live connection fails the writer "
        "with `READER_ALREADY_BOUND`, so the real reader fails with that root cause instead of hanging behind "
        "an impostor that bound first. A connection carries one (writer, reader) pair, named by the ids "
        "Spark keeps constant on it (below): a message naming others fails with `MISMATCHED_CHANNEL_IDS` "
        "before anything of it is used.\n\n"
        '<a id="channel-ids"></a>\n'
        "Two identities name a writer. Its **directory id** is the key it is registered under in the "
        "directory (Spark 4.3.0: the map task id, `registerShuffleWriterTask(shuffleId, mapId, location)`); "
        "a reader learns it there and names it in its handshake CREDIT only (`createClientAsync((int) mapId, "
        "host, port)`, whose `StreamingShuffleClientHandler` sends `CREDIT(mapId, reader, 1)` in "
        "`channelActive`). Its **partition id** (`TaskContext.partitionId`) is what it names itself in every "
        "DATA and TERMINATION_CONTROL; Spark's reader echoes the received message's writer id in the CREDIT "
        "after each DATA and in the TERMINATION_ACK. The two agree only in an application's first job (the "
        "map task id counts every task of the application). The reader id (the reduce partition) is the "
        "same in every message of a connection, both ways. Spark compares none of these ids: its writer "
        "binds a connection by the CREDIT's reader id alone and counts an ack by its reader id, its reader "
        "never looks at the ids it receives. The spec checks what Spark keeps constant, so everything Spark "
        "sends passes: at a reader, every DATA and TERMINATION_CONTROL names this reader and the partition "
        "id the connection's first of them named; at a writer, the handshake CREDIT names its directory id, "
        "every later CREDIT and the ack its partition id, and all of them the reader the connection bound. "
        "Errors a reader reports about a connection (`STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER`) name the "
        "writer by its directory id, as Spark's client handler does.\n\n"
        + mermaid(WRITER_TABLE) + "\n" + event_rows(WRITER_TABLE) + "\n"
        + '<a id="writer-buffers"></a>\n#### Buffers and flushing\n\n'
        "One buffer per reader; a record is appended whole. After each record the buffer is sent when it "
        "holds at least `networkBufferSize * 9 / 10` bytes (integer division) or when it is at least "
        "`networkBufferMaxWaitTimeMs` old. A periodic flush every `networkBufferMaxWaitTimeMs` sends every "
        "non-empty buffer whatever its age (the machine's deadline).\n\n"
        '<a id="writer-memory"></a>\n#### Memory permits\n\n'
        f"Capacity `max(R * networkBufferSize * 2, writerMaxMemory - R * ({TCP_SEND_BUFFER} + {TCP_RECEIVE_BUFFER}))` "
        "bytes. Opening a buffer takes `networkBufferSize` permits, returned when the socket write of its DATA "
        "completes. Without a free permit the writer flushes every buffer, holds the record and surfaces "
        "`ProducerBlocked`; when permits return it buffers the record and surfaces `ProducerUnblocked`. A record "
        "larger than a buffer still takes one buffer's permits (the memory bound is best effort for it).\n\n"
        '<a id="sequence-numbers"></a>\n### Sequence numbers\n\n'
        "Per (writer, reader) from 0, assigned when a buffer becomes a DATA; TERMINATION_CONTROL takes the "
        "next one. The reader requires exactly last+1 (from -1) for every message it receives, checked before "
        "its type is looked at, and fails with `STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER` (messageType, "
        "writerId, readerId, expSeqNum, actSeqNum) on a duplicate, gap or reorder.\n\n"
        '<a id="termination"></a>\n### Termination\n\n'
        "When its input ends the writer flushes every buffer, then sends TERMINATION_CONTROL to every reader "
        "(queued for a reader not yet bound). The reader answers with TERMINATION_ACK whose seq is the "
        "terminator's. The writer checks an ack's seq against the last seq it sent on that channel before "
        "counting it, ignores duplicates, and completes when every reader acknowledged. The reader's stream "
        "ends when every writer terminated and every ack's write completed. Spark waits for acks forever; the "
        "machine offers an opt-in ack timeout (`STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT`).\n\n"
        '<a id="reader-machine"></a>\n### Reader: one channel per writer\n\n'
        "On connect the reader sends CREDIT(writer, reader, 1), and one more after every DATA.\n\n"
        + mermaid(READER_TABLE) + "\n" + event_rows(READER_TABLE) + "\n"
        + '<a id="checksums"></a>\n#### Checksums\n\n'
        "With `checksum.enabled` the reader compares the DATA's 64-bit checksum field with the CRC32C of "
        "its payload before surfacing any record; a mismatch fails it with "
        "`STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED`.\n\n"
        '<a id="reader-quota"></a>\n#### Byte quota\n\n'
        "Each writer gets `readerMaxMemory / M` bytes (integer division, at least 1, as Spark's `perWriterByteLimit`). A surfaced DATA charges its whole "
        "body (32 + data_size); at zero or below the reader surfaces `PauseReading` for that writer, and "
        "`ResumeReading` once the consumer's releases bring it above zero.\n\n"
        '<a id="record-framing"></a>\n### Records inside a DATA payload\n\n'
        f"A payload is a run of records, each a big-endian int{RECORD_LENGTH.size * 8} length followed by "
        "that many bytes (Spark's UnsafeRow serializer stream). A record is never split across DATA "
        "messages; one DATA usually carries many.\n\n"
        '<a id="failures"></a>\n### Failures\n\n'
        "The pairs that fail a machine, and the error each reports:\n\n"
        "Writer channel:\n\n" + failure_rows(WRITER_TABLE) + "\nReader channel:\n\n" + failure_rows(READER_TABLE)
    )
