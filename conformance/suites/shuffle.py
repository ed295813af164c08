"""Live conformance cases for streaming-shuffle writers and readers (Spark 4.3.0's protocol).

The implementation under test plays one role; the scripted peer (:mod:`conformance.shuffle_peer`)
plays the other on the spec's machines, deviating on purpose in the fault cases. Verdicts come from
the wire and from connections closing, never from an exit status. Where the wire alone cannot tell
a rejection from a success, a case keeps a second connection waiting: a writer that rejected a fault
abandons it, one that accepted the fault keeps waiting for it.

What counts as **rejecting** a fault (used by every ``rejects-`` case): within
:data:`REJECT_WINDOW_S` the implementation closes the connection, or (targets with ``reports``)
reports an error whose condition is the one the case names (a report without a condition is
accepted, one naming another condition is not); and it sends nothing the case forbids, such as a
CREDIT for the faulty DATA, including for :data:`SETTLE_S` after the rejection.

Targets and their capabilities: :mod:`conformance.shuffle_targets`.
"""

from __future__ import annotations

import functools
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Final, Mapping, Sequence

from conformance.framework import Case, CaseContext, Level, Suite, Verdict
from conformance.shuffle_peer import POLL_S, Link, PeerReader, PeerWriter, describe
from conformance.shuffle_targets import (
    ACK_TIMEOUT_KEY,
    DEFAULT_RECORDS,
    DEFAULT_WRITER_WORKLOAD,
    READER,
    REPORTS,
    TARGET_HELP,
    WORKLOAD,
    WRITER,
    AbstractRunning,
    Report,
    ShuffleTarget,
    Workload,
    open_target,
)
from spec.shuffle import codec
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.layouts import ONE_WAY_MESSAGE
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.records import encode_records
from spec.shuffle.settings import ShuffleSettings, key_of

REJECT_WINDOW_S: Final = 3.0
"""How long an implementation has to show it rejected a fault (close or report)."""
SETTLE_S: Final = 0.3
"""Quiet period: how long the peer keeps listening for something that must not come."""
STREAM_S: Final = 10.0
"""Bound on receiving a whole stream of a case (well inside the case deadline)."""
CONNECTION_TIMEOUT_MS: Final = 400
ACK_TIMEOUT_MS: Final = 400

SEQUENCE, CHECKSUM = "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER", "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"
CONNECTION_TIMEOUT = "STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT"
ACK_TIMEOUT = "STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT"
ALREADY_BOUND, MISMATCHED_IDS = "READER_ALREADY_BOUND", "MISMATCHED_CHANNEL_IDS"
EXCLUSIVE_BINDING: Final = "docs/spec/shuffle.md#exclusive-binding"

PEER_WRITER_ID, READER_ID_UNDER_TEST = 3, 1
"""Reader cases: the peer is writer 3 of a shuffle whose reader under test has id 1 (not 0, so a
reader that assumes id 0 is caught)."""
MULTI_WRITER_ID = 5

CheckFn = Callable[[ShuffleTarget, CaseContext], Verdict]


# -- observing ----------------------------------------------------------------------------------

@dataclass
class Observation:
    """What the implementation did while the peer watched: links it closed, reports, messages."""

    closed: list[str] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    messages: list[tuple[str, Message]] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Report]:
        return [r for r in self.reports if r.kind == "error"]

    @property
    def completed(self) -> bool:
        return any(r.kind == "completed" for r in self.reports)

    def text(self) -> str:
        parts = [f"closed {', '.join(self.closed)}" if self.closed else "no connection closed"]
        parts.append("; ".join(map(str, self.reports)) if self.reports else "no report")
        if self.messages:
            parts.append("sent " + ", ".join(f"{name}:{describe(m)}" for name, m in self.messages))
        parts += self.undecodable
        return "; ".join(parts)


def observe(running: AbstractRunning, links: Sequence[Link], window: float,
            until: Callable[[Observation], bool]) -> Observation:
    """Watch ``links`` and reports for up to ``window`` s; stop :data:`SETTLE_S` after ``until`` holds
    or every link closed (so that what must not come has a chance to show)."""
    seen = Observation()
    deadline = time.monotonic() + window
    stop_at = deadline
    while time.monotonic() < stop_at:
        open_links = [link for link in links if link.name not in seen.closed]
        for link in open_links:
            message = link.poll()
            if message is not None:
                seen.messages.append((link.name, message))
            elif link.closed:
                seen.closed.append(link.name)
            elif link.decode_error is not None:
                seen.undecodable.append(f"{link.name} sent undecodable bytes: {link.decode_error}")
                seen.closed.append(link.name)
        if not open_links:
            time.sleep(POLL_S)
        seen.reports = running.reports()
        if stop_at == deadline and (until(seen) or (links and len(seen.closed) == len(links))):
            stop_at = min(deadline, time.monotonic() + SETTLE_S)
    seen.reports = running.reports()
    return seen


def _gave_up(seen: Observation) -> bool:
    return bool(seen.closed or seen.errors or seen.completed)


def rejection(running: AbstractRunning, links: Sequence[Link], what: str, condition: str | None,
              forbidden: Callable[[Message], bool] = lambda m: False, forbidden_text: str = "",
              window: float = REJECT_WINDOW_S) -> Verdict:
    """The verdict on "the implementation rejects ``what``" (see the module docstring)."""
    seen = observe(running, links, window, _gave_up)
    wrong = [r for r in seen.errors if condition is not None and r.condition not in (None, condition)]
    bad = [m for _, m in seen.messages if forbidden(m)]
    shown = f" [{condition}]" if condition else ""
    expected = f"rejects {what}: closes the connection or reports an error{shown}"
    if forbidden_text:
        expected += f"; sends no {forbidden_text}"
    passed = bool(seen.closed or seen.errors) and not wrong and not bad and not seen.completed
    return Verdict(passed, expected, seen.text())


def completion(running: AbstractRunning, links: Sequence[Link], window: float = STREAM_S) -> Observation:
    """Watch until the writer under test reports completion, or errs, or closes every link."""
    return observe(running, links, window, lambda s: s.completed or bool(s.errors))


def _completed_cleanly(seen: Observation, links: Sequence[Link]) -> bool:
    return not seen.errors and (seen.completed or len(seen.closed) == len(links))


# -- raw bytes ----------------------------------------------------------------------------------

def one_way_frame(body: bytes) -> bytes:
    """``body`` in a OneWayMessage frame, however malformed the body is."""
    return struct.pack(">qbi", codec.FRAME_HEADER_LENGTH + len(body), ONE_WAY_MESSAGE, len(body)) + body


UNKNOWN_TYPE_BODY: Final = struct.pack(">iqii", 9, 0, PEER_WRITER_ID, READER_ID_UNDER_TEST)
"""A body whose type id (9) is none of 1..4."""
OVERSIZED_HEADER: Final = struct.pack(">qbi", 2**31 + 100, ONE_WAY_MESSAGE, -1)
"""A frame header announcing more than Spark's largest frame (2^31 + 6 bytes); no body follows."""
HTTP_GARBAGE: Final = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
SHORT_FRAME: Final = struct.pack(">q", 5) + b"\x09\x00\x00\x00\x00"
"""A frame claiming 5 bytes, fewer than its own 8-byte length field."""


def frame_problems(raw: bytes) -> list[str]:
    """Every way ``raw`` (a byte stream) departs from whole, well-formed OneWayMessage frames."""
    problems: list[str] = []
    offset = 0
    while offset < len(raw):
        if len(raw) - offset < codec.FRAME_HEADER_LENGTH:
            return problems + [f"{len(raw) - offset} bytes of a frame header left at offset {offset}"]
        length, kind, body_length = struct.unpack_from(">qbi", raw, offset)
        body = raw[offset + codec.FRAME_HEADER_LENGTH: offset + length]
        if kind != ONE_WAY_MESSAGE:
            problems.append(f"offset {offset}: transport type {kind}, not OneWayMessage (9)")
        if body_length != length - codec.FRAME_HEADER_LENGTH:
            problems.append(f"offset {offset}: body_length {body_length} but frame_length {length}")
        if len(body) != length - codec.FRAME_HEADER_LENGTH:
            return problems + [f"offset {offset}: stream ends inside a {length}-byte frame"]
        try:
            codec.decode_body(body)
        except Exception as exc:  # any codec error is a finding, reported as text
            problems.append(f"offset {offset}: body does not decode: {exc}")
        offset += length
    return problems


# -- writer under test --------------------------------------------------------------------------

def _workload(records: Mapping[int, Sequence[bytes]], **settings: str) -> Workload:
    return Workload(WRITER, writer_id=MULTI_WRITER_ID, num_readers=len(records), records=records,
                    settings={k if k.startswith("streamwire.") else key_of(k): v for k, v in settings.items()})


def _records(tag: str, count: int, size: int = 0) -> tuple[bytes, ...]:
    return tuple(f"{tag}-{i:05d}-".encode().ljust(size, b"x") for i in range(count))


TWO_READERS: Final = {0: _records("r0", 30), 1: _records("r1", 20)}


def _stream_verdict(peer: PeerReader, want: Sequence[bytes], writer_id: int) -> Verdict:
    ids_ok = all(m.writer_id == writer_id and m.reader_id == peer.reader_id for m in peer.received)
    ok = peer.terminated and peer.error is None and list(peer.records) == list(want) and ids_ok
    expected = f"{len(want)} records in order, ids writer={writer_id} reader={peer.reader_id}, then TERMINATION_CONTROL"
    actual = peer.outcome() + ("" if ids_ok else "; wrong ids: " + ", ".join(describe(m) for m in peer.received))
    if not ok and peer.records != list(want):
        actual += f"; first difference at record {_first_difference(peer.records, want)}"
    return Verdict(ok, expected, actual)


def _first_difference(got: Sequence[bytes], want: Sequence[bytes]) -> int:
    return next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))


def w_waits_for_credit(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, 0, 0, handshake=False)
        early = peer.link.receive(0.5)
        if early is not None or peer.link.raw:
            return Verdict(False, "nothing before the first CREDIT", f"received {peer.link.raw[:64].hex()}...")
        peer.handshake()
        peer.until_terminated(STREAM_S)
        verdict = _stream_verdict(peer, DEFAULT_RECORDS, 0)
        return Verdict(verdict.passed, "nothing for 0.5 s before the CREDIT, then " + verdict.expected, verdict.actual)


def w_bind_by_reader_id(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(_workload(TWO_READERS), ctx) as impl:
        second = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 1)
        first = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0)
        second.until_terminated(STREAM_S)
        first.until_terminated(STREAM_S)
        one, zero = _stream_verdict(second, TWO_READERS[1], MULTI_WRITER_ID), _stream_verdict(
            first, TWO_READERS[0], MULTI_WRITER_ID)
        return Verdict(one.passed and zero.passed, f"reader 1 (connected first): {one.expected}; reader 0: "
                       f"{zero.expected}", f"reader 1: {one.actual}; reader 0: {zero.actual}")


def w_unknown_reader(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, 0, 0, handshake=False)
        peer.link.send(CreditMessage(writer_id=0, reader_id=7, num_messages=1))
        return rejection(impl, [peer.link], "a CREDIT for reader 7 of a 1-reader shuffle", None,
                         lambda m: isinstance(m, DataMessage), "DATA")


def w_second_binding(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """Reader 0 is bound and its stream done (ack held, so the writer waits); a second connection claims it."""
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        bound = PeerReader.open(ctx, impl.address, 0, 0, hold_ack=True)
        if not bound.until_terminated(STREAM_S):
            return Verdict(False, "the whole stream to the bound reader", bound.outcome())
        impostor = PeerReader.open(ctx, impl.address, 0, 0)
        return rejection(impl, [bound.link, impostor.link], "a CREDIT for reader 0 from a second connection while "
                         "the first is bound", ALREADY_BOUND, lambda m: isinstance(m, DataMessage), "DATA")


def _default_stream(t: ShuffleTarget, ctx: CaseContext, judge: Callable[[PeerReader], Verdict]) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, 0, 0)
        peer.until_terminated(STREAM_S)
        return judge(peer)


def w_delivery(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _default_stream(t, ctx, lambda p: _stream_verdict(p, DEFAULT_RECORDS, 0))


def w_whole_records(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    sizes = [0, 1, 7, 40_000, 3, 100_000, 0, 31_000, 2]
    records = tuple(bytes([i]) * n for i, n in enumerate(sizes))
    with t.writer(_workload({0: records}), ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0)
        peer.until_terminated(STREAM_S)
        verdict = _stream_verdict(peer, records, MULTI_WRITER_ID)
        return Verdict(verdict.passed, "records of 0 B to 100 KB (beyond networkBufferSize) each whole in one "
                       "DATA: " + verdict.expected, verdict.actual)


def w_empty_stream(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(_workload({0: ()}), ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0)
        peer.until_terminated(STREAM_S)
        ok = [type(m) for m in peer.received] == [TerminationControlMessage] and peer.received[0].seq == 0
        return Verdict(ok and peer.error is None, "TERMINATION_CONTROL seq=0 and nothing else",
                       ", ".join(map(describe, peer.received)) or peer.outcome())


def _seqs(peer: PeerReader) -> Verdict:
    seqs = [m.seq for m in peer.received]
    ok = peer.terminated and seqs == list(range(len(seqs)))
    return Verdict(ok, "DATA seq 0, 1, 2, ... and TERMINATION_CONTROL seq = last DATA seq + 1",
                   f"seqs {seqs}; " + peer.outcome())


def w_seq_from_zero(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _default_stream(t, ctx, _seqs)


def _checksums(peer: PeerReader, enabled: bool) -> Verdict:
    wrong = [m for m in peer.data if m.checksum != (payload_checksum(m.payload) if enabled else 0)]
    want = "CRC32C of the payload (high 32 bits zero)" if enabled else "0"
    return Verdict(bool(peer.data) and not wrong, f"every DATA checksum = {want}",
                   f"{len(peer.data)} DATA; wrong: " + ", ".join(
                       f"{describe(m)} crc32c={payload_checksum(m.payload)}" for m in wrong) if wrong
                   else peer.outcome())


def w_crc32c(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _default_stream(t, ctx, lambda p: _checksums(p, True))


def w_checksum_disabled(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(_workload({0: _records("nocrc", 40)}, checksum_enabled="false"), ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0,
                               settings=ShuffleSettings(checksum_enabled=False, writer_connection_timeout_ms=-1))
        peer.until_terminated(STREAM_S)
        return _checksums(peer, False)


def w_terminates_once(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, 0, 0, hold_ack=True)
        peer.until_terminated(STREAM_S)
        after = peer.link.receive(SETTLE_S)
        last = peer.received[-1] if peer.received else None
        ok = (isinstance(last, TerminationControlMessage) and last.writer_id == 0 and last.reader_id == 0
              and after is None and not peer.link.closed and peer.error is None)
        peer.send_held_ack()
        return Verdict(ok, "one TERMINATION_CONTROL(w=0 r=0) after the last DATA, then nothing until the ack "
                       "(connection kept open)",
                       f"last {describe(last) if last else 'nothing'}; then "
                       f"{describe(after) if after else 'nothing'}; " + peer.outcome())


def _two_terminated(t: ShuffleTarget, ctx: CaseContext, impl: AbstractRunning) -> tuple[PeerReader, PeerReader]:
    zero = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
    one = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 1, hold_ack=True)
    zero.until_terminated(STREAM_S)
    one.until_terminated(STREAM_S)
    return zero, one


def w_waits_for_every_ack(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.send_held_ack()
        early = observe(impl, [one.link], 0.5, _gave_up)
        one.send_held_ack()
        done = completion(impl, [zero.link, one.link])
        ok = not _gave_up(early) and _completed_cleanly(done, [zero.link, one.link])
        return Verdict(ok, "after reader 0's ack: reader 1 kept open, nothing reported; after reader 1's: "
                       "completion (reported, or both connections closed) without error",
                       f"after reader 0's ack: {early.text()}; after reader 1's: {done.text()}")


def w_duplicate_ack(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.send_held_ack()
        zero.send_held_ack()
        early = observe(impl, [one.link], 0.5, _gave_up)
        one.send_held_ack()
        done = completion(impl, [zero.link, one.link])
        ok = not _gave_up(early) and _completed_cleanly(done, [zero.link, one.link])
        return Verdict(ok, "a repeated correct ack is ignored: no error, completion after reader 1's ack",
                       f"after the duplicate: {early.text()}; after reader 1's ack: {done.text()}")


def _wrong_ack(delta: int) -> CheckFn:
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with t.writer(_workload(TWO_READERS), ctx) as impl:
            zero, one = _two_terminated(t, ctx, impl)
            if zero.held_ack is None:
                return Verdict(False, "TERMINATION_CONTROL to reader 0", zero.outcome())
            seq = zero.held_ack.seq + delta
            zero.send_held_ack(seq)
            verdict = rejection(impl, [zero.link, one.link],
                                f"TERMINATION_ACK seq={seq} for TERMINATION_CONTROL seq={seq - delta}", SEQUENCE)
            one.send_held_ack()
            return verdict

    return check


def w_ack_deadline(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    workload = _workload({0: _records("noack", 5)}, **{ACK_TIMEOUT_KEY: str(ACK_TIMEOUT_MS)})
    with t.writer(workload, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
        peer.until_terminated(STREAM_S)
        return rejection(impl, [peer.link], f"a reader that never acks ({ACK_TIMEOUT_KEY}={ACK_TIMEOUT_MS})",
                         ACK_TIMEOUT, window=ACK_TIMEOUT_MS / 1000 + REJECT_WINDOW_S)


def w_frames(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    def judge(peer: PeerReader) -> Verdict:
        problems = frame_problems(bytes(peer.link.raw))
        return Verdict(peer.terminated and not problems, "whole OneWayMessage frames: frame_length = 13 + body, "
                       "type 9, body_length = body, one message each", "; ".join(problems) or peer.outcome())

    return _default_stream(t, ctx, judge)


def _writer_fault(what: str, data: Callable[[PeerReader], bytes], condition: str | None = None) -> CheckFn:
    """After the whole stream (ack held, so a lenient writer keeps waiting), send ``data``."""
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
            peer = PeerReader.open(ctx, impl.address, 0, 0, hold_ack=True)
            if not peer.until_terminated(STREAM_S):
                return Verdict(False, "the whole stream before the fault", peer.outcome())
            peer.link.send_raw(data(peer))
            return rejection(impl, [peer.link], what, condition)

    return check


def w_slow_reader(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    records = _records("bp", 2500, 1000)
    with t.writer(_workload({0: records}), ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, receive_buffer=4096)
        time.sleep(1.0)  # the peer stops reading: the writer must wait, not drop or fail
        peer.until_terminated(STREAM_S)
        verdict = _stream_verdict(peer, records, MULTI_WRITER_ID)
        done = completion(impl, [peer.link])
        ok = verdict.passed and _completed_cleanly(done, [peer.link])
        return Verdict(ok, "after a 1 s stall with a 4 KiB receive window: " + verdict.expected + ", then completion",
                       f"{verdict.actual}; {done.text()}")


def w_reader_closes_early(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.link.close()
        verdict = rejection(impl, [one.link], "reader 0's connection closing before its ack", None)
        one.send_held_ack()
        return verdict


def w_connection_timeout(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    workload = _workload(TWO_READERS, writer_connection_timeout_ms=f"{CONNECTION_TIMEOUT_MS}ms")
    with t.writer(workload, ctx) as impl:
        zero = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
        return rejection(impl, [zero.link], f"reader 1 never connecting (writerConnectionTimeout="
                         f"{CONNECTION_TIMEOUT_MS}ms; reader 0 connects and never acks)", CONNECTION_TIMEOUT,
                         window=CONNECTION_TIMEOUT_MS / 1000 + 2 * REJECT_WINDOW_S)


# -- reader under test --------------------------------------------------------------------------

READER_WORKLOAD: Final = Workload(READER, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST)


class ReaderSession:
    """A reader under test connected to the peer writer, bound by its handshake CREDIT."""

    def __init__(self, t: ShuffleTarget, ctx: CaseContext, workload: Workload = READER_WORKLOAD) -> None:
        self.peer = PeerWriter(ctx, PEER_WRITER_ID, READER_ID_UNDER_TEST, READER_ID_UNDER_TEST + 1)
        self.ctx = ctx
        self._impl: AbstractRunning | None = None
        self._target, self._workload = t, workload
        self.first: Message | None = None

    def __enter__(self) -> ReaderSession:
        self._impl = self._target.reader(self._workload, self.peer.address, self.ctx)
        try:
            self.first = self.peer.bind(STREAM_S)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def impl(self) -> AbstractRunning:
        assert self._impl is not None
        return self._impl

    @property
    def link(self) -> Link:
        return self.peer.connected

    def close(self) -> None:
        self.peer.close()
        if self._impl is not None:
            self._impl.__exit__(None, None, None)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def data(self, *batches: Sequence[bytes]) -> list[DataMessage]:
        """The DATA messages the machine makes of ``batches`` (one each), not yet sent."""
        out = []
        for records in batches:
            out += [s.message for s in self.peer.batch(records) if isinstance(s.message, DataMessage)]
        return out

    def send(self, message: Message) -> bool:
        return self.link.send(message)

    def expect(self, kind: type, timeout: float = STREAM_S) -> Message | None:
        """The reader's next message if it is a ``kind``; None otherwise (the message stays in ``heard``)."""
        message = self.peer.hear(timeout)
        return message if isinstance(message, kind) else None

    def terminator(self) -> TerminationControlMessage:
        """The machine's TERMINATION_CONTROL: seq = one past the last DATA it made (sent or not)."""
        made = [s.message for s in self.peer.finish() if isinstance(s.message, TerminationControlMessage)]
        return made[0]

    def heard(self) -> str:
        return ", ".join(map(describe, self.peer.heard)) or "nothing"


BATCHES: Final = (_records("a", 3), _records("b", 1), _records("c", 50, 100))


def r_credit_first(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        want = CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST, num_messages=1, seq=0)
        return Verdict(s.first == want, f"first message {describe(want)}",
                       describe(s.first) if s.first else s.link.close_reason or "nothing")


def r_credits_each_data(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        credits = []
        for message in s.data(*BATCHES):
            s.send(message)
            credits.append(s.expect(CreditMessage))
        want = CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST, num_messages=1, seq=0)
        ok = credits == [want] * len(BATCHES)
        return Verdict(ok, f"{describe(want)} after each of {len(BATCHES)} DATA", s.heard())


def _ack_echo(batches: Sequence[Sequence[bytes]]) -> CheckFn:
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with ReaderSession(t, ctx) as s:
            data = s.data(*batches)
            for message in data:
                s.send(message)
            terminator = s.terminator()
            s.send(terminator)
            want = TerminationAckMessage(seq=terminator.seq, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST)
            got = None
            for _ in range(len(data) + 1):
                got = s.peer.hear(STREAM_S)
                if not isinstance(got, CreditMessage):
                    break
            extra = s.link.receive(SETTLE_S)
            ok = got == want and extra is None
            return Verdict(ok, f"{len(data)} CREDIT then {describe(want)} for {describe(terminator)}, then nothing",
                           s.heard() + (f", {describe(extra)}" if extra else ""))

    return check


def _reader_fault(what: str, condition: str | None, script: Callable[[ReaderSession], bool],
                  forbidden: Callable[[Message], bool] = lambda m: False, forbidden_text: str = "") -> CheckFn:
    """Run ``script`` (False: the stream did not get as far as the fault), then judge the rejection."""
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with ReaderSession(t, ctx) as s:
            if not isinstance(s.first, CreditMessage) or not script(s):
                return Verdict(False, f"the stream up to the fault ({what})", s.heard() + "; " + s.link.close_reason)
            return rejection(s.impl, [s.link], what, condition, forbidden, forbidden_text)

    return check


def _data_for_another_writer(s: ReaderSession) -> bool:
    """A well-formed DATA (seq 0, right checksum) that names writer 4 on writer 3's connection."""
    payload = encode_records([b"stray"])
    return s.send(DataMessage(seq=0, writer_id=PEER_WRITER_ID + 1, reader_id=READER_ID_UNDER_TEST,
                              checksum=payload_checksum(payload), payload=payload))


def _messages(*messages: Message) -> list[Message]:
    return list(messages)


def _credit(m: Message) -> bool:
    return isinstance(m, CreditMessage)


def _ack(m: Message) -> bool:
    return isinstance(m, TerminationAckMessage)


def _credit_or_ack(m: Message) -> bool:
    return isinstance(m, (CreditMessage, TerminationAckMessage))


def _first_accepted(s: ReaderSession, *batches: Sequence[bytes]) -> list[DataMessage]:
    """Make DATA 0.. of ``batches``, send DATA 0 and wait for its CREDIT; [] if it did not come."""
    data = s.data(*batches)
    s.send(data[0])
    return data if s.expect(CreditMessage) is not None else []


def _duplicate(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0])
    return bool(data) and s.send(data[0])


def _gap(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0], BATCHES[1])
    return bool(data) and s.send(_with_seq(data[1], 2))


def _missing_at_end(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0], BATCHES[1])  # DATA 1 is made but never sent
    return bool(data) and s.send(s.terminator())


def _first_not_zero(s: ReaderSession) -> bool:
    return s.send(_with_seq(s.data(BATCHES[0])[0], 1))


def _corrupt(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0], BATCHES[2])
    return bool(data) and s.send(_with_checksum(data[1], data[1].checksum ^ 0x00010000))


def _with_seq(m: DataMessage, seq: int) -> DataMessage:
    return DataMessage(seq=seq, writer_id=m.writer_id, reader_id=m.reader_id, checksum=m.checksum, payload=m.payload)


def _with_checksum(m: DataMessage, checksum: int) -> DataMessage:
    return DataMessage(seq=m.seq, writer_id=m.writer_id, reader_id=m.reader_id, checksum=checksum, payload=m.payload)


def _duplicate_then_terminate(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0])
    return bool(data) and s.send(data[0]) and s.send(s.terminator())


def _raw(data: bytes) -> Callable[[ReaderSession], bool]:
    return lambda s: s.link.send_raw(data)


def _size_mismatch(s: ReaderSession) -> bool:
    m = s.data(BATCHES[0])[0]
    body = codec.encode_body(m)
    body = body[:20] + struct.pack(">i", m.data_size + 4) + body[24:]
    return s.link.send_raw(one_way_frame(body))


def _writer_closes(s: ReaderSession) -> bool:
    if not _first_accepted(s, BATCHES[0]):
        return False
    s.link.close()
    return True


def r_writer_closes_early(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        if not isinstance(s.first, CreditMessage) or not _writer_closes(s):
            return Verdict(False, "DATA 0 credited before the close", s.heard())
        seen = observe(s.impl, [], REJECT_WINDOW_S, lambda o: bool(o.errors))
        return Verdict(bool(seen.errors), "reports an error (the writer closed before TERMINATION_CONTROL)",
                       seen.text())


def r_split_and_coalesced(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        data = s.data(*BATCHES, _records("d", 2))
        first = codec.encode_frame(data[0])
        for i in range(len(first)):  # one byte per write
            s.link.send_raw(first[i:i + 1])
        terminator = s.terminator()
        s.link.send_raw(b"".join(codec.encode_frame(m) for m in _messages(*data[1:], terminator)))
        for _ in range(len(data) + 1):
            if s.peer.hear(STREAM_S) is None:
                break
        want = [CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                              num_messages=1)] * (len(data) + 1) + [
            TerminationAckMessage(seq=terminator.seq, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST)]
        return Verdict(s.peer.heard == want, f"DATA 0 sent a byte at a time and {len(data) - 1} DATA + "
                       f"TERMINATION_CONTROL in one write are read alike: {len(data) + 1} CREDIT, then the ack",
                       s.heard())


def r_frames(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        data = s.data(BATCHES[0])
        s.send(data[0])
        s.expect(CreditMessage)
        s.send(s.terminator())
        s.expect(TerminationAckMessage)
        problems = frame_problems(bytes(s.link.raw))
        return Verdict(len(s.peer.heard) == 3 and not problems, "CREDIT, CREDIT, TERMINATION_ACK in whole "
                       "OneWayMessage frames (frame_length = 13 + body, type 9, body_length = body)",
                       "; ".join(problems) or s.heard())


def r_trailing_bytes(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        terminator = s.terminator()
        s.link.send_raw(one_way_frame(codec.encode_body(terminator) + b"\x00\x00\x00\x00"))
        seen = observe(s.impl, [s.link], 1.0, lambda o: _gave_up(o) or bool(o.messages))
        return Verdict(True, "INFO: TERMINATION_CONTROL with 4 trailing body bytes (Spark ignores them; the "
                       "spec's codec rejects them)", seen.text())


def r_fast_writer(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        data = s.data(*(_records(f"f{i}", 30, 1000) for i in range(64)))
        terminator = s.terminator()
        s.link.send_raw(b"".join(codec.encode_frame(m) for m in _messages(*data, terminator)))
        for _ in range(len(data) + 1):
            if s.peer.hear(STREAM_S) is None:
                break
        credits, acks = s.peer.credits(), s.peer.acks()
        ok = len(credits) == len(data) + 1 and [a.seq for a in acks] == [terminator.seq]
        return Verdict(ok, f"{len(data)} DATA (~2 MB) written without waiting: {len(data)} CREDIT after the "
                       f"handshake one, then TERMINATION_ACK seq={terminator.seq}",
                       f"{len(credits)} CREDIT, acks {[a.seq for a in acks]}; {s.link.close_reason}")


# -- catalogue ----------------------------------------------------------------------------------

def _c(case_id: str, level: Level, role: str, requirement: str, check: CheckFn, *requires: str,
       spec_ref: str = "") -> Case:
    return Case(f"shuffle/{case_id}", level, role, requirement, check, frozenset({role, *requires}), spec_ref)


MUST, SHOULD, INFO = Level.MUST, Level.SHOULD, Level.INFO
W, R = WRITER, READER
_data_after_fault = functools.partial(_reader_fault, forbidden=_credit, forbidden_text="CREDIT for it")

CASES: Final = (
    # handshake
    _c("handshake/writer-waits-for-credit", MUST, W, "A writer sends nothing on a connection before its first "
       "CREDIT; data produced before the bind is then sent in order from seq 0", w_waits_for_credit),
    _c("handshake/writer-binds-by-reader-id", MUST, W, "A writer binds a connection to the reader id its first "
       "CREDIT names, whatever the order readers connect in", w_bind_by_reader_id, WORKLOAD),
    _c("handshake/writer-rejects-unknown-reader", MUST, W, "A writer rejects a CREDIT naming a reader id outside "
       "0..R-1", w_unknown_reader),
    _c("handshake/writer-rejects-second-binding", SHOULD, W, "A writer rejects a CREDIT for a reader bound to "
       "another live connection (READER_ALREADY_BOUND; Spark 4.3.0 ignores it)", w_second_binding,
       spec_ref=EXCLUSIVE_BINDING),
    _c("handshake/reader-credit-first", MUST, R, "A reader's first message on a new connection is CREDIT(writer, "
       "reader, 1) with seq 0", r_credit_first),
    # data
    _c("data/writer-delivers-in-order", MUST, W, "A writer delivers every record for a reader exactly once, in "
       "order, in DATA naming its writer id and the reader id", w_delivery),
    _c("data/writer-whole-records", MUST, W, "A writer never splits a record across DATA messages, also for "
       "empty records and records larger than networkBufferSize", w_whole_records, WORKLOAD),
    _c("data/writer-empty-stream", MUST, W, "A writer with no records for a reader sends only "
       "TERMINATION_CONTROL with seq 0", w_empty_stream, WORKLOAD),
    _c("data/reader-rejects-data-for-another-pair", SHOULD, R, "A reader rejects a DATA naming another writer than "
       "its connection's, and does not credit it (MISMATCHED_CHANNEL_IDS; Spark 4.3.0 delivers it)",
       _data_after_fault("a DATA naming writer 4 on writer 3's connection", MISMATCHED_IDS, _data_for_another_writer),
       spec_ref=EXCLUSIVE_BINDING),
    _c("data/reader-credits-each-data", MUST, R, "A reader sends one CREDIT(writer, reader, 1) after every DATA "
       "it accepts", r_credits_each_data),
    # sequence
    _c("sequence/writer-from-zero", MUST, W, "A writer numbers DATA 0, 1, 2, ... per reader, and "
       "TERMINATION_CONTROL takes the next number", w_seq_from_zero),
    _c("sequence/reader-rejects-duplicate", MUST, R, "A reader rejects a DATA whose seq repeats the last one "
       "(INCORRECT_SEQUENCE_NUMBER)", _data_after_fault("a duplicate DATA seq=0", SEQUENCE, _duplicate)),
    _c("sequence/reader-rejects-gap", MUST, R, "A reader rejects a DATA whose seq skips one "
       "(INCORRECT_SEQUENCE_NUMBER)", _data_after_fault("DATA seq=2 after seq=0", SEQUENCE, _gap)),
    _c("sequence/reader-rejects-missing-at-end", MUST, R, "A reader rejects a TERMINATION_CONTROL whose seq shows "
       "that the last DATA is missing, and does not acknowledge it", _reader_fault(
           "TERMINATION_CONTROL seq=2 after DATA seq=0", SEQUENCE, _missing_at_end, _ack, "TERMINATION_ACK")),
    _c("sequence/reader-rejects-first-not-zero", MUST, R, "A reader rejects a first DATA whose seq is not 0",
       _data_after_fault("a first DATA with seq=1", SEQUENCE, _first_not_zero)),
    _c("sequence/writer-rejects-ack-ahead", MUST, W, "A writer rejects a TERMINATION_ACK whose seq is past the "
       "TERMINATION_CONTROL's (INCORRECT_SEQUENCE_NUMBER)", _wrong_ack(+1), WORKLOAD),
    _c("sequence/writer-rejects-ack-missing-end", MUST, W, "A writer rejects a TERMINATION_ACK echoing an "
       "earlier seq than its TERMINATION_CONTROL (INCORRECT_SEQUENCE_NUMBER)", _wrong_ack(-1), WORKLOAD),
    _c("sequence/writer-ignores-duplicate-ack", MUST, W, "A writer ignores a repeated correct TERMINATION_ACK",
       w_duplicate_ack, WORKLOAD),
    # checksum
    _c("checksum/writer-crc32c", MUST, W, "With checksums on, every DATA carries the CRC32C of its payload",
       w_crc32c),
    _c("checksum/writer-zero-when-disabled", MUST, W, "With spark.shuffle.streaming.checksum.enabled=false, "
       "every DATA carries checksum 0", w_checksum_disabled, WORKLOAD),
    _c("checksum/reader-rejects-mismatch", MUST, R, "A reader rejects a DATA whose payload does not match its "
       "CRC32C (CHECKSUM_VERIFICATION_FAILED)", _reader_fault("a DATA with a wrong checksum", CHECKSUM, _corrupt)),
    _c("checksum/reader-no-credit-for-corrupt", SHOULD, R, "A reader verifies the checksum before crediting: a "
       "corrupt DATA gets no CREDIT", _data_after_fault("a DATA with a wrong checksum", CHECKSUM, _corrupt)),
    # termination
    _c("termination/writer-terminates-once", MUST, W, "A writer ends each reader's stream with one "
       "TERMINATION_CONTROL(writer, reader) and keeps the connection open for the ack", w_terminates_once),
    _c("termination/writer-waits-for-every-ack", MUST, W, "A writer completes only after every reader's "
       "TERMINATION_ACK", w_waits_for_every_ack, WORKLOAD),
    _c("termination/writer-ack-deadline", SHOULD, W, f"A writer bounds its wait for termination acks when "
       f"{ACK_TIMEOUT_KEY} is set (Spark 4.3.0 waits forever)", w_ack_deadline, WORKLOAD),
    _c("termination/reader-acks-echo", MUST, R, "A reader answers TERMINATION_CONTROL with "
       "TERMINATION_ACK(writer, reader) echoing its seq", _ack_echo(BATCHES[:2])),
    _c("termination/reader-acks-empty-stream", MUST, R, "A reader answers a TERMINATION_CONTROL with seq 0 (no "
       "data) with TERMINATION_ACK seq 0", _ack_echo(())),
    # framing
    _c("framing/writer-frames", MUST, W, "A writer sends whole OneWayMessage frames: frame_length = 13 + body "
       "length, type 9, body_length = body length", w_frames),
    _c("framing/reader-frames", MUST, R, "A reader sends whole OneWayMessage frames: frame_length = 13 + body "
       "length, type 9, body_length = body length", r_frames),
    _c("framing/reader-split-and-coalesced", MUST, R, "A reader decodes frames however TCP splits or joins "
       "them", r_split_and_coalesced),
    _c("framing/writer-rejects-unknown-type", MUST, W, "A writer rejects a message type id other than 1..4",
       _writer_fault("a body with type id 9", lambda p: one_way_frame(struct.pack(">iqii", 9, 0, 0, 0)))),
    _c("framing/reader-rejects-unknown-type", MUST, R, "A reader rejects a message type id other than 1..4",
       _reader_fault("a body with type id 9", None, _raw(one_way_frame(UNKNOWN_TYPE_BODY)), _credit_or_ack,
                     "CREDIT or ack")),
    _c("framing/writer-rejects-oversized-frame", MUST, W, "A writer rejects a frame longer than its maximum "
       "(here beyond Spark's 2^31+6) without waiting for its body", _writer_fault(
           "a header announcing 2^31+100 bytes", lambda p: OVERSIZED_HEADER)),
    _c("framing/reader-rejects-oversized-frame", MUST, R, "A reader rejects a frame longer than its maximum "
       "(here beyond Spark's 2^31+6) without waiting for its body", _reader_fault(
           "a header announcing 2^31+100 bytes", None, _raw(OVERSIZED_HEADER))),
    _c("framing/writer-rejects-short-frame", MUST, W, "A writer rejects a frame_length smaller than the frame "
       "header", _writer_fault("frame_length 5", lambda p: SHORT_FRAME)),
    _c("framing/reader-rejects-garbage", MUST, R, "A reader rejects bytes that are not frames (an HTTP request)",
       _reader_fault("an HTTP request", None, _raw(HTTP_GARBAGE), _credit_or_ack, "CREDIT or ack")),
    _c("framing/reader-rejects-data-size-mismatch", MUST, R, "A reader rejects a DATA whose data_size differs "
       "from the payload bytes present", _reader_fault("DATA with data_size 4 more than its payload", None,
                                                      _size_mismatch, _credit, "CREDIT for it")),
    _c("framing/reader-trailing-bytes", INFO, R, "How a reader treats a TERMINATION_CONTROL body with trailing "
       "bytes (Spark ignores them)", r_trailing_bytes),
    # backpressure
    _c("backpressure/writer-slow-reader-no-loss", MUST, W, "A writer whose reader stops reading waits and loses "
       "nothing: every record arrives in order once reading resumes", w_slow_reader, WORKLOAD),
    _c("backpressure/reader-fast-writer-no-loss", MUST, R, "A reader given many DATA at once (credits are "
       "advisory) credits and keeps every one, then acks", r_fast_writer),
    # failure
    _c("failure/writer-rejects-data", MUST, W, "A writer rejects a DATA sent to it", _writer_fault(
        "a DATA from the reader", lambda p: codec.encode_frame(DataMessage(seq=0, writer_id=0, reader_id=0,
                                                                           checksum=0, payload=b"")))),
    _c("failure/reader-rejects-credit", MUST, R, "A reader rejects a CREDIT sent to it", _reader_fault(
        "a CREDIT from the writer", None,
        lambda s: s.send(CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST, num_messages=1)),
        _credit_or_ack, "CREDIT or ack")),
    _c("failure/reader-no-ack-after-rejection", SHOULD, R, "A reader that rejected a DATA does not acknowledge "
       "termination afterwards", _reader_fault("a duplicate DATA followed by TERMINATION_CONTROL", SEQUENCE,
                                               _duplicate_then_terminate, _ack, "TERMINATION_ACK")),
    _c("failure/reader-writer-closes-early", MUST, R, "A reader fails (does not end its stream normally) when a "
       "writer's connection closes before TERMINATION_CONTROL", r_writer_closes_early, REPORTS),
    _c("failure/writer-reader-closes-early", SHOULD, W, "A writer gives up promptly when a reader's connection "
       "closes before its ack", w_reader_closes_early, WORKLOAD),
    _c("failure/writer-connection-timeout", MUST, W, "A writer fails with WRITER_CONNECTION_TIMEOUT when a reader "
       "does not bind within writerConnectionTimeout", w_connection_timeout, WORKLOAD),
)


SUITE = Suite(
    name="shuffle",
    cases=CASES,
    open_target=open_target,
    roles=(WRITER, READER),
    target_help=TARGET_HELP,
)
