"""Cases derived from the shuffle machines' comparisons, constants and bounds (docs/conformance.md,
"The shuffle checklist"), driven through the ``exec:`` trace contract on its virtual clock.

Each :class:`Row` is one row of the checklist: a short trace that puts one rule of ``spec/shuffle`` at its
boundary (a window that must not restart, a bound at exactly its limit and one past, a value spelled
every way Spark reads it) and the steps that decide it. A case runs its rows; a row passes when the
deciding steps show what the rule says and every answer equals the spec machines' answer to the same
input (the trace contract: a trace's answers are exact, as in ``traces.json``). Rows cost one trace-driver
process each (about 0.3 s of CPU), no real time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Final, Mapping, Sequence

from conformance.framework import CaseContext, Level, Verdict
from conformance.shuffle.suite.deadline_cases import CONNECT_TIMEOUT
from conformance.shuffle.targets import ExecTarget, ShuffleTarget
from conformance.shuffle.vector_exec import DEADLINES, RESET, TraceDriverError, exec_each
from conformance.shuffle.vector_traces import ack, credit, data, run_trace, tc
from spec.shuffle.errors import (
    MismatchedChannelIds,
    TerminationAckTimeout,
    TruncatedInput,
    UnknownPeer,
    WriterConnectionTimeout,
    WriterUnreachable,
)
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.jsonform import to_json
from spec.shuffle.messages import DataMessage
from spec.shuffle.reader import DATA_HEADER_LENGTH
from spec.shuffle.records import RECORD_LENGTH, encode_records
from spec.shuffle.settings import ShuffleSettings, key_of
from spec.shuffle.writer import TCP_RECEIVE_BUFFER, TCP_SEND_BUFFER

Json = Mapping[str, Any]
Answer = Mapping[str, Any]
Expect = Callable[[Answer], bool]

TIMEOUT_MS: Final = 1000
WAIT_MS: Final = 50
N: Final = 1024
"""networkBufferSize of the size rows: the flush threshold is 921 bytes, so a 917-byte record fills a buffer."""
SOCKETS: Final = TCP_SEND_BUFFER + TCP_RECEIVE_BUFFER


@dataclass(frozen=True, slots=True)
class Row:
    """One checklist row: the rule, the trace header and inputs, and ``(step, expectation, text)`` for the
    steps that decide it (a negative step counts from the end)."""

    rule: str
    header: Json
    steps: tuple[Json, ...]
    expect: tuple[tuple[int, Expect, str], ...]


def _settings(**raw: str | None) -> dict[str, str]:
    """Small settings (threshold 921, 50 ms wait, 1 s timeouts) with ``raw`` Spark spellings over them (None:
    the key left out, Spark's default)."""
    base = ShuffleSettings(network_buffer_size=N, network_buffer_max_wait_time_ms=WAIT_MS,
                           writer_connection_timeout_ms=TIMEOUT_MS).to_dict()
    spelled = {**base, **{key_of(field): value for field, value in raw.items()}}
    return {key: value for key, value in spelled.items() if value is not None}


def writer_trace(peers: int = 1, ack_timeout_ms: int | None = None, **raw: str | None) -> dict[str, Any]:
    header: dict[str, Any] = {"role": "writer", "peers": peers, "settings": _settings(**raw)}
    if ack_timeout_ms is not None:
        header["ackTimeoutMs"] = ack_timeout_ms
    return header


def reader_trace(peers: int = 1, connect_timeout_ms: int | None = None, **raw: str | None) -> dict[str, Any]:
    header: dict[str, Any] = {"role": "reader", "peers": peers, "settings": _settings(**raw)}
    if connect_timeout_ms is not None:
        header["connectTimeoutMs"] = connect_timeout_ms
    return header


def at(t: int, step: Json) -> dict[str, Any]:
    return {**step, "t": t}


def tick(t: int) -> dict[str, Any]:
    return {"input": "tick", "t": t}


def write(t: int, size: int, peer: int = 0) -> dict[str, Any]:
    return {"input": "write", "peer": peer, "t": t, "record": "ab" * size}


def bind(t: int, reader: int = 0) -> tuple[dict[str, Any], ...]:
    return ({"input": "accepted", "peer": reader, "t": t}, at(t, credit(reader=reader)))


def nothing(answer: Answer) -> bool:
    return not answer["sends"] and not answer["events"]


def failed(condition: str, **params: str) -> Expect:
    return lambda answer: any(e.get("event") == "Failed" and e.get("error") == condition
                              and all(e["errorParams"].get(k) == v for k, v in params.items())
                              for e in answer["events"])


def event(name: str) -> Expect:
    return lambda answer: any(e.get("event") == name for e in answer["events"])


def no_event(name: str) -> Expect:
    return lambda answer: not event(name)(answer)


def sends(kind: str, count: int = 1) -> Expect:
    return lambda answer: sum(s["message"]["type"].startswith(kind) for s in answer["sends"]) == count


def data_checksum(nonzero: bool) -> Expect:
    return lambda answer: any(s["message"]["type"].startswith("DATA") and (int(s["message"]["checksum"]) != 0) == nonzero
                              for s in answer["sends"])


# -- the rows ---------------------------------------------------------------------------------------------

CONNECT_FAILED = {"input": "connectFailed", "cause": "refused"}
_UNREACHABLE = WriterUnreachable.condition
_BIND_TIMEOUT = WriterConnectionTimeout.condition

CONNECT_WINDOW: Final = (
    Row("reader.connect_failed: a later failed attempt does not restart the window (since = the first failure)",
        reader_trace(connect_timeout_ms=TIMEOUT_MS),
        (at(0, {**CONNECT_FAILED, "peer": 0}), at(600, {**CONNECT_FAILED, "peer": 0}), tick(TIMEOUT_MS - 1),
         tick(TIMEOUT_MS)),
        ((1, nothing, "nothing at the second failure"), (2, nothing, "nothing a millisecond early"),
         (3, failed(_UNREACHABLE), f"{_UNREACHABLE} at the first failure + {TIMEOUT_MS} ms"))),
    Row("reader._check_reachable: each writer has its own window, and a connect clears it",
        reader_trace(peers=2, connect_timeout_ms=TIMEOUT_MS),
        (at(0, {**CONNECT_FAILED, "peer": 0}), at(300, {**CONNECT_FAILED, "peer": 1}),
         at(500, {"input": "connected", "peer": 0}), tick(TIMEOUT_MS), tick(TIMEOUT_MS + 299), tick(TIMEOUT_MS + 300)),
        ((3, nothing, "writer 0 connected: no timeout at its instant"), (4, nothing, "nothing a millisecond early"),
         (5, failed(_UNREACHABLE, writerId="1"), f"{_UNREACHABLE} for writer 1 at its own instant"))),
)

BIND_WINDOW: Final = (
    Row("writer.tick: one bind does not restart writerConnectionTimeout for the readers still unbound",
        writer_trace(peers=2), (*bind(500, reader=0), tick(TIMEOUT_MS - 1), tick(TIMEOUT_MS)),
        ((2, nothing, "nothing a millisecond early"),
         (3, failed(_BIND_TIMEOUT, readerId="1"), f"{_BIND_TIMEOUT} for reader 1 at its instant"))),
    Row("writer.tick: a reader bound a millisecond before the instant is no timeout, then or later",
        writer_trace(), (*bind(TIMEOUT_MS - 1), tick(TIMEOUT_MS), tick(100 * TIMEOUT_MS)),
        ((2, nothing, "nothing at the instant"), (3, nothing, "nothing long after"))),
)

ACK_WINDOW: Final = (
    Row("writer.tick: one reader's ack does not restart the termination-ack window of the others",
        writer_trace(peers=2, ack_timeout_ms=400),
        (*bind(0, 0), *bind(0, 1), at(0, {"input": "finish"}), at(200, ack(0, reader=0)), tick(399), tick(400)),
        ((5, nothing, "nothing at the first ack"), (6, nothing, "nothing a millisecond early"),
         (7, failed(TerminationAckTimeout.condition, readerId="1"), "the ack timeout for reader 1 at its instant"))),
)

PERIODIC: Final = (
    Row("writer.tick: after a periodic flush the next one is a period later, not a period after the next record",
        writer_trace(), (*bind(0), write(0, 1), tick(WAIT_MS), write(60, 1), tick(2 * WAIT_MS - 1), tick(2 * WAIT_MS)),
        ((3, sends("DATA"), "a DATA at the first period"), (5, nothing, "nothing a millisecond early"),
         (6, sends("DATA"), "a DATA at the second period"))),
    Row("writer._open_buffer: a buffer opened after idle periods keeps the periodic flush's phase (0, 50, 100, ...)",
        writer_trace(), (*bind(0), write(170, 1), tick(199), tick(200)),
        ((3, nothing, "nothing a millisecond early"), (4, sends("DATA"), "a DATA at the period's instant"))),
    Row("writer._open_buffer: a buffer opened exactly at a period's instant is flushed a period later",
        writer_trace(), (*bind(0), write(WAIT_MS, 1), tick(2 * WAIT_MS - 1), tick(2 * WAIT_MS)),
        ((3, nothing, "nothing a millisecond early"), (4, sends("DATA"), "a DATA at the next period"))),
    Row("writer._append: a record appended exactly networkBufferMaxWaitTimeMs after its buffer opened (70 -> 120 ms, "
        "where 0.12 - 0.07 is 49.99999999999999 ms in floats) flushes it",
        writer_trace(), (*bind(0), write(70, 1), write(70 + WAIT_MS - 1, 1), write(70 + WAIT_MS, 1)),
        ((3, nothing, "nothing a millisecond early"), (4, sends("DATA"), "a DATA at its age"))),
    Row("writer._append: networkBufferMaxWaitTimeMs 0 flushes every record as it is written",
        writer_trace(network_buffer_max_wait_time_ms="0"), (*bind(0), write(0, 1), write(0, 1), tick(1)),
        ((2, sends("DATA"), "a DATA for the first record"), (3, sends("DATA"), "a DATA for the second"),
         (4, nothing, "nothing left for the tick"))),
)


def _full_buffers(count: int) -> tuple[dict[str, Any], ...]:
    """``count`` records, each filling one buffer to the flush threshold (queued: nobody is bound)."""
    return tuple(write(0, N * 9 // 10 - 4) for _ in range(count))


_THIRD: Final = (32 * 1024 * 1024 - SOCKETS) // 3
"""A networkBufferSize of which exactly three fit in the default writerMaxMemory beside one reader's sockets."""

PERMITS: Final = (
    Row("writer.permit_capacity: writerMaxMemory less the socket buffers of every reader (R = 2): the 7th buffer "
        "opens at exactly 0 permits left, the 8th blocks; a completed write unblocks",
        writer_trace(peers=2, writer_max_memory=str(2 * SOCKETS + 7 * N)),
        (*_full_buffers(8), *bind(0), at(0, {"input": "sendCompleted", "peer": 0, "seq": 0})),
        ((6, no_event("ProducerBlocked"), "the 7th buffer opens"), (7, event("ProducerBlocked"), "the 8th blocks"),
         (-1, event("ProducerUnblocked"), "unblocked when a DATA's write completes"))),
    Row("writer.permit_capacity: the floor of 2 buffers per reader (R = 3): the 6th opens, the 7th blocks",
        writer_trace(peers=3, writer_max_memory=str(3 * SOCKETS)),
        _full_buffers(7),
        ((5, no_event("ProducerBlocked"), "the 6th buffer opens"), (6, event("ProducerBlocked"), "the 7th blocks"))),
    Row("settings: by default (keys left out) checksums are on, the wait is 50 ms and writerMaxMemory 32 MiB: with "
        f"networkBufferSize {_THIRD} three buffers fit beside one reader's socket buffers, the 4th blocks",
        {"role": "writer", "peers": 1, "settings": {key_of("network_buffer_size"): str(_THIRD)}},
        (*bind(0), write(0, 1), tick(WAIT_MS - 1), tick(WAIT_MS), write(60, 1), tick(2 * WAIT_MS), write(110, 1),
         tick(3 * WAIT_MS), write(160, 1), at(160, {"input": "sendCompleted", "peer": 0, "seq": 0})),
        ((3, nothing, "nothing a millisecond before 50 ms"), (4, data_checksum(nonzero=True), "a DATA with its CRC32C"),
         (7, no_event("ProducerBlocked"), "the 3rd buffer opens"), (9, event("ProducerBlocked"), "the 4th blocks"),
         (10, event("ProducerUnblocked"), "unblocked when a write completes"))),
)

_N_ODD = 1001
"""networkBufferSize whose 90% is not whole: the threshold is 900 (rounded down)."""

THRESHOLD: Final = (
    Row("writer.flush_threshold: 90% of networkBufferSize rounded down (1001 -> 900): 899 bytes wait, 900 flush",
        writer_trace(network_buffer_size=str(_N_ODD)),
        (*bind(0), write(0, 890), write(0, 1), write(0, 0), write(0, 891), write(0, 1)),
        ((3, nothing, "899 bytes: nothing"), (4, sends("DATA"), "903 bytes: a DATA"), (5, nothing, "895 bytes: nothing"),
         (6, sends("DATA"), "900 bytes: a DATA"))),
    Row("writer._append: records of 4 KiB and more (sent from their own buffers) count the same: 8999 bytes wait, "
        "9000 flush (networkBufferSize 10000)",
        writer_trace(network_buffer_size="10000"),
        (*bind(0), write(0, 4096), write(0, 4895), write(0, 0), write(0, 4096), write(0, 4896)),
        ((3, nothing, "8999 bytes: nothing"), (4, sends("DATA"), "9003 bytes: a DATA"), (5, nothing, "4100 bytes"),
         (6, sends("DATA"), "9000 bytes: a DATA"))),
)

_QUOTA = 4 * DATA_HEADER_LENGTH + 8
"""readerMaxMemory // 2 of the quota row."""
_MIN_CHARGE = DATA_HEADER_LENGTH + 4
"""What a DATA holding one empty record is charged."""


def _data_charging(seq: int, charge: int, writer: int = 0) -> dict[str, Any]:
    """A DATA from ``writer`` charged ``charge`` bytes (header + payload: one record of charge - header - 4)."""
    return at(0, data(seq, b"x" * (charge - DATA_HEADER_LENGTH - 4), writer=writer))


QUOTA: Final = (
    Row("reader.per_writer_quota: readerMaxMemory // M per writer (M = 2, odd memory); reading pauses at exactly "
        "0 left, not at 1 left, and only the writer whose quota ran out; a release back to exactly 0 left does not "
        "resume, one above 0 does",
        reader_trace(peers=2, reader_max_memory=str(2 * _QUOTA + 1)),
        (at(0, {"input": "connected", "peer": 0}), at(0, {"input": "connected", "peer": 1}),
         _data_charging(0, _MIN_CHARGE),
         _data_charging(0, _QUOTA - 1, writer=1),
         _data_charging(1, _QUOTA - _MIN_CHARGE),
         _data_charging(2, _MIN_CHARGE),
         at(0, {"input": "release", "peer": 0, "seq": 0}),
         at(0, {"input": "release", "peer": 0, "seq": 1})),
        ((2, no_event("PauseReading"), "a first DATA: reading on"),
         (3, no_event("PauseReading"), "1 byte left of writer 1's quota: reading on"),
         (4, event("PauseReading"), "exactly 0 left of writer 0's: paused"),
         (6, no_event("ResumeReading"), "a release back to exactly 0 left: still paused"),
         (7, event("ResumeReading"), "above 0 left: resumed"))),
    Row("reader.per_writer_quota: at least 1 byte (readerMaxMemory -2147483648 is accepted, not validated): every "
        "DATA pauses; 'FALSE' turns checksums off, so checksum 0 is accepted",
        reader_trace(reader_max_memory="-2147483648", checksum_enabled="FALSE"),
        (at(0, {"input": "connected", "peer": 0}), at(0, data(0, b"x", checksum=0)),
         at(0, {"input": "release", "peer": 0, "seq": 0})),
        ((1, sends("CREDIT"), "a CREDIT for the DATA"), (1, event("PauseReading"), "paused"),
         (2, event("ResumeReading"), "resumed"))),
)

READER_IDS: Final = (
    Row("writer._channel_for_peer: reader ids 0..R-1: R-1 binds, R is an unknown reader",
        writer_trace(peers=2), (*bind(0, reader=1), *bind(0, reader=2)),
        ((1, event("Bound"), "reader R-1 binds"), (3, failed(UnknownPeer.condition), f"{UnknownPeer.condition} for R"))),
    Row("writer._channel_for_peer: a negative reader id is an unknown reader",
        writer_trace(peers=2), bind(0, reader=-1), ((1, failed(UnknownPeer.condition), f"{UnknownPeer.condition} for -1"),)),
)


_MAP_ID = 11
"""A writer's directory id other than its partition id (3), as in a later job."""

READER_ENDS: Final = (
    Row("reader._ack_written: the stream ends after every writer's ack is written, not the first's",
        reader_trace(peers=2),
        (at(0, {"input": "connected", "peer": 0}), at(0, {"input": "connected", "peer": 1}), at(0, tc(0, writer=0)),
         at(0, {"input": "sendCompleted", "peer": 0, "seq": 0}), at(0, data(0, b"x", writer=1)),
         at(0, tc(1, writer=1)), at(0, {"input": "sendCompleted", "peer": 1, "seq": 1})),
        ((3, no_event("Completed"), "writer 0 acked: not complete"), (4, sends("CREDIT"), "writer 1's DATA credited"),
         (6, event("Completed"), "complete after writer 1's ack"))),
    Row("reader._admitted: the partition id the first DATA names (3) is echoed in every CREDIT and the ack, the "
        "directory id (11) only in the handshake",
        {**reader_trace(), "writerIds": [_MAP_ID]},
        (at(0, {"input": "connected", "peer": _MAP_ID}), at(0, data(0, b"x", writer=3, peer=_MAP_ID)),
         at(0, tc(1, writer=3, peer=_MAP_ID))),
        ((0, lambda a: a["sends"][0]["message"]["writer_id"] == _MAP_ID, "the handshake names 11"),
         (1, lambda a: a["sends"][0]["message"]["writer_id"] == 3, "the CREDIT names 3"),
         (2, lambda a: a["sends"][0]["message"]["writer_id"] == 3, "the ack names 3"))),
)

def _raw_data(seq: int, payload: bytes) -> dict[str, Any]:
    """A DATA from writer 0 carrying ``payload`` as it is (its checksum right)."""
    message = DataMessage(seq=seq, writer_id=0, reader_id=0, checksum=payload_checksum(payload), payload=payload)
    return {"input": "received", "peer": 0, "t": 0, "message": to_json(message)}


def _records_then(bad: bytes, what: str) -> Row:
    """Records ending exactly at the payload's end (an empty one too) are delivered; then a payload ``bad``."""
    good = encode_records([b"", b"xy"])
    return Row(f"records.decode_records: a record ending exactly at the payload's end is delivered, {what} is "
               "truncated input",
               reader_trace(), (at(0, {"input": "connected", "peer": 0}), _raw_data(0, good), _raw_data(1, bad)),
               ((1, event("Deliver"), "the records delivered"), (2, failed(TruncatedInput.condition), f"{what}: refused")))


RECORD_BOUNDS: Final = (
    _records_then(RECORD_LENGTH.pack(3) + b"xy", "a length one past the payload"),
    _records_then(encode_records([b"x"]) + b"\0\0\0", "three bytes of a length"),
    _records_then(RECORD_LENGTH.pack(-1), "a negative length"),
)

PINNED: Final = (
    Row("reader._admitted: a later DATA naming another partition id than the first is refused",
        {**reader_trace(), "writerIds": [_MAP_ID]},
        (at(0, {"input": "connected", "peer": _MAP_ID}), at(0, data(0, b"x", writer=3, peer=_MAP_ID)),
         at(0, data(1, b"x", writer=4, peer=_MAP_ID))),
        ((2, failed(MismatchedChannelIds.condition), "mismatched ids"),)),
)


def _bind_timeout_at(ms: int, spelled: str | None) -> Row:
    """writerConnectionTimeout spelled ``spelled`` (None: Spark's default, 1h) fires at ``ms``, not a millisecond
    before."""
    return Row(f"settings: writerConnectionTimeout {spelled!r} is {ms} ms",
               writer_trace(writer_connection_timeout_ms=spelled), (tick(ms - 1), tick(ms)),
               ((0, nothing, "nothing a millisecond early"), (1, failed(_BIND_TIMEOUT), f"{_BIND_TIMEOUT} at {ms} ms")))


SPELLINGS: Final = (
    Row("settings: ' +1001 ' (trimmed, signed) is networkBufferSize 1001, 'TRUE' turns checksums on, '1S' is 1000 ms",
        writer_trace(peers=2, network_buffer_size=" +1001 ", checksum_enabled="TRUE", writer_connection_timeout_ms="1S"),
        (*bind(0), write(0, 891), write(0, 1), tick(TIMEOUT_MS - 1), tick(TIMEOUT_MS)),
        ((2, nothing, "895 bytes: nothing"), (3, data_checksum(nonzero=True), "900 bytes: a DATA with its CRC32C"),
         (4, nothing, "nothing a millisecond early"), (5, failed(_BIND_TIMEOUT), f"{_BIND_TIMEOUT} at 1000 ms"))),
    Row("settings: 'False' turns checksums off (checksum 0), '1000000US' is 1000 ms",
        writer_trace(peers=2, checksum_enabled="False", writer_connection_timeout_ms="1000000US"),
        (*bind(0), write(0, N * 9 // 10 - 4), tick(TIMEOUT_MS - 1), tick(TIMEOUT_MS)),
        ((2, data_checksum(nonzero=False), "a DATA with checksum 0"), (3, nothing, "nothing a millisecond early"),
         (4, failed(_BIND_TIMEOUT), f"{_BIND_TIMEOUT} at 1000 ms"))),
    _bind_timeout_at(TIMEOUT_MS, " 1000 "),
    _bind_timeout_at(60_000, "1Min"),
    _bind_timeout_at(3_600_000, None),
    Row("settings: writerConnectionTimeout -1 waits forever; networkBufferMaxWaitTimeMs takes the largest long",
        writer_trace(writer_connection_timeout_ms="-1", network_buffer_max_wait_time_ms=str(2**63 - 1)),
        (*bind(0), write(0, 1), tick(10**12)), ((3, nothing, "nothing after 10^12 ms"),)),
)


@dataclass(frozen=True, slots=True)
class Derived:
    """One case of rows: its id under ``shuffle/``, level, role under test, requirement, and what it needs
    besides ``traces``."""

    case_id: str
    level: Level
    role: str
    requirement: str
    rows: tuple[Row, ...]
    requires: tuple[str, ...] = ()


DERIVED: Final = (
    Derived("failure/derived-connect-window-not-restarted", Level.SHOULD, "reader", "The reader's connect timeout runs "
            "from a writer's first failed attempt: later failures do not restart it, each writer has its own, a "
            "connect clears it", CONNECT_WINDOW, (CONNECT_TIMEOUT,)),
    Derived("failure/derived-bind-window-not-restarted", Level.MUST, "writer", "writerConnectionTimeout runs from the "
            "start for every reader still unbound (another's bind does not restart it), and a reader bound before "
            "it never times out", BIND_WINDOW),
    Derived("termination/derived-ack-window-not-restarted", Level.SHOULD, "writer", "The termination-ack timeout runs "
            "from finish: one reader's ack does not restart it for the others", ACK_WINDOW),
    Derived("data/writer-derived-periodic-flush-phase", Level.MUST, "writer", "The periodic flush runs every "
            "networkBufferMaxWaitTimeMs from the start, also across a flush and a buffer opened after idle periods",
            PERIODIC),
    Derived("data/writer-derived-flush-threshold-rounding", Level.MUST, "writer", "The flush threshold is 90% of "
            "networkBufferSize rounded down: one byte below it waits, exactly it flushes", THRESHOLD),
    Derived("backpressure/writer-derived-permits-per-reader", Level.MUST, "writer", "A writer's permits are "
            "writerMaxMemory less 32.5 KiB of socket buffers per reader, at least 2 buffers per reader: the last "
            "buffer opens at exactly 0 left, the next blocks the producer until a write completes", PERMITS),
    Derived("backpressure/reader-derived-quota-per-writer", Level.MUST, "reader", "A reader's quota per writer is "
            "readerMaxMemory // M: reading pauses at exactly 0 left, per writer, and resumes only above 0", QUOTA),
    Derived("termination/reader-derived-ends-and-ids", Level.MUST, "reader", "A reader ends after every writer's "
            "ack, echoes the partition id its writer's first DATA names (not the directory id) in every CREDIT and "
            "the ack", READER_ENDS),
    Derived("data/reader-derived-partition-id-pinned", Level.SHOULD, "reader", "A reader refuses a later DATA "
            "naming another partition id than its connection's first (MISMATCHED_CHANNEL_IDS; Spark 4.3.0 never "
            "compares them)", PINNED),
    Derived("framing/reader-derived-record-bounds", Level.SHOULD, "reader", "A reader delivers records that end "
            "exactly at a DATA payload's end and refuses a record length one past it, cut short, or negative",
            RECORD_BOUNDS),
    Derived("handshake/derived-reader-id-bounds", Level.MUST, "writer", "A writer binds reader ids 0..R-1 and refuses "
            "R and -1 as unknown", READER_IDS),
    Derived("settings/derived-accepted-spellings", Level.MUST, "writer", "Settings are read as Spark reads them: "
            "trimmed, signed ints, booleans in any case, time suffixes in any case (us, ms, s, min), a bare number "
            "as milliseconds, 1h by default, -1 as forever", SPELLINGS),
)
"""The derived cases, in catalogue order."""


def _problems(row: Row, header: Json, answers: Sequence[Answer] | TraceDriverError) -> list[str]:
    """What the program's ``answers`` to ``row`` (played under ``header``) show against its rule and the spec
    machines' answers (with ``deadlines`` in the header, the instant each answer says the next tick is due too)."""
    if isinstance(answers, TraceDriverError):
        return [f"the trace driver: {answers}"]
    problems = [f"step {i % len(answers)}: not {text}: {answers[i]}" for i, ok, text in row.expect
                if not ok(answers[i])]
    spec = run_trace(str(row.header["role"]), header, row.steps)
    problems += [f"step {i} ({row.steps[i]['input']}): {got} where the spec answers {want}"
                 for i, (got, want) in enumerate(zip(answers, spec)) if got != want][:1]
    return problems


def derived(rows: Sequence[Row]) -> Callable[[ShuffleTarget, CaseContext], Verdict]:
    """The case of ``rows``: each row's deciding steps as its rule says, every answer as the spec's (with its
    deadline, when the target declares ``deadlines``); the rows played by one process when it declares
    ``trace-reset``."""

    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        assert isinstance(t, ExecTarget)  # only a program can declare ``traces``
        deadlines = DEADLINES in t.capabilities
        headers = [{**row.header, "deadlines": True} if deadlines else row.header for row in rows]
        played = exec_each(t.command, [(h, row.steps) for h, row in zip(headers, rows)], RESET in t.capabilities)
        for row, header, answers in zip(rows, headers, played):
            problems = _problems(row, header, answers)
            if problems:
                return Verdict(False, row.rule, "; ".join(problems)[:1200])
        return Verdict(True, "; ".join(r.rule for r in rows)[:600], f"{len(rows)} traces as the spec says")

    return check
