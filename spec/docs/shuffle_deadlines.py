"""The "Deadlines on a connection" section of docs/spec/shuffle.md: what bounds each phase of a
connection, and the decision that a bound connection has no idle deadline (issue 38), with why.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Deadline(NamedTuple):
    phase: str
    deadline: str
    ends_with: str


DEADLINES: Final[tuple[Deadline, ...]] = (
    Deadline(
        "A reader connecting to a writer",
        "The reader's connect timeout (opt-in in the machine, `connect_timeout`, an addition: Spark keeps trying; "
        "the runtime sets 60 s): failed attempts may span no longer.",
        "`STREAMING_SHUFFLE_WRITER_UNREACHABLE` at the reader."),
    Deadline(
        "Accepted, not yet bound (writer side: until the first CREDIT names a reader; reader side: until the "
        "authentication handshake completes)",
        "The bind timeout (the runtime's `spark.streamwire.shuffle.bindTimeoutMs`, Spark's `spark.network.timeout` "
        "by default, 120 s) and the cap on connections waiting at once (the newest evicts the oldest), "
        "`spec/admission.py`.",
        "The connection is closed: a reader sees `CONNECTION_CLOSED_BEFORE_TERMINATION`, or retries it as a "
        "failed connect (then `STREAMING_SHUFFLE_WRITER_UNREACHABLE`)."),
    Deadline(
        "A writer waiting for a reader to bind its channel",
        "`spark.shuffle.streaming.writerConnectionTimeout` (1 h; -1 waits forever).",
        "`STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT`."),
    Deadline(
        "Bound, records flowing (OPEN)",
        "**None, on either end.**",
        "Only the peer's close (`CONNECTION_CLOSED_BEFORE_TERMINATION`), a failed write "
        "(`STREAMING_SHUFFLE_SEND_FAILED`), or the task failing."),
    Deadline(
        "Terminating, waiting for the ack",
        "The ack timeout (opt-in, `ack_timeout_ms`; off by default: Spark waits forever).",
        "`STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT`."),
)

NO_IDLE_DEADLINE: Final = (
    "**Why a bound connection has no idle deadline.** The protocol has no keepalive: a writer sends DATA only "
    "when its input gives it records (a real-time stream may give none for hours), and a reader, after its first "
    "CREDIT, sends one CREDIT per DATA and the ack. A quiet producer and a dead peer therefore look the same from the other end, so "
    "any idle deadline would fail healthy quiet streams; and a keepalive would need a message type Spark 4.3.0 does not "
    "have (its codec knows the four above), so the spec cannot add one and still talk to Spark. What an idle deadline would have caught is caught otherwise: a peer configured with another "
    "cipher never gets a valid CREDIT through, so its connection fails on the undecodable bytes at once or never "
    "binds and ends at the bind timeout, with a typed error either way; a peer process that dies has its "
    "connection closed by its kernel (`CONNECTION_CLOSED_BEFORE_TERMINATION`); a peer host that vanishes "
    "without a close is found by TCP when this end writes (a write never acknowledged fails after the kernel's "
    "retransmissions: `STREAMING_SHUFFLE_SEND_FAILED`), else by Spark's task failure, and in this project's "
    "runtime by the cluster provider's failure detector, which declares the node FAIL "
    "(`STREAMING_SHUFFLE_WRITER_NODE_FAILED`, `STREAMING_SHUFFLE_READER_NODE_FAILED`).")


def deadlines() -> str:
    """The whole section."""
    rows = "".join(f"| {d.phase} | {d.deadline} | {d.ends_with} |\n" for d in DEADLINES)
    return (
        '<a id="deadlines"></a>\n## Deadlines on a connection\n\n'
        "What bounds each phase of a connection, in the order a connection meets them.\n\n"
        "| phase | deadline | what it ends with |\n|---|---|---|\n" + rows + "\n" + NO_IDLE_DEADLINE + "\n"
    )
