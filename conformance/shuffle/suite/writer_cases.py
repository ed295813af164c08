"""The checks of the cases where the implementation under test is a writer (the peer reads)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Final, Sequence

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.peer import PeerReader, describe
from conformance.shuffle.targets import (
    ACK_TIMEOUT_KEY,
    DEFAULT_RECORDS,
    DEFAULT_WRITER_WORKLOAD,
    AbstractRunning,
    ShuffleTarget,
    Workload,
)
from conformance.shuffle.suite.helpers import (
    ACK_TIMEOUT,
    ACK_TIMEOUT_MS,
    ALREADY_BOUND,
    CONNECTION_TIMEOUT,
    CONNECTION_TIMEOUT_MS,
    CheckFn,
    MULTI_WRITER_ID,
    REJECT_WINDOW_S,
    SEQUENCE,
    SETTLE_S,
    STREAM_S,
    completed_cleanly,
    completion,
    frame_problems,
    gave_up,
    numbered_records,
    observe,
    rejection,
    writer_workload,
)
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    TerminationControlMessage,
)
from spec.shuffle.records import RECORD_LENGTH, decode_records
from spec.shuffle.settings import ShuffleSettings, key_of

TWO_READERS: Final = {0: numbered_records("r0", 30), 1: numbered_records("r1", 20)}


def stream_verdict(peer: PeerReader, want: Sequence[bytes], writer_id: int) -> Verdict:
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
        verdict = stream_verdict(peer, DEFAULT_RECORDS, 0)
        return Verdict(verdict.passed, "nothing for 0.5 s before the CREDIT, then " + verdict.expected, verdict.actual)


def w_bind_by_reader_id(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(writer_workload(TWO_READERS), ctx) as impl:
        second = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 1)
        first = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0)
        second.until_terminated(STREAM_S)
        first.until_terminated(STREAM_S)
        one, zero = stream_verdict(second, TWO_READERS[1], MULTI_WRITER_ID), stream_verdict(
            first, TWO_READERS[0], MULTI_WRITER_ID)
        return Verdict(one.passed and zero.passed, f"reader 1 (connected first): {one.expected}; reader 0: "
                       f"{zero.expected}", f"reader 1: {one.actual}; reader 0: {zero.actual}")


def w_unknown_reader(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, 0, 0, handshake=False)
        peer.link.send(CreditMessage(writer_id=0, reader_id=7, num_messages=1))
        return rejection(ctx, impl, [peer.link], "a CREDIT for reader 7 of a 1-reader shuffle", None,
                         lambda m: isinstance(m, DataMessage), "DATA")


def w_second_binding(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """Reader 0 is bound and its stream done (ack held, so the writer waits); a second connection claims it."""
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        bound = PeerReader.open(ctx, impl.address, 0, 0, hold_ack=True)
        if not bound.until_terminated(STREAM_S):
            return Verdict(False, "the whole stream to the bound reader", bound.outcome())
        impostor = PeerReader.open(ctx, impl.address, 0, 0)
        return rejection(ctx, impl, [bound.link, impostor.link], "a CREDIT for reader 0 from a second connection "
                         "while the first is bound", ALREADY_BOUND, lambda m: isinstance(m, DataMessage), "DATA")


def _default_stream(t: ShuffleTarget, ctx: CaseContext, judge: Callable[[PeerReader], Verdict]) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, 0, 0)
        peer.until_terminated(STREAM_S)
        return judge(peer)


def w_delivery(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _default_stream(t, ctx, lambda p: stream_verdict(p, DEFAULT_RECORDS, 0))


LATER_JOB_DIRECTORY_ID: Final = 11
"""The writer's directory id in a later job (Spark: its map task id), other than its partition id."""


def w_later_job_ids(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """A later job (docs/spec/shuffle.md#channel-ids): the reader's handshake names the writer's directory
    id 11, its later CREDITs and ack the partition id 5 the writer's messages name; the writer delivers
    and completes."""
    workload = replace(writer_workload({0: DEFAULT_RECORDS}), directory_id=LATER_JOB_DIRECTORY_ID)
    with t.writer(workload, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, LATER_JOB_DIRECTORY_ID, 0)
        peer.until_terminated(STREAM_S)
        verdict = stream_verdict(peer, DEFAULT_RECORDS, MULTI_WRITER_ID)
        done = completion(impl, [peer.link])
        ok = verdict.passed and completed_cleanly(done, [peer.link])
        return Verdict(ok, f"after a handshake naming {LATER_JOB_DIRECTORY_ID}: " + verdict.expected
                       + ", then completion without error", verdict.actual + "; " + done.text())


def w_whole_records(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    sizes = [0, 1, 7, 40_000, 3, 100_000, 0, 31_000, 2]
    records = tuple(bytes([i]) * n for i, n in enumerate(sizes))
    with t.writer(writer_workload({0: records}), ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0)
        peer.until_terminated(STREAM_S)
        verdict = stream_verdict(peer, records, MULTI_WRITER_ID)
        return Verdict(verdict.passed, "records of 0 B to 100 KB (beyond networkBufferSize) each whole in one "
                       "DATA: " + verdict.expected, verdict.actual)


FLUSH_BUFFER_SIZE: Final = 1005
"""networkBufferSize of the flush-threshold case: not a multiple of 10, so its 90% (904) is rounded once."""


def w_flush_threshold(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """A buffer filled to exactly 90% of networkBufferSize is flushed; one byte under it is not."""
    threshold = FLUSH_BUFFER_SIZE * 9 // 10
    at = b"a" * (threshold - RECORD_LENGTH.size)
    under = b"u" * (threshold - 1 - RECORD_LENGTH.size)
    want = [[at], [under, b""], [b"tail"]]
    workload = writer_workload({0: (at, under, b"", b"tail")}, network_buffer_size=str(FLUSH_BUFFER_SIZE),
                               network_buffer_max_wait_time_ms="600000")
    with t.writer(workload, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0)
        peer.until_terminated(STREAM_S)
        got = [[bytes(r) for r in decode_records(m.payload)] for m in peer.received if isinstance(m, DataMessage)]
        sizes = [[len(r) for r in records] for records in got]
        return Verdict(peer.terminated and got == want, f"networkBufferSize {FLUSH_BUFFER_SIZE}: a record filling the "
                       f"buffer to exactly {threshold} B is one DATA; one leaving it at {threshold - 1} B waits for the "
                       f"next record: DATA of record sizes {[[len(r) for r in w] for w in want]}",
                       f"DATA of record sizes {sizes}; {peer.outcome()}")


def w_empty_stream(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(writer_workload({0: ()}), ctx) as impl:
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
    with t.writer(writer_workload({0: numbered_records("nocrc", 40)}, checksum_enabled="false"), ctx) as impl:
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
    with t.writer(writer_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.send_held_ack()
        early = observe(impl, [one.link], 0.5, gave_up)
        one.send_held_ack()
        done = completion(impl, [zero.link, one.link])
        ok = not gave_up(early) and completed_cleanly(done, [zero.link, one.link])
        return Verdict(ok, "after reader 0's ack: reader 1 kept open, nothing reported; after reader 1's: "
                       "completion (reported, or both connections closed) without error",
                       f"after reader 0's ack: {early.text()}; after reader 1's: {done.text()}")


def w_close_after_ack(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """Reader 0 acks and closes at once (its stream is over); reader 1 acks later: the writer completes."""
    with t.writer(writer_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.send_held_ack()
        zero.link.close()
        early = observe(impl, [one.link], 0.5, gave_up)
        one.send_held_ack()
        done = completion(impl, [one.link])
        ok = not gave_up(early) and not done.errors and (done.completed or one.link.name in done.closed)
        return Verdict(ok, "reader 0 closing right after its ack is no failure: reader 1 kept open, nothing "
                       "reported; after reader 1's ack: completion without error",
                       f"after reader 0's ack and close: {early.text()}; after reader 1's ack: {done.text()}")


def w_duplicate_ack(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(writer_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.send_held_ack()
        zero.send_held_ack()
        early = observe(impl, [one.link], 0.5, gave_up)
        one.send_held_ack()
        done = completion(impl, [zero.link, one.link])
        ok = not gave_up(early) and completed_cleanly(done, [zero.link, one.link])
        return Verdict(ok, "a repeated correct ack is ignored: no error, completion after reader 1's ack",
                       f"after the duplicate: {early.text()}; after reader 1's ack: {done.text()}")


def wrong_ack(delta: int) -> CheckFn:
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with t.writer(writer_workload(TWO_READERS), ctx) as impl:
            zero, one = _two_terminated(t, ctx, impl)
            if zero.held_ack is None:
                return Verdict(False, "TERMINATION_CONTROL to reader 0", zero.outcome())
            seq = zero.held_ack.seq + delta
            zero.send_held_ack(seq)
            verdict = rejection(ctx, impl, [zero.link, one.link],
                                f"TERMINATION_ACK seq={seq} for TERMINATION_CONTROL seq={seq - delta}", SEQUENCE)
            one.send_held_ack()
            return verdict

    return check


def w_ack_deadline(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    workload = writer_workload({0: numbered_records("noack", 5)}, **{ACK_TIMEOUT_KEY: str(ACK_TIMEOUT_MS)})
    with t.writer(workload, ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
        peer.until_terminated(STREAM_S)
        return rejection(ctx, impl, [peer.link], f"a reader that never acks ({ACK_TIMEOUT_KEY}={ACK_TIMEOUT_MS})",
                         ACK_TIMEOUT, after=ACK_TIMEOUT_MS / 1000)


def w_frames(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    def judge(peer: PeerReader) -> Verdict:
        problems = frame_problems(bytes(peer.link.raw))
        return Verdict(peer.terminated and not problems, "whole OneWayMessage frames: frame_length = 13 + body, "
                       "type 9, body_length = body, one message each", "; ".join(problems) or peer.outcome())

    return _default_stream(t, ctx, judge)


def writer_fault(what: str, data: Callable[[PeerReader], bytes], condition: str | None = None) -> CheckFn:
    """After the whole stream (ack held, so a lenient writer keeps waiting), send ``data``."""
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
            peer = PeerReader.open(ctx, impl.address, 0, 0, hold_ack=True)
            if not peer.until_terminated(STREAM_S):
                return Verdict(False, "the whole stream before the fault", peer.outcome())
            peer.link.send_raw(data(peer))
            return rejection(ctx, impl, [peer.link], what, condition)

    return check


def w_slow_reader(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    records = numbered_records("bp", 2500, 1000)
    with t.writer(writer_workload({0: records}), ctx) as impl:
        peer = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, receive_buffer=4096)
        time.sleep(1.0)  # the peer stops reading: the writer must wait, not drop or fail
        peer.until_terminated(STREAM_S)
        verdict = stream_verdict(peer, records, MULTI_WRITER_ID)
        done = completion(impl, [peer.link])
        ok = verdict.passed and completed_cleanly(done, [peer.link])
        return Verdict(ok, "after a 1 s stall with a 4 KiB receive window: " + verdict.expected + ", then completion",
                       f"{verdict.actual}; {done.text()}")


PERMIT_BUFFER_SIZE: Final = 1000
"""networkBufferSize of the permit cases. With writerMaxMemory 1 the permits are the floor, two buffers per
reader: 2 x 2 x 1000 = 4000, four buffers."""
FULL_BUFFER: Final = b"p" * (PERMIT_BUFFER_SIZE * 9 // 10 - RECORD_LENGTH.size)
"""A record that fills a new buffer to exactly its flush threshold: one DATA per record."""
OPEN_RECORD: Final = b"open"


def _permit_workload(reader_zero: Sequence[bytes], full_buffers: int) -> Workload:
    """Reader 0 gets ``reader_zero`` (records are written reader by reader); reader 1, which the case keeps
    from connecting, ``full_buffers`` DATA of one record each, queued before its bind with their permits."""
    return writer_workload({0: tuple(reader_zero), 1: (FULL_BUFFER,) * full_buffers},
                           network_buffer_size=str(PERMIT_BUFFER_SIZE), writer_max_memory="1",
                           network_buffer_max_wait_time_ms="600000")


def _late_reader(ctx: CaseContext, impl: AbstractRunning, count: int) -> tuple[PeerReader, Verdict]:
    """Reader 1 connects at last: its ``count`` records, in order, then TERMINATION_CONTROL."""
    late = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 1, hold_ack=True)
    late.until_terminated(STREAM_S)
    return late, stream_verdict(late, (FULL_BUFFER,) * count, MULTI_WRITER_ID)


PERMITS_IN_BUFFERS: Final = 4


def w_permits_to_zero(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """Reader 1's four queued DATA take the 4000 permits to exactly 0: the producer is not blocked, so its
    input ends and reader 0's (empty) stream ends while reader 1 is still away. A writer that blocked here
    would stay blocked: no open buffer to send, no write to complete."""
    with t.writer(_permit_workload((), PERMITS_IN_BUFFERS), ctx) as impl:
        early = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
        # what must come is waited for as long as a stream (a loaded machine is no failure), what must not for less
        ended = early.run_until(lambda: early.terminated, STREAM_S)
        first = early.outcome()
        late, rest = _late_reader(ctx, impl, PERMITS_IN_BUFFERS)
        early.send_held_ack()
        late.send_held_ack()
        done = completion(impl, [early.link, late.link])
        ok = ended and not early.records and rest.passed and completed_cleanly(
            done, [early.link, late.link])
        return Verdict(ok, "networkBufferSize 1000, writerMaxMemory 1 (4000 permits): with the permits used to "
                       "exactly 0 by reader 1's four DATA, the writer does not block: reader 0 gets its "
                       f"TERMINATION_CONTROL before reader 1 connects; then reader 1: {rest.expected}; completion",
                       f"reader 0 before reader 1 connected: {first}; reader 1: {rest.actual}; {done.text()}")


BLOCKED_STREAM: Final = 40
"""Reader 1's records in the blocking case: enough round trips that permits not all given back run out."""


def w_blocked_flushes(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """Reader 1's fourth DATA finds no permits: the writer sends every open buffer (reader 0's), then waits;
    once reader 1 binds, its queued DATA are written, their permits return and the whole input goes through."""
    with t.writer(_permit_workload((OPEN_RECORD,), BLOCKED_STREAM), ctx) as impl:
        early = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
        flushed = early.run_until(lambda: bool(early.data), STREAM_S)
        waited = not early.run_until(lambda: early.terminated, SETTLE_S)
        first = early.outcome()
        late, rest = _late_reader(ctx, impl, BLOCKED_STREAM)
        early.run_until(lambda: early.terminated, STREAM_S)
        early.send_held_ack()
        late.send_held_ack()
        done = completion(impl, [early.link, late.link])
        ok = (flushed and waited and list(early.records) == [OPEN_RECORD] and early.terminated and rest.passed
              and completed_cleanly(done, [early.link, late.link]))
        return Verdict(ok, "networkBufferSize 1000, writerMaxMemory 1 (4000 permits): out of permits, the writer "
                       "sends reader 0's open buffer as a DATA and waits (no TERMINATION_CONTROL) while reader 1 "
                       f"is away; once reader 1 connects: {rest.expected}; reader 0's stream ends; completion",
                       f"reader 0 before reader 1 connected: {first}; reader 1: {rest.actual}; reader 0 after: "
                       f"{early.outcome()}; {done.text()}")


def w_reader_closes_early(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(writer_workload(TWO_READERS), ctx) as impl:
        zero, one = _two_terminated(t, ctx, impl)
        zero.link.close()
        verdict = rejection(ctx, impl, [one.link], "reader 0's connection closing before its ack", None)
        one.send_held_ack()
        return verdict


def w_connection_timeout(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    workload = writer_workload(TWO_READERS, writer_connection_timeout_ms=f"{CONNECTION_TIMEOUT_MS}ms")
    with t.writer(workload, ctx) as impl:
        zero = PeerReader.open(ctx, impl.address, MULTI_WRITER_ID, 0, hold_ack=True)
        return rejection(ctx, impl, [zero.link], f"reader 1 never connecting (writerConnectionTimeout="
                         f"{CONNECTION_TIMEOUT_MS}ms; reader 0 connects and never acks)", CONNECTION_TIMEOUT,
                         after=CONNECTION_TIMEOUT_MS / 1000 + REJECT_WINDOW_S)


def refuses(field: str, refused: str, condition: str, accepted: str) -> CheckFn:
    """A writer given ``field`` = ``refused`` reports ``condition`` instead of listening; given the boundary
    value ``accepted`` next to it, it listens."""
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        records = {0: DEFAULT_RECORDS}
        bad, good = t.refusals([writer_workload(records, **{field: value}) for value in (refused, accepted)], ctx)
        ok = bad is not None and bad.kind == "error" and bad.condition == condition and good is None
        return Verdict(ok, f"{key_of(field)}={refused}: ERROR {condition} before listening; "
                       f"{key_of(field)}={accepted}: listens",
                       f"{refused}: {bad or 'listened'}; {accepted}: {good or 'listened'}")

    return check


def refuses_each(refusals: Sequence[tuple[str, str, str]]) -> CheckFn:
    """For each ``(field, value, condition)``: a writer given ``field`` = ``value`` reports ``condition``
    instead of listening (the smallest violations of each setting's type and requirement)."""
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        wrong = []
        workloads = [writer_workload({0: DEFAULT_RECORDS}, **{field: value}) for field, value, _ in refusals]
        for (field, value, condition), got in zip(refusals, t.refusals(workloads, ctx)):
            if got is None or got.kind != "error" or got.condition != condition:
                wrong.append(f"{key_of(field)}={value!r}: {got or 'listened'}")
        return Verdict(not wrong, "; ".join(f"{key_of(f)}={v!r}: ERROR {c}" for f, v, c in refusals)[:600],
                       "; ".join(wrong) or "each refused as expected")

    return check

