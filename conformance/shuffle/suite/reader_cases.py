"""The checks of the cases where the implementation under test is a reader (the peer writes)."""

from __future__ import annotations

import struct
import time
from dataclasses import replace
from typing import Callable, Final, Sequence

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.peer import Link, PeerWriter, describe
from conformance.shuffle.targets import (
    MAX_RECORD_SIZE_KEY,
    READER,
    AbstractRunning,
    ShuffleTarget,
    Workload,
)
from conformance.shuffle.suite.helpers import (
    OVERSIZED_HEADER,
    CheckFn,
    PEER_WRITER_ID,
    READER_ID_UNDER_TEST,
    SETTLE_S,
    STREAM_S,
    frame_problems,
    gave_up,
    numbered_records,
    observe,
    one_way_frame,
    reject_window,
    rejection,
)
from spec.shuffle import codec, errors
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.reader import DATA_HEADER_LENGTH
from spec.shuffle.records import RECORD_LENGTH, encode_records
from spec.shuffle.settings import key_of


READER_WORKLOAD: Final = Workload(READER, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST)
UNCHECKED_READER_WORKLOAD: Final = Workload(READER, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                                            settings={key_of("checksum_enabled"): "false"})
"""Checksums off: a fault only the size or framing checks can refuse (whatever bytes a lenient decoder
took as the payload, no checksum gives it away)."""


class ReaderSession:
    """A reader under test connected to the peer writer, bound by its handshake CREDIT."""

    def __init__(self, t: ShuffleTarget, ctx: CaseContext, workload: Workload = READER_WORKLOAD,
                 other_writers: int = 0) -> None:
        """``other_writers``: the reader also reads that many more peer writers (ids after the first), which
        accept its connection and send nothing. The peer writer names itself PEER_WRITER_ID; the reader
        knows it by ``workload.writer_id`` (another id in a later job)."""
        self.peer = PeerWriter(ctx, PEER_WRITER_ID, READER_ID_UNDER_TEST, READER_ID_UNDER_TEST + 1,
                               directory_id=workload.writer_id)
        self.others = [PeerWriter(ctx, PEER_WRITER_ID + 1 + i, READER_ID_UNDER_TEST, READER_ID_UNDER_TEST + 1)
                       for i in range(other_writers)]
        self.ctx = ctx
        self._impl: AbstractRunning | None = None
        self._target = t
        self._workload = replace(workload, other_writers={
            p.writer_id: f"{p.address[0]}:{p.address[1]}" for p in self.others})
        self.first: Message | None = None

    def __enter__(self) -> ReaderSession:
        self._impl = self._target.reader(self._workload, self.peer.address, self.ctx)
        try:
            self.first = self.peer.bind(STREAM_S)
            for other in self.others:
                other.bind(STREAM_S)
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
        for other in self.others:
            other.close()
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


SPLIT_PAUSE_S: Final = 0.02
"""Between the writes of a split stream, so that the reader reads each on its own."""
BATCHES: Final = (numbered_records("a", 3), numbered_records("b", 1), numbered_records("c", 50, 100))


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


PEER_MAP_ID: Final = 11
"""The peer writer's directory id in a later job (Spark: its map task id), other than its partition id."""
LATER_JOB_READER_WORKLOAD: Final = Workload(READER, writer_id=PEER_MAP_ID, reader_id=READER_ID_UNDER_TEST)


def r_later_job_ids(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """A later job (docs/spec/shuffle.md#channel-ids): the reader knows its writer by map task id 11 and
    names it in the handshake; the writer names itself by partition 3, which every later CREDIT and the
    ack echo; the stream completes."""
    with ReaderSession(t, ctx, LATER_JOB_READER_WORKLOAD) as s:
        heard: list[Message | None] = [s.first]
        data = s.data(*BATCHES[:2])
        for message in data:
            s.send(message)
            heard.append(s.expect(CreditMessage))
        terminator = s.terminator()
        s.send(terminator)
        heard.append(s.expect(TerminationAckMessage))
        echo = CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST, num_messages=1, seq=0)
        want: list[Message | None] = [CreditMessage(writer_id=PEER_MAP_ID, reader_id=READER_ID_UNDER_TEST, num_messages=1, seq=0),
                *[echo] * len(data),
                TerminationAckMessage(seq=terminator.seq, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST)]
        return Verdict(heard == want, ", ".join(describe(m) for m in want if m is not None), s.heard())


def ack_echo(batches: Sequence[Sequence[bytes]]) -> CheckFn:
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


def reader_fault(what: str, condition: str | None, script: Callable[[ReaderSession], bool],
                  forbidden: Callable[[Message], bool] = lambda m: False, forbidden_text: str = "",
                  workload: Workload = READER_WORKLOAD) -> CheckFn:
    """Run ``script`` (False: the stream did not get as far as the fault), then judge the rejection."""
    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        with ReaderSession(t, ctx, workload) as s:
            if not isinstance(s.first, CreditMessage) or not script(s):
                return Verdict(False, f"the stream up to the fault ({what})", s.heard() + "; " + s.link.close_reason)
            return rejection(ctx, s.impl, [s.link], what, condition, forbidden, forbidden_text)

    return check


BOUND_BUFFER_SIZE: Final = 100
BOUND_RECORD_SIZE: Final = 50
FRAME_BOUND_WORKLOAD: Final = replace(READER_WORKLOAD, settings={
    key_of("network_buffer_size"): str(BOUND_BUFFER_SIZE), MAX_RECORD_SIZE_KEY: str(BOUND_RECORD_SIZE)})
"""A reader whose largest DATA is a buffer one byte below the flush threshold (89 bytes of records) and one more
record of maxRecordSize (50), with its length: 143 bytes of payload (docs/spec/shuffle.md#frame)."""


def largest_data(extra: int) -> DataMessage:
    """The largest DATA :data:`FRAME_BOUND_WORKLOAD` may receive, its last record ``extra`` bytes longer."""
    below = BOUND_BUFFER_SIZE * 9 // 10 - 1
    payload = encode_records([b"a" * (below - RECORD_LENGTH.size), b"b" * (BOUND_RECORD_SIZE + extra)])
    return DataMessage(seq=0, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                       checksum=payload_checksum(payload), payload=payload)


def r_accepts_largest_frame(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx, FRAME_BOUND_WORKLOAD) as s:
        data = largest_data(0)
        s.send(data)
        credit = s.expect(CreditMessage)
        return Verdict(credit is not None, f"a CREDIT for a DATA of {len(data.payload)} payload bytes (networkBufferSize "
                       f"{BOUND_BUFFER_SIZE}, {MAX_RECORD_SIZE_KEY} {BOUND_RECORD_SIZE})",
                       s.heard() + (f"; {s.link.close_reason}" if credit is None else ""))


def one_past_the_bound(s: ReaderSession) -> bool:
    return s.send(largest_data(1))


def data_for_another_writer(s: ReaderSession) -> bool:
    """After a DATA naming writer 3 (which sets the connection's partition id, docs/spec/shuffle.md#channel-ids)
    and its CREDIT, a well-formed DATA (seq 1, right checksum) that names writer 4 on the same connection."""
    (first,) = s.data([b"first"])
    if not s.send(first) or s.expect(CreditMessage) is None:
        return False
    return s.send(_stray(PEER_WRITER_ID + 1, READER_ID_UNDER_TEST, seq=1))


def data_for_another_reader(s: ReaderSession) -> bool:
    """A well-formed DATA (seq 0, right checksum) on the right writer's connection naming another reader."""
    return s.send(_stray(PEER_WRITER_ID, READER_ID_UNDER_TEST + 1))


def _stray(writer_id: int, reader_id: int, seq: int = 0) -> DataMessage:
    payload = encode_records([b"stray"])
    return DataMessage(seq=seq, writer_id=writer_id, reader_id=reader_id, checksum=payload_checksum(payload),
                       payload=payload)


def _messages(*messages: Message) -> list[Message]:
    return list(messages)


def is_credit(m: Message) -> bool:
    return isinstance(m, CreditMessage)


def is_ack(m: Message) -> bool:
    return isinstance(m, TerminationAckMessage)


def is_credit_or_ack(m: Message) -> bool:
    return isinstance(m, (CreditMessage, TerminationAckMessage))


def _first_accepted(s: ReaderSession, *batches: Sequence[bytes]) -> list[DataMessage]:
    """Make DATA 0.. of ``batches``, send DATA 0 and wait for its CREDIT; [] if it did not come."""
    data = s.data(*batches)
    s.send(data[0])
    return data if s.expect(CreditMessage) is not None else []


def duplicate(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0])
    return bool(data) and s.send(data[0])


def gap(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0], BATCHES[1])
    return bool(data) and s.send(_with_seq(data[1], 2))


def missing_at_end(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0], BATCHES[1])  # DATA 1 is made but never sent
    return bool(data) and s.send(s.terminator())


def first_not_zero(s: ReaderSession) -> bool:
    return s.send(_with_seq(s.data(BATCHES[0])[0], 1))


def corrupt(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0], BATCHES[2])
    return bool(data) and s.send(_with_checksum(data[1], data[1].checksum ^ 0x00010000))


def zero_checksum(s: ReaderSession) -> bool:
    """DATA 1 carries checksum 0 (what a writer with checksums off sends) though its CRC32C is not 0."""
    data = _first_accepted(s, BATCHES[0], BATCHES[2])
    return bool(data) and payload_checksum(data[1].payload) != 0 and s.send(_with_checksum(data[1], 0))


OTHER_TRANSPORT_TYPE: Final = 99
"""A transport message type byte no Spark message has (Spark's ``Message.Type.decode`` throws on it)."""


def other_transport_type(s: ReaderSession) -> bool:
    """A well-formed DATA (seq 0, right checksum) in a frame whose transport type is not OneWayMessage."""
    frame = bytearray(codec.encode_frame(s.data(BATCHES[0])[0]))
    frame[8] = OTHER_TRANSPORT_TYPE
    return s.link.send_raw(bytes(frame))


def _with_seq(m: DataMessage, seq: int) -> DataMessage:
    return DataMessage(seq=seq, writer_id=m.writer_id, reader_id=m.reader_id, checksum=m.checksum, payload=m.payload)


def _with_checksum(m: DataMessage, checksum: int) -> DataMessage:
    return DataMessage(seq=m.seq, writer_id=m.writer_id, reader_id=m.reader_id, checksum=checksum, payload=m.payload)


def duplicate_then_terminate(s: ReaderSession) -> bool:
    data = _first_accepted(s, BATCHES[0])
    return bool(data) and s.send(data[0]) and s.send(s.terminator())


def raw_bytes(data: bytes) -> Callable[[ReaderSession], bool]:
    return lambda s: s.link.send_raw(data)


def sized_frame(m: DataMessage, data_size: int) -> bytes:
    """``m``'s frame with its data_size field replaced by ``data_size`` (the payload as it is)."""
    body = codec.encode_body(m)
    return one_way_frame(body[:20] + struct.pack(">i", data_size) + body[24:])


def size_mismatch(s: ReaderSession) -> bool:
    """A DATA whose data_size is one more than the payload bytes present."""
    m = s.data(BATCHES[0])[0]
    return s.link.send_raw(sized_frame(m, m.data_size + 1))


def size_short(s: ReaderSession) -> bool:
    """A DATA (checksum 0: run with checksums off) whose data_size covers its first record only: a second
    whole record follows, so only the size check can refuse it."""
    kept = encode_records([b"kept"])
    body = codec.encode_body(DataMessage(seq=0, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                                         checksum=0, payload=kept))
    return s.link.send_raw(one_way_frame(body + encode_records([b"trailing"])))


def _writer_closes(s: ReaderSession) -> bool:
    if not _first_accepted(s, BATCHES[0]):
        return False
    s.link.close()
    return True


def r_writer_closes_early(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        if not isinstance(s.first, CreditMessage) or not _writer_closes(s):
            return Verdict(False, "DATA 0 credited before the close", s.heard())
        seen = observe(s.impl, [], reject_window(ctx), lambda o: bool(o.errors))
        return Verdict(bool(seen.errors), "reports an error (the writer closed before TERMINATION_CONTROL)",
                       seen.text())


def split_at_every_offset(frames: Sequence[bytes]) -> list[bytes]:
    """The frames as writes in which frame ``i`` is cut ``i + 1`` bytes in: each write completes a split
    frame and starts the next one, and the cuts fall at every offset of the headers.

    A frame cut inside its frame header is cut once more ``body_length`` bytes after that, so that
    the write topping up its header is as long as its body and still leaves it incomplete."""
    writes, carry = [], b""
    for i, frame in enumerate(frames):
        cut = min(i + 1, len(frame) - 1)
        writes.append(carry + frame[:cut])
        body_length = len(frame) - codec.FRAME_HEADER_LENGTH
        if cut < codec.FRAME_HEADER_LENGTH and cut + body_length < len(frame):
            writes.append(frame[cut:cut + body_length])
            cut += body_length
        carry = frame[cut:]
    return writes + [carry]


def r_split_and_coalesced(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        headers = codec.FRAME_HEADER_LENGTH + DATA_HEADER_LENGTH
        data = s.data(*(numbered_records(f"s{i}", 1) for i in range(headers + 1)))
        terminator = s.terminator()
        for piece in split_at_every_offset([codec.encode_frame(m) for m in _messages(*data, terminator)]):
            if not s.link.send_raw(piece):
                break
            time.sleep(SPLIT_PAUSE_S)  # the next piece is read on its own: the split is seen, not coalesced
        for _ in range(len(data) + 1):
            if s.peer.hear(STREAM_S) is None:
                break
        want = [CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                              num_messages=1)] * (len(data) + 1) + [
            TerminationAckMessage(seq=terminator.seq, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST)]
        return Verdict(s.peer.heard == want, f"{len(data)} DATA + TERMINATION_CONTROL, each frame split at another "
                       f"offset of its headers (0..{headers}) and completed in the write that starts the next: "
                       f"{len(data) + 1} CREDIT, then the ack", s.heard())


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


def _negative_size(s: ReaderSession) -> bool:
    """DATA seq 0 with data_size -1 before its payload: negative, and so differing from the bytes present."""
    return s.link.send_raw(sized_frame(s.data(BATCHES[0])[0], -1))


def _negative_size_out_of_order(s: ReaderSession) -> bool:
    """DATA seq 5 (a gap), a wrong checksum and data_size -1: the body is refused before the stream judges it."""
    m = s.data(BATCHES[0])[0]
    return s.link.send_raw(sized_frame(_with_checksum(_with_seq(m, 5), m.checksum ^ 1), -1))


def _size_mismatch_out_of_order(s: ReaderSession) -> bool:
    """DATA seq 1 (a gap) whose data_size is one more than its payload: the size first, not the sequence."""
    m = _with_seq(s.data(BATCHES[0])[0], 1)
    return s.link.send_raw(sized_frame(m, m.data_size + 1))


def _oversized_other_transport(s: ReaderSession) -> bool:
    """A header announcing 2^31+100 bytes and transport type 99: the length is checked first."""
    header = bytearray(OVERSIZED_HEADER)
    header[8] = OTHER_TRANSPORT_TYPE
    return s.link.send_raw(bytes(header))


FIRST_RULE_OF_TWO: Final = (
    ("DATA with data_size -1 and its payload after it", errors.NegativeDataSize.condition, _negative_size),
    ("DATA seq 5 with a wrong checksum and data_size -1", errors.NegativeDataSize.condition,
     _negative_size_out_of_order),
    ("DATA seq 1 with data_size one past its payload", errors.DataSizeMismatch.condition, _size_mismatch_out_of_order),
    ("a header of 2^31+100 bytes with transport type 99", errors.FrameLengthOutOfRange.condition,
     _oversized_other_transport),
)
"""Inputs each breaking two rules, with the condition of the one the spec checks first (docs/spec/shuffle.md
#message-data: the frame length, then the transport type; a DATA body's size sign, then its size, then the
stream's sequence and checksum rules)."""


def r_first_rule_of_two(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """Each input of FIRST_RULE_OF_TWO is rejected, and an error it reports names the rule checked first."""
    seen: list[str] = []
    for what, condition, script in FIRST_RULE_OF_TWO:
        with ReaderSession(t, ctx) as s:
            if not isinstance(s.first, CreditMessage) or not script(s):
                return Verdict(False, f"the stream up to the fault ({what})", s.heard() + "; " + s.link.close_reason)
            judged = rejection(ctx, s.impl, [s.link], what, condition, is_credit, "CREDIT for it")
            if not judged.passed:
                return judged
            seen.append(f"{what}: {judged.actual}")
    return Verdict(True, "each input breaking two rules is rejected as the rule checked first", "; ".join(seen))


def r_trailing_bytes(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        terminator = s.terminator()
        s.link.send_raw(one_way_frame(codec.encode_body(terminator) + b"\x00\x00\x00\x00"))
        seen = observe(s.impl, [s.link], 1.0, lambda o: gave_up(o) or bool(o.messages))
        return Verdict(True, "INFO: TERMINATION_CONTROL with 4 trailing body bytes (Spark ignores them; the "
                       "spec's codec rejects them)", seen.text())


def r_fast_writer(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with ReaderSession(t, ctx) as s:
        data = s.data(*(numbered_records(f"f{i}", 30, 1000) for i in range(64)))
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


SMALL_RECORD: Final = b"q" * 60
"""One record per DATA: data_size 64, so a DATA counts 32 + 64 = 96 bytes against the reader's quota."""
SMALL_CHARGE: Final = DATA_HEADER_LENGTH + RECORD_LENGTH.size + len(SMALL_RECORD)
BIG_RECORD: Final = b"Q" * (2 * SMALL_CHARGE - DATA_HEADER_LENGTH - RECORD_LENGTH.size)
"""A DATA counting twice a small one (192 bytes)."""
QUOTA: Final = 3 * SMALL_CHARGE
QUIET_S: Final = 0.5
"""How long a paused reader must leave a DATA unread (no CREDIT for it)."""
SLOW_READER_WORKLOAD: Final = Workload(READER, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                                       settings={key_of("reader_max_memory"): str(QUOTA)}, slow_consumer=True)


def r_quota_boundaries(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """readerMaxMemory 288 and one writer: its quota is 288 bytes of unconsumed DATA (header + data_size).
    The peer sends one DATA at a time, the consumer takes them only when told; a CREDIT shows the DATA was read.
    Quota left: a, b, c read: 192, 96, 0 (pause), d waits; a and b taken: 192 (resume), d read: 96; e read:
    -96 (pause), f waits; c taken: 0 (still paused), f waits; d taken: 96 (resume), f read: 0; e, f taken,
    the TERMINATION_CONTROL is read and acknowledged.

    A "waits" never directly follows a resume: Spark 4.3.0's ``updateQuota`` resumes with ``setAutoRead(true)``
    and ``channel.read()``, two read requests, and the second may still read one arrival after a pause that
    the first read caused (a race read off its bytecode, not a rule)."""
    with ReaderSession(t, ctx, SLOW_READER_WORKLOAD) as s:
        a, b, c, d, e, f = s.data(*([SMALL_RECORD],) * 4, [BIG_RECORD], [SMALL_RECORD])
        steps: list[PacedStep] = [
            ("a", a, 0, True), ("b", b, 0, True), ("c (quota exactly 0)", c, 0, True), ("d", d, 0, False),
            ("a, b taken", None, 2, True), ("e (quota -96)", e, 0, True), ("f", f, 0, False),
            ("c taken (quota back to exactly 0)", None, 1, False), ("d taken", None, 1, True)]
        ok, seen = _paced(s, steps)
        if not ok:
            return Verdict(False, _quota_expectation(), "; ".join(seen))
        terminator = s.terminator()
        s.send(terminator)
        s.impl.consume(2)
        ack = s.expect(TerminationAckMessage)
        seen.append(f"e, f taken, TERMINATION_CONTROL: {describe(ack) if ack else s.heard()}")
        return Verdict(ack is not None and ack.seq == terminator.seq, _quota_expectation(), "; ".join(seen))


PacedStep = tuple[str, Message | None, int, bool]
"""A step of a paced exchange: its name, a message to send (or None), how many DATA the consumer may take
next, and whether the reader must answer with a CREDIT (True) or leave the DATA unread (False)."""


def _paced(s: ReaderSession, steps: Sequence[PacedStep]) -> tuple[bool, list[str]]:
    """Run ``steps`` in order, stopping at the first the reader gets wrong; whether all held, and what was seen."""
    seen = []
    for name, message, consume, credited in steps:
        if message is not None:
            s.send(message)
        if consume:
            s.impl.consume(consume)
        # a paused reader leaves the DATA unread, owing no CREDIT yet: listen without the peer's bookkeeping
        got = s.expect(CreditMessage) if credited else s.link.receive(QUIET_S)
        seen.append(f"{name}: {describe(got) if got else 'nothing'}")
        if (got is not None) != credited:
            seen[-1] += f" (expected {'a' if credited else 'no'} CREDIT)"
            return False, seen
    return True, seen


def _quota_expectation() -> str:
    return (f"readerMaxMemory {QUOTA}, DATA of {SMALL_CHARGE} B (e: {2 * SMALL_CHARGE} B) sent one at a time, "
            "consumed only when told: a CREDIT for a, b, c; none for d while the quota is exactly 0; d read once a "
            "and b are taken; e read (quota -96); f unread, also after c is taken (quota exactly 0), read after d "
            "is taken; then the ack")


def r_quota_per_writer(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """readerMaxMemory 385 over two writers: each gets 192 bytes (rounded down), two small DATA. Writer 3's a
    and b are read (quota exactly 0); c stays unread until a is taken."""
    workload = replace(SLOW_READER_WORKLOAD, settings={key_of("reader_max_memory"): str(4 * SMALL_CHARGE + 1)})
    with ReaderSession(t, ctx, workload, other_writers=1) as s:
        a, b, c = s.data(*([SMALL_RECORD],) * 3)
        ok, seen = _paced(s, [("a", a, 0, True), ("b (quota exactly 0)", b, 0, True), ("c", c, 0, False),
                              ("a taken", None, 1, True)])
        return Verdict(ok, f"readerMaxMemory {4 * SMALL_CHARGE + 1}, 2 writers: a quota of {2 * SMALL_CHARGE} B "
                       f"each (rounded down): writer {PEER_WRITER_ID}'s DATA a and b credited, c left unread until a "
                       "is taken", "; ".join(seen))


def r_ends_after_every_writer(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """A reader of two writers: the first writer's stream ends (a DATA, its terminator, the ack) before the
    other writer sends anything; the reader still credits the other's DATA and acknowledges its terminator,
    since a reader's stream ends once every writer terminated, not at the first ack."""
    with ReaderSession(t, ctx, other_writers=1) as s:
        for message in s.data([b"a"]):
            s.send(message)
        s.send(s.terminator())
        first = [describe(m) if m is not None else "nothing" for m in (s.peer.hear(STREAM_S), s.peer.hear(STREAM_S))]
        other = s.others[0]
        made = [x.message for x in other.batch([b"b"]) + other.finish()]
        for sent in made:
            other.connected.send(sent)
        heard = [other.hear(STREAM_S) for _ in made]
        ok = isinstance(heard[0], CreditMessage) and isinstance(heard[-1], TerminationAckMessage) \
            and heard[-1].seq == made[-1].seq
        return Verdict(ok, f"writer {PEER_WRITER_ID}: CREDIT, ACK; then writer {other.writer_id}: a CREDIT for its "
                       f"DATA and the ACK of its terminator", f"writer {PEER_WRITER_ID}: {', '.join(first)}; writer "
                       f"{other.writer_id}: {', '.join(describe(m) if m is not None else 'nothing' for m in heard)}")
