"""The shuffle checklist along the axes a rule-by-rule walk leaves out (docs/conformance.md, "The shuffle
checklist"): every setting at each edge of its domain, every timer and flush with several peers whose
instants differ, a buffer's age after every way its buffer empties, pairs of rules that meet (a deadline
and a finish, credit and termination, a close and an ack), and equivalent valid inputs (other orders of
independent messages, ids other than 0, a later job).

Rows are traces on the ``exec:`` trace contract's virtual clock, as in :mod:`.derived_cases`: each row's
deciding steps show what its rule says, and every answer must equal the spec machines' answer to the same
input (with ``deadlines`` declared, the instant the target next needs a tick too).
A case holds at most four rows (one trace-driver process each), so that it stays well inside the 15 s a
case gets in ``conformance sensitivity`` on a loaded machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from conformance.framework import Level
from conformance.shuffle.suite.deadline_cases import CONNECT_TIMEOUT
from conformance.shuffle.suite.derived_cases import (
    CONNECT_FAILED,
    N,
    SOCKETS,
    TIMEOUT_MS,
    WAIT_MS,
    Derived,
    Expect,
    Json,
    Row,
    at,
    bind,
    event,
    failed,
    no_event,
    nothing,
    reader_trace,
    sends,
    tick,
    write,
    writer_trace,
)
from conformance.shuffle.vector_traces import ack, credit, data, tc
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.errors import (
    ChecksumVerificationFailed,
    MismatchedChannelIds,
    TerminationAckTimeout,
    WriterConnectionTimeout,
    WriterUnreachable,
)
from spec.shuffle.jsonform import to_json
from spec.shuffle.messages import CreditMessage
from spec.shuffle.reader import DATA_HEADER_LENGTH
from spec.shuffle.records import encode_records


@dataclass(frozen=True, slots=True)
class Then:
    """A deciding step: the input and what its answer must show."""

    step: Json
    expect: Expect
    text: str


def script(*parts: Json | tuple[Json, ...] | Then) -> tuple[tuple[Json, ...], tuple[tuple[int, Expect, str], ...]]:
    """A row's steps and deciding steps from inputs in order (a :class:`Then` is an input that decides)."""
    steps: list[Json] = []
    expect: list[tuple[int, Expect, str]] = []
    for part in parts:
        if isinstance(part, Then):
            expect.append((len(steps), part.expect, part.text))
            steps.append(part.step)
        elif isinstance(part, tuple):
            steps.extend(part)
        else:
            steps.append(part)
    return tuple(steps), tuple(expect)


def row(rule: str, header: Json, *parts: Json | tuple[Json, ...] | Then) -> Row:
    return Row(rule, header, *script(*parts))


def sends_to(peer: int, kind: str = "DATA") -> Expect:
    """One message of ``kind`` to ``peer`` among the answer's sends, and none of that kind to another peer."""
    return lambda answer: [s["to"] for s in answer["sends"] if s["message"]["type"].startswith(kind)] == [peer]


def sends_in_order(*kinds: str) -> Expect:
    return lambda answer: [s["message"]["type"].split("_")[0] for s in answer["sends"]] == list(kinds)


def finish(t: int) -> dict[str, Any]:
    return {"input": "finish", "t": t}


def connected(t: int, peer: int = 0) -> dict[str, Any]:
    return {"input": "connected", "peer": peer, "t": t}


def written(t: int, peer: int, seq: int) -> dict[str, Any]:
    return {"input": "sendCompleted", "peer": peer, "seq": seq, "t": t}


_ACK_TIMEOUT = TerminationAckTimeout.condition
_BIND_TIMEOUT = WriterConnectionTimeout.condition
_FILL: Final = N * 9 // 10 - 4
"""A record filling a buffer of the rows' networkBufferSize to its flush threshold."""
_LONG_MAX: Final = str(2**63 - 1)
_MAP_ID: Final = 11
"""A directory id other than the partition id (a later job)."""

# -- every setting at each edge of its domain ----------------------------------------------------------------

TIMEOUT_EDGES: Final = (
    row("settings: writerConnectionTimeout '1' (the smallest accepted) fires at 1 ms, not at 0, naming the lowest "
        "of two readers unbound",
        writer_trace(peers=2, writer_connection_timeout_ms="1"),
        Then(tick(0), nothing, "nothing at 0 ms"),
        Then(tick(1), failed(_BIND_TIMEOUT, readerId="0"), f"{_BIND_TIMEOUT} for reader 0 at 1 ms")),
    row("settings: writerConnectionTimeout '1m' is 60000 ms",
        writer_trace(writer_connection_timeout_ms="1m"),
        Then(tick(59_999), nothing, "nothing a millisecond early"),
        Then(tick(60_000), failed(_BIND_TIMEOUT), f"{_BIND_TIMEOUT} at 60000 ms")),
    row("settings: writerConnectionTimeout '1d' is 86400000 ms",
        writer_trace(writer_connection_timeout_ms="1d"),
        Then(tick(86_399_999), nothing, "nothing a millisecond early"),
        Then(tick(86_400_000), failed(_BIND_TIMEOUT), f"{_BIND_TIMEOUT} at 86400000 ms")),
)

TIMEOUT_LARGEST: Final = (
    row(f"settings: writerConnectionTimeout {_LONG_MAX} (the largest long, as milliseconds) is accepted and waits",
        writer_trace(writer_connection_timeout_ms=_LONG_MAX),
        Then(tick(10**12), nothing, "nothing after 10^12 ms")),
    row(f"settings: writerConnectionTimeout '{_LONG_MAX}s' saturates at the largest long and waits",
        writer_trace(writer_connection_timeout_ms=_LONG_MAX + "s"),
        Then(tick(10**12), nothing, "nothing after 10^12 ms")),
)

WAIT_AND_SIZE_EDGES: Final = (
    row("settings: networkBufferMaxWaitTimeMs 1 (the smallest positive): a record a millisecond after its buffer "
        "opened flushes it; the periodic flush a millisecond after a buffer opened",
        writer_trace(network_buffer_max_wait_time_ms="1"),
        *bind(0), write(0, 1), Then(write(0, 1), nothing, "nothing at the buffer's opening"),
        Then(write(1, 1), sends("DATA"), "a DATA a millisecond later"), write(1, 1),
        Then(tick(2), sends("DATA"), "the periodic flush at 2 ms")),
    row("settings: networkBufferMaxWaitTimeMs -1 (a long Spark does not validate) flushes every record as written",
        writer_trace(network_buffer_max_wait_time_ms="-1"),
        *bind(0), Then(write(0, 1), sends("DATA"), "a DATA for the first record"),
        Then(write(5, 1), sends("DATA"), "a DATA for the second"), Then(tick(10), nothing, "nothing left for a tick")),
    row("settings: networkBufferSize 1 (the smallest): its flush threshold is 0, so every record, an empty one "
        "too, is its own DATA",
        writer_trace(network_buffer_size="1"),
        *bind(0), Then(write(0, 0), sends("DATA"), "a DATA for an empty record"),
        Then(write(0, 3), sends("DATA"), "a DATA for the next")),
)

PERIODIC_WAITS_MS: Final = (100, 200, 300, 700)
"""networkBufferMaxWaitTimeMs of the rows where a float subtraction falls short: periods whose instants are tenths
of a second."""
TRUNCATING_WAITS_MS: Final = (1, 10)
"""networkBufferMaxWaitTimeMs of the rows where a float product falls short: no multiple of 100 ms below 2,000 s has
a product with the clock's unit that lands below a whole unit, so these periods are shorter."""


def _inexact_periods(wait_ms: int) -> int:
    """The fewest whole periods after the first periodic instant (``wait_ms``) whose seconds, taken as floats and
    subtracted before scaling, fall short of the whole periods (0.3 - 0.1 is 0.19999999999999998): the instants on
    which counting the periods past by float subtraction, not in whole units (spec/clock.py), lands a period short."""
    return next(k for k in range(1, 100)
                if (wait_ms * (1 + k) / 1000 - wait_ms / 1000) * 1_000_000 < k * wait_ms * 1000)


def _truncated_periods(wait_ms: int) -> int:
    """The fewest whole periods after the first periodic instant (``wait_ms``) at whose end the seconds' product with
    the clock's unit (spec/clock.py: tenths of a nanosecond) lands below the whole unit (0.043 s is
    429,999,999.99999994 units): the instants on which truncating, not rounding, to a unit lands a period short."""
    return next(k for k in range(1, 100_000)
                if int(wait_ms * (1 + k) / 1000 * 10**10) != wait_ms * (1 + k) * 10**7)


PERIODIC_INEXACT: Final = tuple(
    row(f"writer._open_buffer: networkBufferMaxWaitTimeMs {wait}: a buffer opened at {wait * (1 + k)} ms, "
        f"{k} whole periods after the first periodic instant ({wait} ms; {why}), counts them all: "
        f"the next periodic flush is at {wait * (2 + k)} ms, not at the opening's own instant",
        writer_trace(network_buffer_max_wait_time_ms=str(wait)),
        *bind(0), write(wait * (1 + k), 1),
        Then(tick(wait * (1 + k)), nothing, "no periodic flush at the opening's instant"),
        Then(tick(wait * (2 + k)), sends("DATA"), "the periodic flush a whole period on"))
    for waits, periods, why in (
        (PERIODIC_WAITS_MS, _inexact_periods, "seconds inexact in binary"),
        (TRUNCATING_WAITS_MS, _truncated_periods, "seconds whose product with the clock's unit falls short"))
    for wait in waits for k in (periods(wait),))

PERMIT_EDGES: Final = (
    row(f"writer.permit_capacity: networkBufferSize {2**30 - 1}, the largest whose two buffers fit the permits' "
        "bound 2^31-1 (one reader): the second buffer opens at exactly 0 left, the third blocks",
        writer_trace(network_buffer_size=str(2**30 - 1)),
        *bind(0), write(0, 1), Then(tick(WAIT_MS), sends("DATA"), "the first buffer sent"),
        Then(write(60, 1), no_event("ProducerBlocked"), "the second buffer opens"), tick(2 * WAIT_MS),
        Then(write(110, 1), event("ProducerBlocked"), "the third blocks"),
        Then(written(120, 0, 0), event("ProducerUnblocked"), "unblocked when a write completes")),
    row("writer.permit_capacity: writerMaxMemory 2147483647 (the largest int) less one reader's socket buffers "
        "holds exactly three buffers of 715816789: the third opens at 0 left, the fourth blocks",
        writer_trace(writer_max_memory=str(2**31 - 1), network_buffer_size=str((2**31 - 1 - SOCKETS) // 3)),
        *bind(0), write(0, 1), tick(WAIT_MS), write(60, 1), tick(2 * WAIT_MS),
        Then(write(110, 1), no_event("ProducerBlocked"), "the third buffer opens"), tick(3 * WAIT_MS),
        Then(write(160, 1), event("ProducerBlocked"), "the fourth blocks")),
    row("writer.permit_capacity: writerMaxMemory 1 (the smallest): the floor of two buffers per reader holds",
        writer_trace(writer_max_memory="1"),
        Then(write(0, _FILL), no_event("ProducerBlocked"), "the first buffer opens"),
        Then(write(0, _FILL), no_event("ProducerBlocked"), "the second opens"),
        Then(write(0, _FILL), event("ProducerBlocked"), "the third blocks")),
)

QUOTA_EDGES: Final = (
    row("reader.per_writer_quota: readerMaxMemory 1 with two writers (1 // 2 is 0): each writer's quota is the "
        "floor of 1 byte, paused and resumed on its own",
        reader_trace(peers=2, reader_max_memory="1"),
        connected(0, 0), connected(0, 1),
        Then(at(0, data(0, b"x", writer=1)), event("PauseReading"), "writer 1 paused by its first DATA"),
        Then(at(0, data(0, b"x")), event("PauseReading"), "writer 0 paused by its first DATA"),
        Then(at(0, {"input": "release", "peer": 1, "seq": 0}), event("ResumeReading"), "writer 1 resumed"),
        Then(at(0, data(1, b"y", writer=1)), event("PauseReading"), "writer 1 paused again")),
)

# -- the opt-in termination-ack timeout at its edges, with several readers, and against the bind timeout -----

ACK_EDGES: Final = (
    row("writer.finish: a termination-ack timeout of 0 fires at the first tick at finish's own instant, naming the "
        "lowest of two readers unacknowledged",
        writer_trace(peers=2, ack_timeout_ms=0),
        *bind(0, 0), *bind(0, 1), Then(finish(100), no_event("Failed"), "finish itself does not fail"),
        Then(tick(100), failed(_ACK_TIMEOUT, readerId="0"), f"{_ACK_TIMEOUT} at finish's instant")),
    row("writer.finish: a termination-ack timeout of 1 ms fires a millisecond after finish, not at it",
        writer_trace(ack_timeout_ms=1),
        *bind(0), finish(100), Then(tick(100), nothing, "nothing at finish's instant"),
        Then(tick(101), failed(_ACK_TIMEOUT), f"{_ACK_TIMEOUT} a millisecond later")),
)

ACK_CROSSINGS: Final = (
    row("writer.tick: the ack timeout names the lowest reader still unacknowledged (reader 1 acked first)",
        writer_trace(peers=2, ack_timeout_ms=400),
        *bind(0, 0), *bind(0, 1), finish(0), Then(at(200, ack(0, reader=1)), nothing, "reader 1's ack"),
        Then(tick(399), nothing, "nothing a millisecond early"),
        Then(tick(400), failed(_ACK_TIMEOUT, readerId="0"), f"{_ACK_TIMEOUT} for reader 0")),
    row("writer.tick: the ack timeout also covers a reader that never bound (its terminator queued)",
        writer_trace(ack_timeout_ms=300),
        finish(0), Then(tick(299), nothing, "nothing a millisecond early"),
        Then(tick(300), failed(_ACK_TIMEOUT, readerId="0"), f"{_ACK_TIMEOUT} before writerConnectionTimeout")),
    row("writer.tick: writerConnectionTimeout and the ack timeout due at one instant: the bind timeout is reported",
        writer_trace(ack_timeout_ms=TIMEOUT_MS),
        finish(0), Then(tick(TIMEOUT_MS), failed(_BIND_TIMEOUT, readerId="0"), f"{_BIND_TIMEOUT} first")),
)

# -- several peers whose instants differ -----------------------------------------------------------------------

SEVERAL_READERS: Final = (
    row("writer.tick: writerConnectionTimeout names the lowest reader still unbound (reader 1 bound, reader 0 not)",
        writer_trace(peers=2),
        *bind(0, reader=1), Then(tick(TIMEOUT_MS - 1), nothing, "nothing a millisecond early"),
        Then(tick(TIMEOUT_MS), failed(_BIND_TIMEOUT, readerId="0"), f"{_BIND_TIMEOUT} for reader 0")),
    row("writer.tick: the periodic flush sends every reader's open buffer, whenever each was opened",
        writer_trace(peers=2),
        *bind(0, 0), *bind(0, 1), write(10, 1, peer=0), write(40, 1, peer=1),
        Then(tick(WAIT_MS - 1), nothing, "nothing a millisecond early"),
        Then(tick(WAIT_MS), lambda a: sorted(s["to"] for s in a["sends"]) == [0, 1], "a DATA to each reader")),
    row("writer._append: each reader's buffer has its own age (reader 0's opened at 0, reader 1's at 30)",
        writer_trace(peers=2),
        *bind(0, 0), *bind(0, 1), write(0, 1, peer=0), write(30, 1, peer=1),
        Then(write(50, 1, peer=1), nothing, "reader 1's buffer is 20 ms old: nothing"),
        Then(write(50, 1, peer=0), sends_to(0), "reader 0's is 50 ms old: its DATA"),
        Then(write(79, 1, peer=1), nothing, "reader 1's is 49 ms old: nothing"),
        Then(write(80, 1, peer=1), sends_to(1), "reader 1's is 50 ms old: its DATA")),
)

WRITER_ANY_ORDER: Final = (
    row("writer._bind: readers bind in another order than their ids; each gets its own queued data from seq 0",
        writer_trace(peers=2),
        write(0, _FILL, peer=0), write(0, _FILL, peer=1), write(0, _FILL, peer=1),
        Then(at(0, {"input": "accepted", "peer": 1}), nothing, "nothing on an accept"),
        Then(at(0, credit(reader=1)), lambda a: [(s["to"], s["message"]["seq"]) for s in a["sends"]]
             in ([(1, 0), (1, 1)], [(1, "0"), (1, "1")]), "reader 1's DATA 0 and 1"),
        at(0, {"input": "accepted", "peer": 0}),
        Then(at(0, credit(reader=0)), sends_to(0), "reader 0's DATA 0")),
    row("writer.finish with two open buffers: each reader's last DATA, then its TERMINATION_CONTROL, reader by "
        "reader; acks in another order than the readers' ids complete the writer after both",
        writer_trace(peers=2),
        *bind(0, 0), *bind(0, 1), write(0, 1, peer=1), write(0, 1, peer=0),
        Then(finish(0), lambda a: [(s["to"], s["message"]["type"].split("_")[0]) for s in a["sends"]]
             == [(0, "DATA"), (0, "TERMINATION"), (1, "DATA"), (1, "TERMINATION")], "DATA, end to 0; DATA, end to 1"),
        Then(at(0, ack(1, reader=1)), no_event("Completed"), "reader 1's ack"),
        Then(at(0, ack(1, reader=0)), event("Completed"), "complete after reader 0's")),
)

# -- a buffer's age after every way its buffer emptied ---------------------------------------------------------

BUFFER_AGE: Final = (
    row("writer._open_buffer: after a flush by the threshold, the next buffer is as old as its own opening",
        writer_trace(),
        *bind(0), Then(write(0, _FILL), sends("DATA"), "a DATA at the threshold"), write(30, 1),
        Then(write(WAIT_MS, 1), nothing, "nothing at the first buffer's age"),
        Then(write(79, 1), nothing, "nothing a millisecond early"), Then(write(80, 1), sends("DATA"), "a DATA at 80 ms")),
    row("writer._open_buffer: after a flush by age, the next buffer is as old as its own opening",
        writer_trace(),
        *bind(0), write(0, 1), Then(write(WAIT_MS, 1), sends("DATA"), "a DATA at its age"), write(60, 1),
        Then(write(109, 1), nothing, "nothing a millisecond early"), Then(write(110, 1), sends("DATA"), "a DATA")),
    row("writer._open_buffer: after the periodic flush, the next buffer is as old as its own opening",
        writer_trace(),
        *bind(0), write(10, 1), Then(tick(WAIT_MS), sends("DATA"), "the periodic flush"), write(75, 1),
        Then(write(124, 1), nothing, "nothing a millisecond early"), Then(write(125, 1), sends("DATA"), "a DATA")),
    row("writer._resume_held: the held record's buffer is as old as the write completion that unblocked it",
        writer_trace(writer_max_memory="1"),
        *bind(0), write(0, _FILL), write(0, _FILL), Then(write(0, 1), event("ProducerBlocked"), "blocked"),
        Then(written(30, 0, 0), event("ProducerUnblocked"), "unblocked at 30 ms"),
        Then(write(79, 1), nothing, "nothing a millisecond early"), Then(write(80, 1), sends("DATA"), "a DATA")),
)

# -- rules that meet: a deadline and a finish, credit and termination, a close and an ack --------------------

WRITER_CROSSINGS: Final = (
    row("writer.finish before any bind: the queued DATA and TERMINATION_CONTROL go out in order on the bind, and "
        "the ack completes the writer",
        writer_trace(),
        write(0, 1), Then(finish(10), nothing, "nothing sent before the bind"), at(20, {"input": "accepted", "peer": 0}),
        Then(at(20, credit()), sends_in_order("DATA", "TERMINATION"), "DATA 0 then TERMINATION_CONTROL 1"),
        Then(at(30, ack(1)), event("Completed"), "complete")),
    row("writer.tick: writerConnectionTimeout still runs after finish for a reader never bound",
        writer_trace(peers=2),
        *bind(0, 0), finish(100), Then(at(200, ack(0, reader=0)), no_event("Completed"), "reader 0's ack"),
        Then(tick(TIMEOUT_MS - 1), nothing, "nothing a millisecond early"),
        Then(tick(TIMEOUT_MS), failed(_BIND_TIMEOUT, readerId="1"), f"{_BIND_TIMEOUT} for reader 1")),
    row("writer: a later CREDIT after TERMINATION_CONTROL, and after the ack, changes nothing; an acknowledged "
        "reader's connection may close while another's ack is awaited",
        writer_trace(peers=2),
        *bind(0, 0), *bind(0, 1), finish(0), Then(at(0, credit(reader=0)), nothing, "a CREDIT while terminating"),
        at(0, ack(0, reader=0)), Then(at(0, credit(reader=0)), nothing, "a CREDIT after the ack"),
        Then(at(0, {"input": "closed", "peer": 0}), nothing, "reader 0's connection closes"),
        Then(at(0, ack(0, reader=1)), event("Completed"), "complete after reader 1's ack")),
    row("writer: the periodic flush stops at finish (nothing is left to send)",
        writer_trace(),
        *bind(0), write(0, 1), Then(finish(10), sends_in_order("DATA", "TERMINATION"), "the last DATA, then the end"),
        Then(tick(WAIT_MS), nothing, "nothing at the period")),
)

WRITER_EQUIVALENTS: Final = (
    row("writer._receive: a handshake CREDIT granting 0 or 2147483647 messages, or carrying seq 7, binds as one "
        "granting 1 (the count is advisory)",
        {**writer_trace(peers=2), "directoryId": _MAP_ID},
        at(0, {"input": "accepted", "peer": 0}),
        Then(at(0, {"input": "received", "peer": 0, "message": to_json(
            CreditMessage(writer_id=_MAP_ID, reader_id=0, num_messages=0, seq=7))}), event("Bound"), "reader 0 bound"),
        at(0, {"input": "accepted", "peer": 1}),
        Then(at(0, {"input": "received", "peer": 1, "message": to_json(
            CreditMessage(writer_id=_MAP_ID, reader_id=1, num_messages=2**31 - 1))}), event("Bound"), "reader 1 bound")),
    row(f"writer._receive: a later job (directory id {_MAP_ID}, partition 0): the handshake names {_MAP_ID}, a "
        "later CREDIT and the ack name the partition; a setting no version reads is ignored, as a SparkConf does",
        {**writer_trace(), "directoryId": _MAP_ID,
         "settings": {**writer_trace()["settings"], "spark.shuffle.streaming.notASetting": "x"}},
        at(0, {"input": "accepted", "peer": 0}),
        Then(at(0, credit(writer=_MAP_ID)), event("Bound"), f"bound by a CREDIT naming {_MAP_ID}"),
        write(0, _FILL), Then(at(0, credit()), nothing, "a later CREDIT naming 0"), finish(0),
        Then(at(0, ack(1)), event("Completed"), "complete on the ack naming 0")),
    row("writer.connection_closed: a connection that closes before its CREDIT is no failure; the reader may "
        "connect again and bind",
        writer_trace(),
        at(0, {"input": "accepted", "peer": 0}), Then(at(0, {"input": "closed", "peer": 0}), nothing, "nothing"),
        at(10, {"input": "accepted", "peer": 0}), Then(at(10, credit()), event("Bound"), "bound on the second"),
        Then(write(10, _FILL), sends("DATA"), "a DATA to it")),
    row("writer.tick: neither an accepted connection nor its close before a CREDIT restarts writerConnectionTimeout",
        writer_trace(),
        at(500, {"input": "accepted", "peer": 0}), at(600, {"input": "closed", "peer": 0}),
        at(700, {"input": "accepted", "peer": 0}), Then(tick(TIMEOUT_MS - 1), nothing, "nothing a millisecond early"),
        Then(tick(TIMEOUT_MS), failed(_BIND_TIMEOUT, readerId="0"), f"{_BIND_TIMEOUT} from the start")),
)

READER_CROSSINGS: Final = (
    row("reader: writers terminate in another order than their ids (writer 1 first); the stream ends after both",
        reader_trace(peers=2),
        connected(0, 0), connected(0, 1), at(0, tc(0, writer=1)), Then(written(0, 1, 0), no_event("Completed"),
                                                                       "writer 1's ack written: not complete"),
        Then(at(0, data(0, b"x")), sends("CREDIT"), "writer 0's DATA credited"), at(0, tc(1)),
        Then(written(0, 0, 1), event("Completed"), "complete after writer 0's ack")),
    row("reader: the writer's connection closes before the ack's write completes; the stream still ends",
        reader_trace(),
        connected(0), at(0, tc(0)), Then(at(0, {"input": "closed", "peer": 0}), nothing, "nothing at the close"),
        Then(written(0, 0, 0), event("Completed"), "complete when the ack is written")),
    row("reader: a paused reader still acknowledges TERMINATION_CONTROL, and a release after it resumes",
        reader_trace(reader_max_memory="1"),
        connected(0), Then(at(0, data(0, b"x")), event("PauseReading"), "paused"),
        Then(at(0, tc(1)), sends("TERMINATION"), "the ack"),
        Then(at(0, {"input": "release", "peer": 0, "seq": 0}), event("ResumeReading"), "resumed"),
        Then(written(0, 0, 1), event("Completed"), "complete")),
    row("reader.release: DATA released in another order than delivered (seq 1 first) returns that DATA's bytes",
        reader_trace(reader_max_memory=str(2 * DATA_HEADER_LENGTH + 12)),
        connected(0), at(0, data(0, b"x")), Then(at(0, data(1, b"yyy")), event("PauseReading"), "paused at 0 left"),
        Then(at(0, {"input": "release", "peer": 0, "seq": 1}), event("ResumeReading"), "resumed by seq 1"),
        Then(at(0, data(2, b"zz")), no_event("PauseReading"), "1 byte left: reading on"),
        Then(at(0, {"input": "release", "peer": 0, "seq": 0}), nothing, "seq 0 released")),
)

READER_EQUIVALENTS: Final = (
    row("reader: writers known by directory ids 7 and 2 (neither 0, nor in order); a DATA of no records is "
        "delivered and credited",
        {**reader_trace(), "writerIds": [7, 2]},
        connected(0, 7), connected(0, 2),
        Then(at(0, data(0, writer=2)), sends("CREDIT"), "writer 2's empty DATA credited"),
        Then(at(0, data(0, b"x", writer=7)), sends("CREDIT"), "writer 7's DATA credited"),
        at(0, tc(1, writer=7)), at(0, tc(1, writer=2)), written(0, 7, 1),
        Then(written(0, 2, 1), event("Completed"), "complete after both acks")),
    row(f"reader._admitted: an empty stream's TERMINATION_CONTROL sets the partition id (3) too: the ack echoes "
        f"it, not the directory id {_MAP_ID}",
        {**reader_trace(), "writerIds": [_MAP_ID]},
        connected(0, _MAP_ID),
        Then(at(0, tc(0, writer=3, peer=_MAP_ID)), lambda a: a["sends"][0]["message"]["writer_id"] == 3,
             "the ack names 3"),
        Then(written(0, _MAP_ID, 0), event("Completed"), "complete")),
)

_CRC_X: Final = payload_checksum(encode_records([b"x"]))

CHECKSUM_EDGES: Final = (
    row("reader._data: a checksum 2^32 above the payload's CRC32C (the int64 field's other bits) is refused, not "
        "masked",
        reader_trace(),
        connected(0), Then(at(0, data(0, b"x", checksum=_CRC_X + 2**32)),
                           failed(ChecksumVerificationFailed.condition), "refused")),
    row("reader._data: the CRC32C sign-extended (negative) is refused",
        reader_trace(),
        connected(0), Then(at(0, data(0, b"x", checksum=_CRC_X - 2**32)),
                           failed(ChecksumVerificationFailed.condition), "refused")),
    row("reader._data: with checksums off ('false') any checksum is accepted, a wrong nonzero one and the largest "
        "long too",
        reader_trace(checksum_enabled="false"),
        connected(0), Then(at(0, data(0, b"x", checksum=_CRC_X ^ 1)), event("Deliver"), "delivered"),
        Then(at(0, data(1, b"y", checksum=2**63 - 1)), event("Deliver"), "delivered")),
)

# -- the reader's connect timeout at its edges and with several writers --------------------------------------------

CONNECT_PEERS: Final = (
    row("reader.connect_failed: a connect timeout of 0 fails the reader at its first failed attempt",
        reader_trace(connect_timeout_ms=0),
        Then(at(5, {**CONNECT_FAILED, "peer": 0}), failed(WriterUnreachable.condition, timeoutMs="0"), "unreachable")),
    row("reader.connect_failed: a connect timeout of 1 ms: not at the first failure, at a second a millisecond later",
        reader_trace(connect_timeout_ms=1),
        Then(at(5, {**CONNECT_FAILED, "peer": 0}), nothing, "nothing at the first failure"),
        Then(at(6, {**CONNECT_FAILED, "peer": 0}), failed(WriterUnreachable.condition), "unreachable")),
    row("reader._check_reachable: two writers unreachable since different instants: the earlier one's window "
        "fires first, at its own instant",
        reader_trace(peers=2, connect_timeout_ms=TIMEOUT_MS),
        at(300, {**CONNECT_FAILED, "peer": 0}), at(400, {**CONNECT_FAILED, "peer": 1}),
        at(500, {**CONNECT_FAILED, "peer": 0}), Then(tick(TIMEOUT_MS + 299), nothing, "nothing a millisecond early"),
        Then(tick(TIMEOUT_MS + 300), failed(WriterUnreachable.condition, writerId="0"), "writer 0 unreachable")),
)

# -- every id a message names against the one its connection is bound to, for each kind after binding ----------

_MISMATCHED: Final = MismatchedChannelIds.condition


def on_conn(conn: int, step: Json) -> dict[str, Any]:
    """``step`` received on reader ``conn``'s connection, whatever reader its message names."""
    return {**step, "conn": f"c{conn}"}


ID_BINDING: Final = (
    row("writer._receive: after reader 0 bound its connection, a CREDIT on it naming reader 1 (unbound) fails the "
        "writer, and does not bind reader 1 there",
        writer_trace(peers=2),
        *bind(0, 0), Then(at(10, on_conn(0, credit(reader=1))), failed(_MISMATCHED), f"{_MISMATCHED}")),
    row("writer._receive: a CREDIT naming reader 1 on reader 0's connection, reader 1 bound on its own, is "
        "mismatched ids (not a second connection of reader 1)",
        writer_trace(peers=2),
        *bind(0, 0), *bind(0, 1), Then(at(10, on_conn(0, credit(reader=1))), failed(_MISMATCHED), f"{_MISMATCHED}")),
    row("writer._receive: after finish, a TERMINATION_ACK naming reader 1 (bound on its own connection) on reader "
        "0's connection is mismatched ids",
        writer_trace(peers=2),
        *bind(0, 0), *bind(0, 1), finish(0),
        Then(at(10, on_conn(0, ack(0, reader=1))), failed(_MISMATCHED), f"{_MISMATCHED}")),
    row("writer._receive: a TERMINATION_ACK naming reader 1 (never bound) on reader 0's connection is mismatched ids",
        writer_trace(peers=2, writer_connection_timeout_ms="-1"),
        *bind(0, 0), finish(0), Then(at(10, on_conn(0, ack(0, reader=1))), failed(_MISMATCHED), f"{_MISMATCHED}")),
)

DERIVED_AXES: Final = (
    Derived("settings/derived-timeout-at-its-edges", Level.MUST, "writer", "writerConnectionTimeout at its "
            "smallest accepted value (1 ms) and in minutes and days, naming the lowest reader unbound",
            TIMEOUT_EDGES),
    Derived("settings/derived-timeout-largest", Level.MUST, "writer", "writerConnectionTimeout at the largest "
            "long, bare and saturated from seconds, is accepted and waits", TIMEOUT_LARGEST),
    Derived("settings/derived-wait-and-size-edges", Level.MUST, "writer", "networkBufferMaxWaitTimeMs at 1 and "
            "-1 (not validated: every record flushed) and networkBufferSize at 1 (threshold 0)",
            WAIT_AND_SIZE_EDGES),
    Derived("settings/derived-periodic-flush-at-inexact-instants", Level.MUST, "writer", "A buffer opened whole "
            "periods after the first periodic instant, at instants whose seconds are inexact in binary or whose "
            "product with the clock's unit falls short of a whole unit: the periods past are counted in whole units, "
            "rounded, so the next periodic flush is a whole period on",
            PERIODIC_INEXACT),
    Derived("backpressure/writer-derived-permits-at-their-edges", Level.MUST, "writer", "The permits' bound "
            "between networkBufferSize and writerMaxMemory at exactly its limit, writerMaxMemory at its largest "
            "and smallest", PERMIT_EDGES),
    Derived("backpressure/reader-derived-quota-floor-per-writer", Level.MUST, "reader", "A readerMaxMemory "
            "smaller than its number of writers gives each writer the floor of 1 byte, paused and resumed on "
            "its own", QUOTA_EDGES),
    Derived("termination/derived-ack-timeout-edges", Level.SHOULD, "writer", "The opt-in termination-ack "
            "timeout at 0 (the first tick at finish's instant) and 1 ms, naming the lowest reader", ACK_EDGES),
    Derived("termination/derived-ack-timeout-crossings", Level.SHOULD, "writer", "The ack timeout with a reader "
            "acknowledged first, for a reader never bound, and against writerConnectionTimeout due at the same "
            "instant", ACK_CROSSINGS),
    Derived("data/writer-derived-several-readers", Level.MUST, "writer", "With several readers: the bind "
            "timeout names the reader still unbound, the periodic flush sends every open buffer, each buffer "
            "has its own age", SEVERAL_READERS),
    Derived("termination/writer-derived-any-order", Level.MUST, "writer", "Readers bind and acknowledge in any "
            "order; finish sends each reader's last DATA then its terminator, reader by reader", WRITER_ANY_ORDER),
    Derived("data/writer-derived-buffer-age-after-each-flush", Level.MUST, "writer", "A buffer's age counts "
            "from its own opening after every way the previous one emptied: the threshold, its age, the periodic "
            "flush, a producer unblocked", BUFFER_AGE),
    Derived("termination/writer-derived-crossings", Level.MUST, "writer", "Where rules meet: a finish before "
            "any bind, the bind timeout after a finish, credits and a close around the acks, the periodic flush "
            "after finish", WRITER_CROSSINGS),
    Derived("handshake/writer-derived-equivalent-credits", Level.MUST, "writer", "Inputs equivalent to the "
            "usual ones are accepted: a handshake CREDIT granting any count, a later job's ids", WRITER_EQUIVALENTS),
    Derived("termination/reader-derived-crossings", Level.MUST, "reader", "Where rules meet: writers ending in "
            "any order, a close before the ack is written, a paused reader terminating, releases in any order",
            READER_CROSSINGS),
    Derived("handshake/reader-derived-equivalent-ids", Level.MUST, "reader", "Directory ids other than 0..M-1 "
            "in any order, an empty DATA, and a partition id learned from an empty stream's terminator",
            READER_EQUIVALENTS),
    Derived("checksum/reader-derived-checksum-edges", Level.MUST, "reader", "A checksum is the whole int64: "
            "the CRC32C plus 2^32, or sign-extended, is refused; with checksums off any value is accepted",
            CHECKSUM_EDGES),
    Derived("failure/derived-connect-timeout-edges", Level.SHOULD, "reader", "The reader's connect timeout at 0 "
            "(the first failure is fatal) and 1 ms, and with several unreachable writers, each one's runs from its "
            "own first failure and the earliest fires first", CONNECT_PEERS, (CONNECT_TIMEOUT,)),
    Derived("handshake/writer-derived-ids-against-binding", Level.SHOULD, "writer", "After a bind, every CREDIT "
            "and TERMINATION_ACK on the connection is checked against the reader it is bound to: one naming "
            "another reader, bound elsewhere or not, is MISMATCHED_CHANNEL_IDS (Spark 4.3.0 never compares them)",
            ID_BINDING),
)
"""The cases of these axes, in catalogue order."""
