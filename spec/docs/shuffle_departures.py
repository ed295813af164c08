"""The "Departures from Spark 4.3.0" section of docs/spec/shuffle.md: every place the spec decides
otherwise than Spark's classes, once, with why everything Spark sends still passes.

Each row is either what Spark does (said so) or a stricter rule; a stricter rule must accept every
conversation Spark's own writer and reader hold in normal operation, and the argument names the
bytecode that shows they never send what the rule refuses. The conformance suite grades each stricter
rule SHOULD, so a run against Spark's own handlers (``--target spark-jvm``) reports them as
``NON_STRICT``, never as a failure.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Departure(NamedTuple):
    rule: str
    spark: str
    spec: str
    why: str


DEPARTURES: Final[tuple[Departure, ...]] = (
    Departure(
        "Channel ids ([channel-ids](#channel-ids)): `MISMATCHED_CHANNEL_IDS`",
        "Compares no id: the writer binds by the CREDIT's reader id, counts an ack by its reader id; the "
        "reader never looks at the ids it receives.",
        "Checks what Spark keeps constant on a connection: the reader id; the handshake CREDIT naming the "
        "directory id (map task id); every DATA and TERMINATION_CONTROL naming the partition id the first "
        "of them named, echoed by later CREDITs and the ack.",
        "The reader id is a final field of `StreamingShuffleClientHandler` and the writer answers on the "
        "channel bound to it; the partition id is `StreamingShuffleWriter`'s final `shuffleWriterId`; the "
        "handshake names `(int) mapId` (`createClientAsync`), every later CREDIT `DataMessage.shuffleWriterId` "
        "and the ack `TerminationControlMessage.shuffleWriterId`. A later job's conversation passes (trace "
        "vectors `*-second-job-*`; both directions against Spark's handlers with map id 11 for partition 3; "
        "a 6-batch capture of real-time mode)."),
    Departure(
        "Exclusive binding ([exclusive-binding](#exclusive-binding)): `READER_ALREADY_BOUND`",
        "`futureClients[readerId].complete(client)`: the first connection to name a reader keeps it, later "
        "claimants are ignored and wait forever.",
        "A CREDIT or ack for a reader bound to another live connection fails the writer.",
        "Spark's reader opens one client per directory entry (`createClientAsync` only for a map id not "
        "already in its map), so a reader id is claimed once per writer; a second live claimant is an "
        "impostor or a zombie attempt, which Spark would leave hanging."),
    Departure(
        "Credits ([writer-machine](#writer-machine))",
        "The writer ignores `num_messages` and every credit after the first; the reader grants 1 on "
        "connecting and 1 per DATA.",
        "The same: credits are advisory, never gate a DATA (the monitor does not flag a DATA sent with no "
        "credit outstanding, which Spark's writer does).",
        "Not a departure."),
    Departure(
        "An ack before TERMINATION_CONTROL ([termination](#termination)): `STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE`",
        "Counts an ack whose seq matches the last seq sent, terminated or not.",
        "Rejects it.",
        "Spark's reader sends `TerminationAckMessage` only from the `TerminationControlMessage` branch of "
        "`receive`."),
    Departure(
        "DATA or a second TERMINATION_CONTROL after the terminator ([failures](#failures))",
        "Queues it for the consumer.",
        "Rejects it (`STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE`).",
        "Spark's writer flushes every buffer before it sends one TERMINATION_CONTROL per reader, and sends "
        "nothing after it."),
    Departure(
        "A reader's connection closing before its ack ([failures](#failures)): `CONNECTION_CLOSED_BEFORE_TERMINATION`",
        "`StreamingShuffleServerHandler` has no `channelInactive`: noticed at the next failed write, or "
        "never (the writer waits for the ack forever).",
        "The writer fails at once (or, with `readers_may_leave`, the reader leaves).",
        "Spark's reader closes its connections only once its stream ended, after every ack was written; "
        "a close before is a reader task that failed or was stopped."),
    Departure(
        "What follows a rejected DATA ([checksums](#checksums))",
        "The client handler credits every DATA as it arrives (the checksum is verified when the record "
        "iterator takes it) and goes on to acknowledge a later TERMINATION_CONTROL.",
        "Verifies before crediting; a rejected DATA fails the reader, which sends nothing more on any "
        "connection (no CREDIT for it, no ack after it).",
        "They differ only after a corrupt or misnamed DATA, which Spark's writer never sends (it computes "
        "the CRC32C over the very bytes it writes)."),
    Departure(
        "Bytes after a fixed-size body ([common-header](#common-header)): `TRAILING_BYTES`",
        "`decode` ignores them.",
        "Rejects them (the golden vectors flag them `acceptable`).",
        "Spark's encoder sizes every buffer to `headerLength()` and appends only a DATA's payload."),
    Departure(
        "Largest frame per role ([frame](#frame))",
        "One generic limit, 2147483654 bytes (\"Too large frame\").",
        "SHOULD use the largest frame the peer can send (37 bytes at a writer; a reader's bound follows "
        "from the flush threshold and the largest record).",
        "Spark's CREDIT and TERMINATION_ACK frames are 37 and 33 bytes; its DATA never holds more than a "
        "buffer below the threshold plus one record."),
    Departure(
        "Timeouts Spark lacks ([deadlines](#deadlines))",
        "Waits for acks and keeps connecting forever.",
        "Opt-in `STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT` and `STREAMING_SHUFFLE_WRITER_UNREACHABLE`; off by "
        "default.",
        "Off, the machines wait as Spark does."),
    Departure(
        "A replayed auth challenge ([auth.md](auth.md#handshake)): `AUTH_REPLAYED_CHALLENGE`",
        "Answers it with a fresh key pair (the replayer cannot use the session).",
        "Refuses it outright.",
        "Spark's client draws 16 random bytes of salt for every challenge, so it never repeats one; only a "
        "recording played back does."),
)


def departures() -> str:
    """The whole section."""
    rows = "".join(f"| {d.rule} | {d.spark} | {d.spec} | {d.why} |\n" for d in DEPARTURES)
    return (
        '<a id="departures"></a>\n## Departures from Spark 4.3.0\n\n'
        "Every place the spec decides otherwise than Spark 4.3.0's classes, once. Each is what Spark does, "
        "or a stricter rule that accepts every conversation Spark's own writer and reader hold in normal "
        "operation (the last column says why, from the bytecode). The conformance suite grades every "
        "stricter rule SHOULD, so a run against Spark's own handlers (`--target spark-jvm`) reports them "
        "as `NON_STRICT`, never as a failure.\n\n"
        "| rule | Spark 4.3.0 | the spec | why Spark's own traffic passes |\n|---|---|---|---|\n" + rows)
