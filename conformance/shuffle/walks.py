"""The shuffle walk corpus (``vectors/walks.json``): seeded walks over the trace contract's inputs, kept only
when they tell the spec machines apart from one of their first-order operator mutants (issue 43).

A walk is one trace as ``traces.json`` holds them (a writer or a reader under test, its settings and ids,
then inputs on the virtual clock), answered with every observable the contract has: the sends, the events
and the instant the side next needs a tick (``deadlines``). :func:`candidates` draws the walks from
:data:`SEED` as a tester would bias them: every timer at its instant and one millisecond either side,
buffers filled to the flush threshold and one byte short, permits and quotas spent to exactly 0 and one
past, sequence numbers right, repeated, skipped and negative, ids valid, unknown and of another pair,
several faults in one message, a failed connect followed by a connect and fresh traffic, input after the
end that must change nothing. Each next input is chosen from the spec machine's own state, so every
candidate is a trace the machine accepts (a walk the spec refuses as a caller's bug is never drawn).

``python -m conformance.shuffle.walks --select`` (minutes; run it under ``nice``) runs the selection of
:mod:`conformance.operator_mutants` over the mutants of :data:`MODULES` and writes ``walks.json`` and
``docs/walks/shuffle.md``; ``python -m conformance.shuffle.walks [--check]`` rebuilds ``walks.json`` from
the seed and the walks it records (their candidate numbers), answers taken from the spec as it is now.
"""

from __future__ import annotations

import copy
import json
import random
import re
import sys
from pathlib import Path
from typing import Any, Final, Mapping, Sequence

from conformance import vectorgen
from conformance.operator_mutants import (
    OperatorMutant,
    WalkTimeout,
    at_import,
    every_mutant,
    fresh_modules,
    import_runner,
    module_path,
    rule_of,
    select,
    time_limit,
)
from conformance.mutant_report import Judgement, render_report
from conformance.mutant_report import judged as judged_by
from conformance.shuffle.vector_traces import answer_json, apply_input, new_machine, run_trace
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.jsonform import to_json
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.reader import DATA_HEADER_LENGTH, ReaderMachine
from spec.shuffle.records import RECORD_LENGTH, encode_records
from spec.shuffle.settings import ShuffleSettings, key_of
from spec.shuffle.steps import UsageError
from spec.shuffle.transitions import ReaderChannelState, WriterChannelState, WriterState
from spec.shuffle.writer import GATHER_MIN, TCP_RECEIVE_BUFFER, TCP_SEND_BUFFER, WriterMachine

ROOT: Final = Path(__file__).resolve().parents[2]
WALK_FILE: Final = Path(__file__).resolve().parent / "vectors" / "walks.json"
REPORT_FILE: Final = ROOT / "docs" / "walks" / "shuffle.md"
SCHEMA_NAME: Final = "walks.schema.json"
GENERATOR_VERSION: Final = "1"
SEED: Final = 43
CANDIDATES: Final = 4000
MAX_STEPS: Final = 14
MAX_RECORD: Final = 12_000
"""Records stay readable in a vector (a buffer past that is filled only by its flush timer)."""

MODULES: Final = (
    "spec.shuffle.writer", "spec.shuffle.reader", "spec.shuffle._machine", "spec.shuffle.registry",
    "spec.shuffle.settings", "spec.shuffle.records", "spec.clock", "spec.shuffle.checksum",
    "spec.shuffle.jsonform", "spec.shuffle.messages", "spec.shuffle.errors",
)
"""The spec modules a trace reaches (the machines, what they import and run): the ones mutated.
``spec.shuffle.codec`` and ``framing`` are not run by a trace (messages arrive decoded, as JSON); the wire
vectors and the workload cases judge them."""
PREFIXES: Final = ("spec.", "conformance.shuffle.vector_traces", "conformance.shuffle.walks")
"""Imported afresh for each mutant: the spec and the two modules that bind its names at import."""

SOCKETS: Final = TCP_SEND_BUFFER + TCP_RECEIVE_BUFFER
CAUSES: Final = ("Connection reset by peer", "Broken pipe")

Json = Mapping[str, Any]
Walk = dict[str, Any]


# -- the runner: exactly what the trace driver does for one trace -----------------------------------------

def header_of(walk: Json) -> dict[str, Any]:
    """The trace header of a walk (everything but its steps)."""
    return {k: v for k, v in walk.items() if k != "steps"}


def run_walk(walk: Json) -> list[dict[str, Any]]:
    """The spec machines' answers to every input of ``walk`` (machines_target's play_trace, in process)."""
    return run_trace(str(walk["role"]), walk, walk["steps"])


# -- the generator ----------------------------------------------------------------------------------------

def _m(message: Message) -> dict[str, Any]:
    return to_json(message)


class _Draw:
    """One candidate walk drawn step by step against a live spec machine, whose state biases the values."""

    def __init__(self, rng: random.Random, header: dict[str, Any]) -> None:
        self.rng = rng
        self.header = header
        self.machine = new_machine(header["role"], header)
        self.steps: list[dict[str, Any]] = []
        self.t = 0
        self.deadline: float | None = None
        self.accepted: set[int] = set()
        """Writer walks: the readers whose connection was accepted."""

    def pick(self, *options: Any) -> Any:
        return self.rng.choice(options)

    def later(self) -> int:
        """The next input's instant: now, a millisecond on, or a timer's instant and one either side."""
        marks = [self.t, self.t, self.t + 1]
        if self.deadline is not None and self.deadline < 10**9:
            due = int(self.deadline)
            marks += [due - 1, due, due, due + 1]
        for ms in self.timers():
            marks += [ms - 1, ms, ms + 1]
        return max(self.t, self.rng.choice(marks))

    def timers(self) -> list[int]:
        settings: ShuffleSettings = self.machine.settings
        out = [self.t + settings.network_buffer_max_wait_time_ms]
        if 0 < settings.writer_connection_timeout_ms < 10**7:
            out.append(settings.writer_connection_timeout_ms)
        for key in ("ackTimeoutMs", "connectTimeoutMs"):
            if key in self.header:
                out.append(self.t + int(self.header[key]))
        return out

    def attempt(self, step: dict[str, Any]) -> bool:
        """Apply ``step`` to a copy; keep it when the spec accepts it as an input (no caller's bug)."""
        trial = copy.deepcopy(self.machine)
        try:
            answer = answer_json(apply_input(trial, step), True)
        except (UsageError, ValueError, KeyError):
            return False
        self.machine = trial
        self.steps.append(step)
        self.t = int(step.get("t", self.t))
        self.deadline = answer["deadline"]
        return True


LONG_MAX: Final = 2**63 - 1
INT_MAX: Final = 2**31 - 1
EDGE_SPELLINGS: Final = {
    "writer_connection_timeout_ms": ("9223372036854775807", "9223372036854775807s", "9223372036854775807us",
                                     "-1000us", "-1ms", " -1 ", "1m", "1min", "1MIN", "60s", "1h", "1d", "1001us",
                                     "999us", "1000us"),
    "network_buffer_max_wait_time_ms": ("9223372036854775807", "-1", "-9223372036854775808", "0", " +50 "),
    "reader_max_memory": ("2147483647", "-2147483648", "-1", "0", "1", "2"),
}
"""Values at the edges of a setting's domain, or spelled as only Spark's parser reads them, as Spark reads them
(each a value Spark accepts: a refused one is the settings cases' matter, not a trace's)."""


def _spelled(rng: random.Random, settings: ShuffleSettings) -> dict[str, str]:
    """The settings as Spark keys, some left out (Spark's default) or spelled another way Spark reads, now and
    then one at an edge of its domain."""
    raw = settings.to_dict()
    defaults = ShuffleSettings().to_dict()
    for key, value in list(raw.items()):
        roll = rng.random()
        if value == defaults[key] and roll < 0.3:
            del raw[key]
        elif roll < 0.15:
            if value in ("true", "false"):
                raw[key] = rng.choice((value.upper(), value.capitalize(), f" {value} "))
            elif key == key_of("writer_connection_timeout_ms") and value not in ("-1", "0"):
                ms = int(value)
                raw[key] = rng.choice((f"{ms}ms", f"{ms * 1000}us", f" {ms} ") if ms % 1000 else
                                      (f"{ms // 1000}s", f"{ms // 1000}S", f"{ms * 1000}US", f"{ms}MS"))
            elif value.lstrip("-").isdigit() and not value.startswith("-"):
                raw[key] = rng.choice((f" +{value} ", f"+{value}", f"{value} "))
    if rng.random() < 0.25:
        field = rng.choice(sorted(EDGE_SPELLINGS))
        if field != "reader_max_memory" or settings.reader_max_memory != ShuffleSettings().reader_max_memory:
            raw[key_of(field)] = rng.choice(EDGE_SPELLINGS[field])
    return raw


def _writer_header(rng: random.Random) -> dict[str, Any]:
    peers = rng.choice((1, 1, 2, 2, 3))
    n = rng.choice((1, 16, 20, 21, 100, 1001, 1024, 10000, INT_MAX // (2 * peers), INT_MAX // (2 * peers) + 1))
    memory = rng.choice((1, INT_MAX, peers * SOCKETS + 2 * peers * n, peers * SOCKETS + 2 * peers * n + 1,
                         peers * SOCKETS + (2 * peers + 1) * n, peers * SOCKETS + (2 * peers + 1) * n - 1,
                         peers * SOCKETS + 3 * peers * n, 32 * 1024 * 1024))
    settings = ShuffleSettings(
        checksum_enabled=rng.random() < 0.8, network_buffer_size=n,
        network_buffer_max_wait_time_ms=rng.choice((0, 1, 50, 50, 100)),
        writer_max_memory=memory, writer_connection_timeout_ms=rng.choice((-1, 1, 1000, 1000, 3_600_000, 60_000)))
    header: dict[str, Any] = {"role": "writer", "peers": peers, "settings": _spelled(rng, settings)}
    roll = rng.random()
    if roll < 0.3:
        header["ackTimeoutMs"] = rng.choice((0, 1, 300))
    if rng.random() < 0.25:
        header["directoryId"] = rng.choice((0, 4))
    header["deadlines"] = True
    return header


def _reader_header(rng: random.Random) -> dict[str, Any]:
    peers = rng.choice((1, 1, 2, 2, 3))
    quota = rng.choice((DATA_HEADER_LENGTH + 4, DATA_HEADER_LENGTH + 8, 2 * DATA_HEADER_LENGTH + 10, 200))
    memory = rng.choice((peers * quota, peers * quota + 1, peers * quota - 1, peers * quota + peers - 1, 0, -5,
                         -(2**31), 32 * 1024 * 1024))
    settings = ShuffleSettings(checksum_enabled=rng.random() < 0.8, reader_max_memory=memory)
    header: dict[str, Any] = {"role": "reader", "peers": peers, "settings": _spelled(rng, settings)}
    if rng.random() < 0.3:
        header["writerIds"] = rng.sample((4, 5, 7, 11), peers)
    if rng.random() < 0.45:
        header["connectTimeoutMs"] = rng.choice((0, 1, 300, 1000))
    header["deadlines"] = True
    return header


def _writer_step(d: _Draw) -> dict[str, Any]:
    m = d.machine
    assert isinstance(m, WriterMachine)
    rng = d.rng
    fault = rng.random() < 0.12
    peers = len(m.channels)
    reader = rng.choice([*range(peers)] * 6 + ([peers, -1] if fault else []))
    conn = rng.choice([reader] * 6 + ([9] if fault else []))
    t = d.later()
    ch = m.channels[reader] if 0 <= reader < peers else m.channels[0]
    partition, directory = m.writer_id, m.directory_id
    running = m.state is WriterState.RUNNING and not m.blocked
    unaccepted = [r for r in range(peers) if r not in d.accepted]
    unbound = sorted(r for r in d.accepted if 0 <= r < peers and not m.channels[r].bound)
    awaiting = [c.reader_id for c in m.channels if c.bound and c.state is WriterChannelState.TERMINATING]
    acked = [c.reader_id for c in m.channels if c.bound and c.state is WriterChannelState.TERMINATED]
    bound = [c.reader_id for c in m.channels if c.bound]
    weights = {"accepted": 6 if unaccepted else int(fault), "credit": 6 if unbound else 2 if bound else int(fault),
               "write": 8 if running else int(fault), "finish": 2 if running else int(fault),
               "done": 5 if m._in_flight else 0, "closed": 3 if acked else 2 * fault, "tick": 3, "ack": 8 if awaiting else int(fault),
               "other": 2 * fault}
    kind = rng.choices(list(weights), list(weights.values()))[0]
    if kind == "accepted":
        chosen = rng.choice(unaccepted) if unaccepted and not fault else conn
        d.accepted.add(chosen)
        return {"input": "accepted", "peer": chosen, "t": t}
    if kind == "credit":  # the handshake CREDIT names the directory id; a later one (after each DATA) the partition id
        later = not unbound and bool(bound) and not fault
        if not fault:
            reader = conn = rng.choice(unbound or bound)
        named = rng.choice([directory, directory, partition, directory + 1, 5, INT_MAX, -INT_MAX - 1]) if fault else (
            partition if later else directory)
        credit = CreditMessage(writer_id=named, reader_id=rng.choice([reader, reader, peers, -1]) if fault else reader,
                               num_messages=rng.choice((1, 0, -1)) if fault else 1)
        return {"input": "received", "peer": conn, "message": _m(credit), "t": t}
    if kind == "write":
        size = _record_size(d, ch.buffered, m)
        return {"input": "write", "peer": reader, "record": bytes([rng.randrange(256)]).hex() * size, "t": t}
    if kind == "finish":
        return {"input": "finish", "t": t}
    if kind == "done":
        peer, seq = rng.choice(sorted(m._in_flight))
        if fault:
            return {"input": "sendFailed", "peer": peer, "seq": str(seq), "cause": rng.choice(CAUSES), "t": t}
        return {"input": "sendCompleted", "peer": peer, "seq": str(seq), "t": t}
    if kind == "closed":  # a reader closes its connection once its ack is written; any other close is a fault
        return {"input": "closed", "peer": rng.choice(acked) if acked and not fault else conn, "t": t}
    if kind == "tick":
        return {"input": "tick", "t": t}
    if kind == "ack":
        if awaiting and not fault:
            reader = conn = rng.choice(awaiting)
            ch = m.channels[reader]
        seq = rng.choice((ch.last_seq, ch.last_seq + 1, ch.last_seq - 1, LONG_MAX, -LONG_MAX - 1)) if fault else ch.last_seq
        named = rng.choice((partition, directory, partition + 1)) if fault else partition
        ack = TerminationAckMessage(seq=seq, writer_id=named, reader_id=rng.choice((reader, peers)) if fault else reader)
        return {"input": "received", "peer": conn, "message": _m(ack), "t": t}
    other: Message = rng.choice((
        DataMessage(seq=0, writer_id=partition, reader_id=reader, checksum=0, payload=b""),
        TerminationControlMessage(seq=ch.last_seq + 1, writer_id=partition, reader_id=reader)))
    return {"input": "received", "peer": conn, "message": _m(other), "t": t}


def _record_size(d: _Draw, buffered: int, m: WriterMachine) -> int:
    """A record filling the open buffer to the flush threshold, a byte short or over, or a small one."""
    to_threshold = m._flush_at - buffered - RECORD_LENGTH.size
    sizes = [0, 1, 2, to_threshold - 1, to_threshold, to_threshold, to_threshold + 1]
    if m.settings.network_buffer_size > GATHER_MIN:
        sizes += [GATHER_MIN - 1, GATHER_MIN]
    return max(0, d.rng.choice([size for size in sizes if size <= MAX_RECORD] or [0, 1, 2]))


def _reader_step(d: _Draw) -> dict[str, Any]:
    m = d.machine
    assert isinstance(m, ReaderMachine)
    rng = d.rng
    fault = rng.random() < 0.12
    connecting = [w for w, c in m.channels.items() if c.state is ReaderChannelState.CONNECTING]
    open_ = [w for w, c in m.channels.items() if c.state is ReaderChannelState.OPEN]
    acking = [w for w, c in m.channels.items() if c.state is ReaderChannelState.TERMINATED]
    held = [w for w, c in m.channels.items() if c.unreleased]
    ended = [w for w, c in m.channels.items() if c.state is ReaderChannelState.ACKED]
    weights = {"connected": 6 if connecting else int(fault), "connectFailed": 2 if connecting else 0,
               "data": 10 if open_ else int(fault), "tc": 2 if open_ else int(fault),
               "ackDone": 6 if acking else int(fault), "release": 4 if held else 0, "closed": 3 if ended else 2 * fault, "tick": 2,
               "other": 2 * fault}
    kind = rng.choices(list(weights), list(weights.values()))[0]
    pool = {"connected": connecting, "connectFailed": connecting, "data": open_, "tc": open_, "ackDone": acking,
            "release": held, "closed": ended}.get(kind) or list(m.channels)
    peer = rng.choice(pool if not fault else list(m.channels))
    ch = m.channels[peer]
    t = d.later()
    partition = ch.partition_id if ch.partition_id is not None else (
        peer if "writerIds" not in d.header else rng.choice((0, 1, 3)))
    named = rng.choice((partition, partition + 1, peer if peer != partition else 6, INT_MAX, -INT_MAX - 1)
                       ) if fault else partition
    reader = rng.choice((0, 0, 1, INT_MAX, -INT_MAX - 1)) if fault else 0
    seq = rng.choice((ch.last_seq + 1, ch.last_seq, ch.last_seq + 2, -1, LONG_MAX, -LONG_MAX - 1)
                     ) if fault else ch.last_seq + 1
    if kind == "connected":
        return {"input": "connected", "peer": peer, "t": t}
    if kind == "connectFailed":
        return {"input": "connectFailed", "peer": peer, "cause": rng.choice(("refused", "timed out")), "t": t}
    if kind == "data":
        payload = _payload(d, ch.remaining, fault)
        checksum = payload_checksum(payload)
        if fault and rng.random() < 0.4:
            checksum = rng.choice((checksum ^ 1, 0))
        message = DataMessage(seq=seq, writer_id=named, reader_id=reader, checksum=checksum, payload=payload)
        return {"input": "received", "peer": peer, "message": _m(message), "t": t}
    if kind == "tc":
        return {"input": "received", "peer": peer, "t": t,
                "message": _m(TerminationControlMessage(seq=seq, writer_id=named, reader_id=reader))}
    if kind == "ackDone":
        if fault:
            return {"input": "sendFailed", "peer": peer, "seq": str(ch.last_seq), "cause": rng.choice(CAUSES), "t": t}
        return {"input": "sendCompleted", "peer": peer, "seq": str(ch.last_seq), "t": t}
    if kind == "release":
        return {"input": "release", "peer": peer, "seq": str(rng.choice(sorted(ch.unreleased) or [0])), "t": t}
    if kind == "closed":
        return {"input": "closed", "peer": peer, "t": t}
    if kind == "tick":
        return {"input": "tick", "t": t}
    other: Message = rng.choice((CreditMessage(writer_id=named, reader_id=reader, num_messages=1),
                                 TerminationAckMessage(seq=seq, writer_id=named, reader_id=reader)))
    return {"input": "received", "peer": peer, "message": _m(other), "t": t}


def _payload(d: _Draw, remaining: int, fault: bool) -> bytes:
    """Records whose DATA leaves the writer's quota at exactly 0, one byte either side, or small; now and
    then a payload that is not a run of whole records."""
    rng = d.rng
    if fault and rng.random() < 0.5:
        return rng.choice((RECORD_LENGTH.pack(3) + b"xy", encode_records([b"x"]) + b"\0\0\0", RECORD_LENGTH.pack(-1),
                           b"\0"))
    fill = remaining - DATA_HEADER_LENGTH - RECORD_LENGTH.size
    size = rng.choice((0, 1, 3, fill - 1, fill, fill, fill + 1))
    if not 0 <= size <= 300:
        size = rng.choice((0, 1, 3))
    records = [bytes([rng.randrange(256)]) * size]
    if rng.random() < 0.2:
        records = [b"", *records]
    return encode_records(records)


def draw(rng: random.Random) -> Walk:
    """One candidate walk."""
    try:
        header = _writer_header(rng) if rng.random() < 0.55 else _reader_header(rng)
        d = _Draw(rng, header)
    except (UsageError, ValueError):
        return draw(rng)  # settings Spark refuses (a budget, an int overflowed): not a trace
    target = rng.randint(3, MAX_STEPS)
    choose = _writer_step if header["role"] == "writer" else _reader_step
    tries = 0
    while len(d.steps) < target and tries < 6 * MAX_STEPS:
        tries += 1
        if d.machine.done:
            if rng.random() < 0.5:
                d.attempt(choose(d))  # input after the end must change nothing
            break
        d.attempt(choose(d))
    return {**header, "steps": d.steps}


# -- derived walks: each pairing of a rule's inputs that the draws reach only through several faults at once ------

_MALFORMED_PAYLOADS: Final = (b"\0", b"\0\0\0", RECORD_LENGTH.pack(-1), RECORD_LENGTH.pack(-2), RECORD_LENGTH.pack(0),
                              RECORD_LENGTH.pack(3) + b"xy", RECORD_LENGTH.pack(INT_MAX),
                              *(encode_records([b"x"]) + tail for tail in (b"\0", b"\0\0\0", RECORD_LENGTH.pack(-1),
                                                                            RECORD_LENGTH.pack(2) + b"y")))
"""Payloads that are not a run of whole records: a length cut short, negative, zero, past the end, after a record."""


def _steps(*inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Inputs one millisecond apart."""
    return [{**step, "t": t} for t, step in enumerate(inputs)]


def _received(peer: int, message: Message) -> dict[str, Any]:
    return {"input": "received", "peer": peer, "message": _m(message)}


def _walk(role: str, peers: int, settings: dict[str, str], *inputs: dict[str, Any]) -> Walk:
    return {"role": role, "peers": peers, "settings": settings, "deadlines": True, "steps": _steps(*inputs)}


def _payload_walks() -> list[Walk]:
    """Every malformed payload as the first DATA of a reader, otherwise right (its seq, ids and CRC32C), with
    checksums on and off: the record decoder's each bound judged alone."""
    return [_walk("reader", 1, {key_of("checksum_enabled"): enabled}, {"input": "connected", "peer": 0},
                  _received(0, DataMessage(seq=0, writer_id=0, reader_id=0, checksum=payload_checksum(payload),
                                           payload=payload)))
            for payload in _MALFORMED_PAYLOADS for enabled in ("true", "false")]


def _reader_late_walks() -> list[Walk]:
    """A reader of two writers, the second connected and silent (so the reader does not complete), the first's
    channel in each state it can be in once connected (OPEN, TERMINATED, ACKED) given every message kind with the
    right ids and the next seq: DATA with its CRC32C right and wrong, TERMINATION_CONTROL, CREDIT and
    TERMINATION_ACK (which a reader never receives)."""
    record = encode_records([b"r"])
    right = payload_checksum(record)
    opened = [{"input": "connected", "peer": 1}, {"input": "connected", "peer": 0},
              _received(0, DataMessage(seq=0, writer_id=0, reader_id=0, checksum=right, payload=record))]
    ended = [*opened, _received(0, TerminationControlMessage(seq=1, writer_id=0, reader_id=0))]
    acked = [*ended, {"input": "sendCompleted", "peer": 0, "seq": "1"}]

    def every_kind(seq: int) -> tuple[Message, ...]:
        return (DataMessage(seq=seq, writer_id=0, reader_id=0, checksum=right, payload=record),
                DataMessage(seq=seq, writer_id=0, reader_id=0, checksum=right ^ 1, payload=record),
                TerminationControlMessage(seq=seq, writer_id=0, reader_id=0),
                CreditMessage(seq=seq, writer_id=0, reader_id=0), TerminationAckMessage(seq=seq, writer_id=0, reader_id=0))

    return [_walk("reader", 2, {}, *before, _received(0, message))
            for before, seq in ((opened, 1), (ended, 2), (acked, 2)) for message in every_kind(seq)]


def _writer_late_walks() -> list[Walk]:
    """A writer of two readers, both bound (so the writer does not complete while the second has not acknowledged),
    the first's channel in each state a reader's messages can find it in (AWAITING_CREDIT, OPEN, TERMINATING,
    TERMINATED) given every message kind with the right ids: CREDIT, TERMINATION_ACK at the channel's last seq and
    one either side, and DATA and TERMINATION_CONTROL (which a writer never receives)."""
    accepted = [{"input": "accepted", "peer": 1}, _received(1, CreditMessage(writer_id=0, reader_id=1)),
                {"input": "accepted", "peer": 0}]
    opened = [*accepted, _received(0, CreditMessage(writer_id=0, reader_id=0))]
    finishing = [*opened, {"input": "finish"}]
    acked = [*finishing, _received(0, TerminationAckMessage(seq=0, writer_id=0, reader_id=0))]

    def every_kind(last: int) -> tuple[Message, ...]:
        return (CreditMessage(writer_id=0, reader_id=0),
                *(TerminationAckMessage(seq=seq, writer_id=0, reader_id=0) for seq in (last - 1, last, last + 1)),
                DataMessage(seq=last + 1, writer_id=0, reader_id=0, checksum=0, payload=b""),
                TerminationControlMessage(seq=last + 1, writer_id=0, reader_id=0))

    return [_walk("writer", 2, {}, *before, _received(0, message))
            for before, last in ((accepted, -1), (opened, -1), (finishing, 0), (acked, 0)) for message in every_kind(last)]


def _connection_walks() -> list[Walk]:
    """A writer of three readers, each connection accepted and the middle reader's bound: a CREDIT from every
    connection naming every reader (a bound connection naming a reader below or above its own, an unbound one
    naming the bound reader), so each order of the ids a connection rule compares is judged."""
    bound = [*({"input": "accepted", "peer": peer} for peer in range(3)),
             _received(1, CreditMessage(writer_id=0, reader_id=1))]
    return [_walk("writer", 3, {}, *bound, _received(conn, CreditMessage(writer_id=0, reader_id=reader)))
            for conn in range(3) for reader in range(3)]


LEAVE_SETTINGS: Final = {key_of("network_buffer_size"): "16", key_of("writer_max_memory"): "1",
                          key_of("network_buffer_max_wait_time_ms"): "1000",
                          key_of("writer_connection_timeout_ms"): "1000"}
"""The leave walks' writer: a buffer is 16 bytes (a 10-byte record fills it to its flush threshold of 14, a 1-byte
one leaves it open), 2 x 16 permits a reader (exactly what the writer's memory allows, so one buffer's permits
lost or gained moves the write that blocks the producer), timers at 1000 ms, past every input but the last tick."""
_SMALL, _FULL = "61", "62" * 10
_LEAVE_PREFIXES: Final = (
    ("unbound", ()), ("unbound-open-buffer", ("small",)), ("unbound-queued-data", ("full",)),
    ("bound", ("bind",)), ("bound-open-buffer", ("bind", "small")), ("bound-data-in-flight", ("bind", "full")),
    ("bound-data-written", ("bind", "full", "written", "credit")),
    ("bound-data-in-flight-and-open-buffer", ("bind", "full", "small")),
    ("blocked-on-its-record", ("bind", "full", "full", "other-full", "other-full", "full")),
    ("blocked-on-another-record", ("bind", "full", "full", "other-full", "other-full", "other-full")),
    ("terminating", ("bind", "full", "finish")), ("terminating-unbound", ("small", "finish")),
    ("terminating-written", ("bind", "full", "written", "finish")),
    ("left-already", ("bind", "small", "leave")), ("other-acked", ("bind", "small", "finish", "other-ack")),
    ("acked", ("bind", "full", "written", "finish", "ack")),
)
"""Each state the leaving reader 0 can be in when it leaves: unbound or bound, with no buffer, an open buffer, DATA
queued, in flight (its socket write not completed, no CREDIT after it yet) or written and credited, the producer
blocked on a record of its own or of the other reader, after finish (its TERMINATION_CONTROL sent or queued, the
ack awaited), after it already left, after the other reader acknowledged termination, and after its own ack (where
only its connection may close: a close then is no leave)."""


def _leave_walk(peers: int, gone: int, prefix: Sequence[str], how: str) -> Walk:
    """A writer of ``peers`` readers (the other reader, when there are two, bound first) whose reader ``gone`` is
    brought into the state ``prefix`` names and then leaves ``how`` (the input ``readerLeft``; with
    ``readersMayLeave``, its connection closing or a write to it failing), followed by what shows what the leave
    dropped and returned: input for the gone reader (a record, its pending writes failing and completing, a CREDIT,
    its connection closing), records for the last reader until the producer blocks, every pending write completing,
    a tick at the bind timeout and the periodic flush, finish, the other's ack. Each input is one the spec accepts
    (one it refuses as a caller's bug, such as a write while the producer is blocked, is left out); no steps when
    the reader cannot leave that way from that state."""
    header: dict[str, Any] = {"role": "writer", "peers": peers, "settings": dict(LEAVE_SETTINGS), "deadlines": True}
    if how != "readerLeft":
        header["readersMayLeave"] = True
    other = 1 - gone
    d = _Draw(random.Random(0), header)

    def writer() -> WriterMachine:
        machine = d.machine
        assert isinstance(machine, WriterMachine)
        return machine

    def pending(reader: int) -> list[int]:
        return sorted(seq for r, seq in writer()._in_flight if r == reader)

    def step(inputs: dict[str, Any]) -> bool:
        return d.attempt({**inputs, "t": d.t + 1 if d.steps else 0})

    def credit(reader: int) -> None:
        step(_received(reader, CreditMessage(writer_id=0, reader_id=reader)))

    def ack(reader: int) -> None:
        step(_received(reader, TerminationAckMessage(seq=writer().channels[reader].last_seq, writer_id=0,
                                                     reader_id=reader)))

    def failed(reader: int, seq: int) -> bool:
        return step({"input": "sendFailed", "peer": reader, "seq": str(seq), "cause": CAUSES[0]})

    def leave() -> bool:
        if how == "readerLeft":
            return step({"input": "readerLeft", "peer": gone})
        if how == "closed":
            return writer().channels[gone].bound and step({"input": "closed", "peer": gone})
        return bool(pending(gone)) and failed(gone, pending(gone)[0])

    if peers > 1:
        step({"input": "accepted", "peer": other})
        credit(other)
    step({"input": "accepted", "peer": gone})
    for action in prefix:
        if action in ("bind", "credit"):
            credit(gone)
        elif action in ("small", "full", "other-full"):
            step({"input": "write", "peer": other if action == "other-full" else gone,
                  "record": _FULL if "full" in action else _SMALL})
        elif action == "written":
            for seq in pending(gone):
                step({"input": "sendCompleted", "peer": gone, "seq": str(seq)})
        elif action == "finish":
            step({"input": "finish"})
        elif action in ("ack", "other-ack"):
            ack(other if action == "other-ack" else gone)
        else:
            leave()
    gone_pending = pending(gone)
    if not leave():
        return {**header, "steps": []}
    step({"input": "write", "peer": gone, "record": _SMALL})
    for index, seq in enumerate(gone_pending):  # the first fails (again, when its failure was the leave)
        if index == 0:
            failed(gone, seq)
        else:
            step({"input": "sendCompleted", "peer": gone, "seq": str(seq)})
    credit(gone)
    step({"input": "closed", "peer": gone})
    last = max(range(peers), key=lambda reader: (reader != gone, reader))
    for _ in range(2 * peers + 1):
        step({"input": "write", "peer": last, "record": _FULL})
    for reader, seq in sorted(writer()._in_flight):
        step({"input": "sendCompleted", "peer": reader, "seq": str(seq)})
    d.attempt({"input": "tick", "t": 1000})
    step({"input": "finish"})
    if peers > 1:
        ack(other)
    return {**header, "steps": d.steps}


def _leave_walks() -> list[Walk]:
    """Reader 0 of a writer of one reader, and each reader of a writer of two (the lower and the higher id), leaving
    from every state of :data:`_LEAVE_PREFIXES`, each way it can leave (the input ``readerLeft``; with
    ``readersMayLeave``, its connection closing or a write to it failing, where it is bound or has a write pending):
    the rules of a leave (docs/spec/shuffle.md, the LEAVE rows) judged state by state."""
    walks = [_leave_walk(peers, gone, prefix, how) for peers, gone in ((1, 0), (2, 0), (2, 1))
             for _, prefix in _LEAVE_PREFIXES for how in ("readerLeft", "closed", "sendFailed")
             if peers == 2 or not any(action.startswith("other") for action in prefix)]
    return [walk for walk in walks if walk["steps"]] + _left_late_walks()


def _left_late_walks() -> list[Walk]:
    """A writer of two readers, both bound, whose reader 0 left (``readerLeft``) while OPEN and while TERMINATING,
    given every message kind on its connection as :func:`_writer_late_walks` gives them: what a LEFT channel keeps
    (a CREDIT) and what fails the writer (an ack, at its last seq or not, DATA, TERMINATION_CONTROL)."""
    opened = [{"input": "accepted", "peer": 1}, _received(1, CreditMessage(writer_id=0, reader_id=1)),
              {"input": "accepted", "peer": 0}, _received(0, CreditMessage(writer_id=0, reader_id=0))]
    left = {"input": "readerLeft", "peer": 0}

    def every_kind(last: int) -> tuple[Message, ...]:
        return (CreditMessage(writer_id=0, reader_id=0), CreditMessage(writer_id=1, reader_id=0),
                *(TerminationAckMessage(seq=seq, writer_id=0, reader_id=0) for seq in (last - 1, last, last + 1)),
                DataMessage(seq=last + 1, writer_id=0, reader_id=0, checksum=0, payload=b""),
                TerminationControlMessage(seq=last + 1, writer_id=0, reader_id=0))

    return [_walk("writer", 2, dict(LEAVE_SETTINGS), *before, left, _received(0, message))
            for before, last in ((opened, -1), ([*opened, {"input": "finish"}], 0)) for message in every_kind(last)]


INEXACT_MS: Final = (1001, 2002, 1003)
"""Connect timeouts whose seconds (ms / 1000, as the reader machine holds them) times 1000 fall a hair short of
the whole number of ms in binary floating point (1001 / 1000 * 1000 = 1000.9999999999999): where the reader turns
its timeout back into ms, truncating instead of rounding is one millisecond off."""


def _inexact_timeout_walks() -> list[Walk]:
    """A reader whose connect to its writer fails at 0 and 5 ms, then ticks one ms before the connect timeout
    (:data:`INEXACT_MS`) and at it: the deadline each step announces and the timeout's ``timeoutMs`` in the error
    show the ms the timeout is turned back into; the last walk's writer has directory id 7 (so the error's writer,
    reader and shuffle ids all differ from one another but the last two)."""
    walks: list[Walk] = []
    for ms, writer in zip(INEXACT_MS, (0, 0, 7)):
        failed = {"input": "connectFailed", "peer": writer, "cause": "refused"}
        walks.append({"role": "reader", "peers": 1, "settings": {}, "deadlines": True, "connectTimeoutMs": ms,
                      **({"writerIds": [writer]} if writer else {}),
                      "steps": [{**failed, "t": 0}, {**failed, "t": 5}, {"input": "tick", "t": ms - 1},
                                {"input": "tick", "t": ms}]})
    return walks


def _left_elsewhere_walk() -> Walk:
    """A writer of two readers, both bound, whose reader 0 left, then a CREDIT naming reader 0 from another connection:
    the reader that left holds no connection any more (the CREDIT keeps it LEFT, and is no foreign connection)."""
    return _walk("writer", 2, dict(LEAVE_SETTINGS), {"input": "accepted", "peer": 1},
                 _received(1, CreditMessage(writer_id=0, reader_id=1)), {"input": "accepted", "peer": 0},
                 _received(0, CreditMessage(writer_id=0, reader_id=0)), {"input": "readerLeft", "peer": 0},
                 _received(9, CreditMessage(writer_id=0, reader_id=0)))


def derived_walks() -> list[Walk]:
    """The derived walks, candidates :data:`CANDIDATES` on (after the drawn ones), in a fixed order."""
    return (_payload_walks() + _reader_late_walks() + _writer_late_walks() + _connection_walks() + _leave_walks()
            + _inexact_timeout_walks() + [_left_elsewhere_walk()])


def candidate(number: int, seed: int = SEED) -> Walk:
    """Candidate walk ``number`` of ``seed``: each is drawn from its own generator, so one is rebuilt alone; from
    :data:`CANDIDATES` on, the derived walks (:func:`derived_walks`)."""
    if number >= CANDIDATES:
        return derived_walks()[number - CANDIDATES]
    return draw(random.Random(f"{seed}:{number}"))


def candidates(count: int = CANDIDATES, seed: int = SEED) -> list[Walk]:
    """The first ``count`` candidate walks of ``seed``, in order."""
    return [candidate(number, seed) for number in range(count)]


# -- the corpus --------------------------------------------------------------------------------------------

HEADER: Final = [
    "Walks of a writer or a reader under test, in the trace contract of traces.json (t in ms; peers, settings,",
    "writerIds, directoryId, ackTimeoutMs, connectTimeoutMs as there), with deadlines: each step's answer adds",
    "'deadline', the instant in ms the side next needs a tick (null: none). Walks are drawn from the seed and",
    "kept only when they tell the spec apart from one of its first-order operator mutants; 'walk' is the",
    "candidate's number, 'comment' the mutant it was kept for as 'function: operator' (docs/walks/shuffle.md).",
    f"Candidates from {CANDIDATES} on are derived, not drawn: every malformed payload as a reader's first DATA, every",
    "message kind at a channel in each state, every connection naming every reader, a reader leaving from every",
    "state (readerLeft; with readersMayLeave, a close or a failed write before its ack: capability reader-left),",
    "connect timeouts whose seconds are inexact in binary (1001 ms) at their instant.",
]


SHOULD_FAILURES: Final = {
    ("writer", "READER_ALREADY_BOUND"), ("reader", "READER_ALREADY_BOUND"), ("writer", "MISMATCHED_CHANNEL_IDS"),
    ("reader", "MISMATCHED_CHANNEL_IDS"), ("writer", "CONNECTION_CLOSED_BEFORE_TERMINATION"),
    ("writer", "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE:TERMINATION_ACK_MESSAGE"),
    ("reader", "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE:DATA_MESSAGE_UNSAFE_ROW"),
}
"""Failures where the reference is stricter than Spark 4.3.0 (traces.json's SHOULD traces): a walk ending in
one is judged as a SHOULD, as are walks using an option Spark lacks (ackTimeoutMs, connectTimeoutMs, a reader leaving)."""


def leaves(walk: Json) -> bool:
    """Whether a walk makes a reader leave (capability ``reader-left``): the input ``readerLeft`` or the header
    ``readersMayLeave``."""
    return "readersMayLeave" in walk or any(step["input"] == "readerLeft" for step in walk["steps"])


def level_of(walk: Json, answers: Sequence[Json]) -> str:
    if "ackTimeoutMs" in walk or "connectTimeoutMs" in walk or leaves(walk):
        return "SHOULD"
    for answer in answers:
        for event in answer["events"]:
            if event["event"] == "Failed":
                condition = event["error"]
                typed = f"{condition}:{event['errorParams'].get('messageType', '')}"
                if {(walk["role"], condition), (walk["role"], typed)} & SHOULD_FAILURES:
                    return "SHOULD"
    return "MUST"


def _test(tc_id: int, number: int, comment: str, walk: Walk) -> dict[str, Any]:
    answers = run_walk(walk)
    failed = any(e["event"] == "Failed" for a in answers for e in a["events"])
    return {"tcId": tc_id, "walk": number, "comment": comment, "level": level_of(walk, answers),
            "result": "invalid" if failed else "valid",
            **header_of(walk), "steps": [{**step, **answer} for step, answer in zip(walk["steps"], answers)]}


def build(kept: Sequence[tuple[int, str]]) -> dict[str, Any]:
    """The vector file for the kept ``(candidate number, comment)`` pairs, answers from the spec now."""
    tests = [_test(i, n, comment, candidate(n)) for i, (n, comment) in enumerate(kept, 1)]
    return vectorgen.corpus_document("streaming-shuffle-walks", SCHEMA_NAME, GENERATOR_VERSION, SEED, CANDIDATES,
                                     HEADER, tests)


def recorded() -> list[tuple[int, str]]:
    """The kept walks the committed file records."""
    return vectorgen.recorded_kept(WALK_FILE, "walk")


def render() -> str:
    return vectorgen.render(build(recorded()))


# -- the selection -----------------------------------------------------------------------------------------

SELECTION_FILE: Final = ROOT / "docs" / "walks" / "shuffle-selection.json"
"""The selection's raw outcome (every mutant: the walk that told it apart, or survived, or broke), from which the
report is written again after a judgement changes (``--report``) without running the selection."""

_ROW: Final = re.compile(r"^(\s*)\((\w+)\.(\w+), (\w+)\.(\w+)\): (\w+)\.(\w+),$")
_ERROR_ROW: Final = re.compile(r"^(\s*)\((\w+)\.(\w+), (\w+)\.(\w+)\): errors\.(\w+),$")


def table_mutants(module: str = "spec.shuffle.transitions") -> list[OperatorMutant]:
    """The channel tables are data, where the operator mutants find no site: each listed transition dropped (the
    pair becomes a rejection), sent to FAILED, or kept in its state; each listed failure naming another error."""
    out: list[OperatorMutant] = []
    lines = module_path(module).read_text().splitlines()
    errors_named = sorted({m.group(6) for line in lines if (m := _ERROR_ROW.match(line))})
    for number, line in enumerate(lines, 1):
        def mutant(operator: str, replacement: str) -> None:
            out.append(OperatorMutant(module, "table", operator, number, number, 0, len(line), replacement))

        row, failure = _ROW.match(line), _ERROR_ROW.match(line)
        if row and row.group(6) != "errors":
            indent, state_type, state, _, event, target_type, target = row.groups()
            pair = f"({state}, {event})"
            mutant(f"row {pair} -> {target}: dropped", "")
            if target != "FAILED":
                mutant(f"row {pair} -> {target}: -> FAILED", line.replace(f"{target_type}.{target},", f"{target_type}.FAILED,"))
            if target != state:
                mutant(f"row {pair} -> {target}: -> {state}", line.replace(f"{target_type}.{target},", f"{target_type}.{state},"))
        elif failure:
            pair, named = f"({failure.group(3)}, {failure.group(5)})", failure.group(6)
            other = errors_named[(errors_named.index(named) + 1) % len(errors_named)]
            if other != named:
                mutant(f"row {pair}: errors.{named} -> errors.{other}", line.replace(f"errors.{named},", f"errors.{other},"))
    return out


def carried(earlier: Sequence[dict[str, Any]], count: int) -> list[tuple[Walk, None]]:
    """The walks of ``earlier`` corpora's tests still among the first ``count`` candidates and recorded as the spec
    runs them now (the walk's number regenerates the same walk, its steps answered alike)."""
    def unnumbered(test: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in test.items() if k not in ("tcId", "comment")}

    numbers = set(candidate_numbers(count))
    return [(candidate(t["walk"]), None) for t in earlier
            if t["walk"] in numbers and unnumbered(_test(0, t["walk"], "", candidate(t["walk"]))) == unnumbered(t)]


def candidate_numbers(count: int) -> list[int]:
    """The numbers of the candidates a selection over ``count`` draws tries: the first ``count`` drawn, then every
    derived walk."""
    return [*range(count), *range(CANDIDATES, CANDIDATES + len(derived_walks()))]


def select_corpus(count: int, earlier: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Run the selection over the first ``count`` candidates; its outcome as :data:`SELECTION_FILE` holds it.

    Every mutant family of :data:`MODULES` (:func:`conformance.operator_mutants.every_mutant`: the operators, ==/!=
    halves, order mutants, and the classes of bug no operator plants) is tried on the walks that run its lines;
    the table rows and the mutants outside function bodies (:func:`conformance.operator_mutants.at_import`) run only at import, so every walk is
    tried on them (the walks kept so far first); the walks the
    ``earlier`` corpora kept are kept from the start (:func:`carried`). The derived walks are candidates after the
    drawn ones."""
    numbers = candidate_numbers(count)
    walks = [candidate(number) for number in numbers]
    kept_before = carried(earlier, count)
    load = import_runner("conformance.shuffle.walks", "run_walk")

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    every = [m for module in MODULES for m in every_mutant(module)]
    imported = at_import(every)
    code = [m for m in every if m not in imported]
    rows = table_mutants() + imported
    first = select(walks, load, PREFIXES, code, progress=say, carried=kept_before)
    order = first.kept + [i for i in range(len(walks)) if i not in first.kept]
    second = select([walks[i] for i in order], load, PREFIXES, rows, progress=say,
                    traced=False, carried=kept_before)
    killed_by = {**{name: numbers[i] for name, i in first.killed_by.items()},
                 **{name: numbers[order[i]] for name, i in second.killed_by.items()}}
    kept = [numbers[i] for i in first.kept + [order[i] for i in second.kept if order[i] not in first.kept]]
    comment: dict[int, str] = {}
    for name, number in killed_by.items():
        comment.setdefault(number, rule_of(name))
    for test in earlier:  # a carried walk no longer the first to tell a mutant apart keeps its comment
        comment.setdefault(test["walk"], test["comment"])
    return {"seed": SEED, "candidates": count,
            "kept": [[number, comment.get(number, "kept by an earlier pass")] for number in kept],
            "mutants": [{"module": m.module, "name": m.name} for m in code + rows],
            "killedBy": killed_by, "survivors": first.survivors + second.survivors,
            "broken": first.broken + second.broken, "timedOut": first.timed_out + second.timed_out}


UNJUDGED_TRIES: Final = 200
"""How many walks ``--unjudged`` tries on a mutant: the kept ones, then drawn and derived ones, every one on every
mutant (untraced)."""


def select_unjudged_corpus(outcome: dict[str, Any]) -> dict[str, Any]:
    """``--unjudged``: the last selection's ``outcome`` with the mutants it does not judge (a new family, say) selected
    alone (:func:`conformance.operator_mutants.select_unjudged`), on the kept walks first, then on the candidates
    after them up to :data:`UNJUDGED_TRIES` walks in all; a walk kept for one of them is added after the kept ones."""
    mutants = [m for module in MODULES for m in every_mutant(module)] + table_mutants()
    kept = [number for number, _ in outcome["kept"]]
    numbers = kept + [n for n in candidate_numbers(int(outcome["candidates"])) if n not in kept][
        :max(0, UNJUDGED_TRIES - len(kept))]
    return vectorgen.unjudged_outcome(outcome, SELECTION_FILE, mutants, numbers, [candidate(n) for n in numbers],
                                      len(kept), import_runner("conformance.shuffle.walks", "run_walk"), PREFIXES,
                                      lambda name: judged(name) is None)


_BATCHED = "batched inputs (write_batch, received_all, sends_completed) are the runtime's; a trace sends one input a line"
_REFUSED_SETTINGS = ("settings Spark refuses end a run before a machine exists: no trace has them "
                     "(the settings/ cases judge them through workloads)")
_JSON_REFUSED = ("a message the contract's JSON form refuses (a field missing, mistyped or out of range, hex spelled "
                 "otherwise) is a broken trace, not an input; the codec CLI and the wire vectors judge them")
_CALLER_BUG = ("the spec raises UsageError here (a caller's bug: an input the contract never sends, such as write "
               "after finish or a message before connected); no walk holds one")
_NOT_RUN = "not run by a trace: the codec, framing and runtime raise or read it (the wire vectors and workload cases)"
_DONE = "the machine has failed: it ignores every later input, so what it keeps after failing is never observed"
_BUFFERS_WHILE_RUNNING = ("a channel holds a buffer only while the writer runs, in AWAITING_CREDIT or OPEN (where FLUSH "
                          "is listed and keeps the state): finish flushes every buffer and write is refused after it, "
                          "and the next periodic flush is read only while running")

_TEXT_ONLY = ("only words a refusal's or an error's text (its message), which answers leave out (the condition and "
              "errorParams only)")
_LOCAL = "a local abort (the task failed, a frame did not decode) is the runtime's input, not a trace's"
_NON_NEGATIVE = "floor and truncation agree on a quotient of non-negative operands"
_LEFT_FOR_GOOD = ("a channel that left never binds, opens a buffer or queues a message again (a write for it is "
                  "dropped, finish skips it, a CREDIT keeps it LEFT): what its queue and buffer hold is never read")
_HEX_REFUSAL = ("parse_hex's refusal (InvalidHex) reaches an answer only as the text of the InvalidMessageJson "
                "('payload') it becomes, which answers leave out")
_BASE_CONDITION = ("the condition of a base class no error raised through the contracts inherits: every raised "
                   "subclass names its own")

_NEVER_FOR_EVER: Final = ("no instant or timeout of a trace comes near clock.FOR_EVER (only a sync client's deadline of "
                          "for ever does, 1e300, which the sync suite's machine walks and client vectors run)")
"""Why the shuffle walks never reach the clock's float arithmetic past :data:`spec.clock.FOR_EVER`."""


JUDGED: Final[tuple[Judgement, ...]] = (
    # (module-tail.function, a part of the operator ("" = every one), class, why)
    ("jsonform._json_type", "", "equivalent", "the JSON type's name " + _TEXT_ONLY),
    *(("jsonform._int", f"'{word}' -> '{word.upper()}'", "equivalent", _TEXT_ONLY)
      for word in ("missing", "int32", "int64")),
    *((f"errors.{name}.waiting_for", "", "equivalent", "what the writer waited for " + _TEXT_ONLY)
      for name in ("TerminationAckTimeout", "WriterConnectionTimeout")),
    *((f"registry.Sender.{member}", "", "equivalent",
       "a sender is compared by identity (registry.sent_by, the observer): its value is never read")
      for member in ("READER", "WRITER")),
    ("errors.ShuffleError.condition", "", "equivalent",
     "only the abstract bases (CodecError, BehaviourError, ChannelError, WriterWaitTimeout) inherit it, and none is "
     "raised as such: every error raised names its own condition"),
    ("writer.WriterMachine._leave", "drop channel.queued.clear()", "equivalent", _LEFT_FOR_GOOD),
    ("writer.WriterChannel.drop_buffer", "", "equivalent", _LEFT_FOR_GOOD),
    ("writer.WriterMachine._left", "", "unreachable",
     "it differs only for a written or failed DATA that is not pending, or a reader id outside the writer's: " +
     _CALLER_BUG),
    ("writer.WriterMachine.send_failed", "remove check if (reader_id, seq) not in self._in_flight", "unreachable",
     _CALLER_BUG),
    ("writer.WriterMachine.send_failed", "drop operand channel.state in _ACK_AWAITED", "unreachable",
     "outside OPEN and TERMINATING a failed write is a caller's bug the spec raises on (no DATA of an unbound or "
     "acknowledged reader is being written), but in LEFT, where LEAVE and SEND_FAILED both keep LEFT"),
    ("reader.ReaderMachine.release", "forget release", "unreachable",
     "the released DATA stays listed as held: only a second release of the same seq reads it, " + _CALLER_BUG),
    ("jsonform.InvalidHex.condition", "", "equivalent", _HEX_REFUSAL),
    *(("jsonform.parse_hex", part, "equivalent", _HEX_REFUSAL + " (or names the first character that is not hex)")
      for part in ("swap arguments what / ", "'0123456789abcdefABCDEF' -> ")),
    ("settings.SettingsError.condition", "", "equivalent", _BASE_CONDITION),
    ("settings.Setting.parse", "swap elements 'true' / 'false'", "equivalent",
     "a test of membership in a tuple does not depend on the order of its elements"),
    ("settings.NETWORK_TIMEOUT_DEFAULT", "'120s' -> '120S'", "equivalent",
     "a time's unit is read lower-cased (settings._time_ms)"),
    ("writer.flush_threshold", "floor -> truncation", "equivalent", _NON_NEGATIVE + " (networkBufferSize is positive)"),
    ("settings._time_ms", "floor -> truncation", "equivalent", _NON_NEGATIVE + " (abs(number) and the unit's factors)"),
    ("clock.periods_past", "floor -> truncation", "equivalent", _NON_NEGATIVE + " (now >= start, the caller's rule)"),
    ("clock.ms_after", "round(ms * _PER_MS) -> int", "equivalent",
     "every caller's milliseconds are an int (networkBufferMaxWaitTimeMs, writerConnectionTimeout, the ack timeout, "
     "a whole number of periods), whose product with the units a millisecond is whole already"),
    *(("clock.after", part, "unreachable", _NEVER_FOR_EVER)
      for part in ("FOR_EVER", "max(abs(now), abs(seconds))", "now + seconds")),
    ("clock._units", "round(seconds * _PER_SECOND) -> int", "unreachable",
     "the walks' instants are whole milliseconds whose product with the clock's unit lands on or above the whole "
     "unit; the MUST case settings/derived-periodic-flush-at-inexact-instants derives those where it falls short (a "
     "buffer opened at 43 ms of 1 ms periods, at 410 ms of 10 ms) and tells it apart"),
    ("reader.per_writer_quota", "floor -> truncation", "equivalent",
     "a negative readerMaxMemory gives a quotient of at most 0 either way, raised to 1 by the max; otherwise they agree"),
    ("writer.WriterChannel.take_payload", "remove check if not gathered", "equivalent",
     "one buffer as a payload or gathered alone: the same bytes, the same CRC32C"),
    ("_machine.ChannelMachine._step", "remove check if not self._out and (not self._events)", "equivalent",
     "the shared quiet step and a new empty one with the same deadline answer alike"),
    *((f, "", "unreachable", _LOCAL) for f in ("writer.WriterMachine.decode_failed", "reader.ReaderMachine.decode_failed")),
    ("reader.ReaderMachine._receive", "", "unreachable",
     "a DATA as the decoder's view (a tuple) comes only from the runtime's codec; a trace's DATA is a message"),
    ("records.decode_records", "swap branches of isinstance(payload, Gathered)", "unreachable",
     "a trace's DATA payload is bytes (hex in JSON), taken alike by either branch; a gathered payload is the writer's "
     "own, which no reader decodes"),
    ("errors.WriterWaitTimeout.from_fault", "fault.shuffle_id / fault.writer_id", "unreachable",
     "the writer under test is partition 0 of shuffle 0: the two ids are equal in every fault a writer trace makes"),
    ("writer.WriterMachine._deadline", "append -> at the front", "equivalent",
     "the next deadline is the least of the candidates: the order they are listed in is moot"),
    ("writer.WriterMachine.__init__", "flush_when_idle", "unreachable",
     "the idle flush is a runtime option (producer_idle); the trace contract has no input for it"),
    ("writer.WriterMachine.producer_idle", "", "unreachable",
     "the idle flush is a runtime option (producer_idle); the trace contract has no input for it"),
    *((f, "", "unreachable", _BATCHED) for f in (
        "writer.WriterMachine.write_batch", "writer.WriterMachine.received_all", "writer.WriterMachine.sends_completed",
        "reader.ReaderMachine.received_all", "reader.ReaderMachine.sends_completed")),
    *((f, "", "unreachable", _LOCAL) for f in ("writer.WriterMachine.abort", "reader.ReaderMachine.abort")),
    *((f, "", "unreachable", _REFUSED_SETTINGS) for f in (
        "settings.Setting.validate", "settings.SettingsError.__init__", "settings._positive",
        "settings.ShuffleSettings.__post_init__")),
    ("settings.network_timeout_s", "", "unreachable", "spark.network.timeout is read by the runtime, not the machines"),
    ("settings.Setting.parse", "drop .lower() in str(raw).lower()", "unreachable",
     "a bool conf value: a trace's header gives its settings as text; only a Python caller's conf holds a bool"),
    ("settings.ShuffleSettings.to_dict", "", "unreachable", "writes settings out; a trace only reads them"),
    ("settings.SparkConfLike.getAll", "", "equivalent", "a Protocol's body is never run"),
    *((f, "", "unreachable", _JSON_REFUSED) for f in (
        "jsonform.parse_hex", "jsonform.from_json", "jsonform._data_from_json", "jsonform._message_type",
        "jsonform.InvalidMessageJson.__init__", "jsonform.InvalidHex.__init__")),
    ("jsonform._int", "default is None", "unreachable", _JSON_REFUSED),
    ("jsonform._int", "isinstance", "unreachable", _JSON_REFUSED),
    *((f, "", "unreachable", _CALLER_BUG) for f in (
        "writer.WriterMachine._channel_for_caller", "writer.WriterMachine._write_record", "writer.WriterMachine.finish",
        "reader.ReaderMachine.connect_failed", "reader.ReaderMachine.__init__", "reader.ReaderMachine._channel",
        "registry.kind_of")),
    *((f, part, "unreachable", _CALLER_BUG) for f, part in (
        ("reader.ReaderMachine.release", "remove check if size is None"),
        ("reader.ReaderMachine._admitted", "remove check if ch.state is _CONNECTING"),
        ("_machine.ChannelMachine._move", "remove check if issubclass(outcome.error, UsageError)"),
        ("writer.WriterMachine.__init__", "remove check if num_readers < 1"))),
    ("reader.ReaderMachine._admitted", "swap checks ch.state is _CONNECTING", "unreachable", _CALLER_BUG),
    *((f, "", "unreachable", _NOT_RUN) for f in (
        "checksum.verify_payload", "registry.int_bits", "registry._check", "registry.sent_by",
        "errors.DataSizeMismatch.__init__", "errors.FrameLengthOutOfRange.__init__", "errors.NegativeDataSize.__init__",
        "errors.TrailingBytes.__init__", "errors.UnsupportedTransportMessage.__init__", "errors.TaskAborted.__init__",
        "errors.UnexpectedMessageType.__init__", "messages.Gathered.__eq__", "writer.WriterChannel.buffered")),
    ("clock.elapsed", "", "unreachable",
     "no shuffle machine measures a time between two instants (its timers are instants: clock.ms_after, clock.after, "
     "clock.periods_past); the cluster detector's ages and the sync client's outage warning do, and the cluster "
     "input corpus tells its mutants apart (docs/walks/cluster-inputs.md)"),
    ("errors.IncorrectSequenceNumber.__init__", "", "equivalent",
     "the attributes are kept for the runtime; the error's JSON (what an answer shows) is built from its parameters"),
    ("errors.WriterUnreachable.__init__", "", "equivalent",
     "the attribute is kept for the runtime; the error's JSON is built from its parameters"),
    ("errors.ConnectionClosedBeforeTermination.__init__", "", "equivalent",
     "the role only picks Spark's wording of the message text, which answers leave out (errorParams only)"),
    ("writer.WriterMachine.write", "", "equivalent",
     "the fast path of write only skips to _append where _write_opening would append the same record (an open "
     "buffer, running, unblocked, a valid id): the same step"),
    ("writer.WriterMachine._append", "", "equivalent",
     "a record of 4 KiB or more sent from its own buffer or copied into the open one: the same payload bytes"),
    *((f"{side}._receive", "or kind_of", "equivalent",
       "every message class is in the registry's fast map, so kind_of gives the same event")
      for side in ("writer.WriterMachine", "reader.ReaderMachine")),
    *(("writer.WriterMachine._receive", part, "equivalent", "an unexpected message type fails the writer with the "
       "same error whether it is charged to a channel or not") for part in ("0 <= reader_id", "0 -> ")),
    ("_machine.ChannelMachine._fail", "", "equivalent", _DONE),
    ("_machine.ChannelMachine._move", "drop channel.state", "equivalent", _DONE),
    ("writer.WriterMachine._stop", "", "equivalent", _DONE),
    ("reader.per_writer_quota", "1 -> 2", "equivalent",
     "every DATA is charged at least its 32-byte header, so a quota of 1 or 2 pauses at every DATA and resumes only "
     "when nothing is held"),
    ("reader.ReaderMachine._admitted", "names_the_pair and ch.partition_id is None", "equivalent",
     "a CREDIT or ack at a reader fails it at once (UNEXPECTED), whatever partition id it would set"),
    ("writer.permit_capacity", "n <= capacity", "equivalent",
     "the capacity is at least 2 buffers per reader, so never below one buffer"),
    *(("writer.permit_capacity", part, "unreachable", _REFUSED_SETTINGS + "; a wider bound only admits such budgets")
      for part in ("2 ** 31 - 1: - -> +", "2 -> 3", "31 -> 32", "1 -> 0")),
    ("writer.WriterMachine.__init__", "1 -> 0", "unreachable", _CALLER_BUG + " (a writer of 0 readers)"),
    ("settings._time_ms", "or -> and", "unreachable", _REFUSED_SETTINGS + " (an unknown time unit)"),
    ("settings._time_ms", "-2 ** 63 <= number < 2 ** 63", "unreachable",
     _REFUSED_SETTINGS + " (the only time numbers at those bounds are refused anyway)"),
    ("settings._time_ms", "2 -> 3", "unreachable", _REFUSED_SETTINGS + " (a wider bound only admits such numbers)"),
    ("settings._time_ms", "63 -> 64", "unreachable", _REFUSED_SETTINGS + " (a wider bound only admits such numbers)"),
    ("settings._time_ms", "* -> //", "equivalent", "the sign is 1 or -1: x * 1 == x // 1 and x * -1 == x // -1"),
    ("settings._time_ms", "number < 0", "equivalent", "0 and -0 ms are the same value"),
    ("settings._time_ms", "0 -> 1", "equivalent", "number < 1 differs from number < 0 only at 0, and -0 ms is 0 ms"),
    ("settings._time_ms", "1 -> 2", "equivalent",
     "a time capped at 2^63-2 instead of 2^63-1 ms: no walk reaches it, and a deadline (seconds, a float) cannot "
     "show one millisecond at 2^63"),
    ("jsonform._int", "bounds == INT32", "equivalent", "the width only names the bound in the refusal's text"),
    ("transitions.table", "-> FAILED: -> ", "equivalent",
     "a listed failure keeps its error: the machine fails with it whatever state the channel is left in"),
    ("reader.ReaderMachine._ack_written", "seq != ch.last_seq", "unreachable", _CALLER_BUG),
    ("reader.ReaderMachine.send_failed", "seq != ch.last_seq", "unreachable", _CALLER_BUG),
    ("writer.WriterMachine.__init__", "timeout == -1", "unreachable", _REFUSED_SETTINGS + " (a timeout below -1)"),
    ("settings.Setting.parse", "text.lower() == 'true'", "equivalent",
     "the text is 'true' or 'false' here (anything else is refused first), and 'false' < 'true'"),
    ("errors.Fault.peer_id", "self.peer_role == 'reader'", "equivalent",
     "the role is 'reader' or 'writer', and 'writer' > 'reader'"),
    ("writer.permit_capacity", "1 -> 2", "equivalent",
     "no budget is exactly 2^31-1 (2 R N is even, writerMaxMemory - R x 33280 is less), so a bound of 2^31-2 refuses "
     "the same ones"),
    *(("settings._time_ms", part, "unreachable", _REFUSED_SETTINGS + " (a time that is not a number and a unit, or a "
       "unit Spark lacks: refused, or raised on, a walk has neither)") for part in (
        "drop operand match is None", "drop operand (match.group(2) or 'ms') not in TIME_UNITS",
        "match.group(2) or 'ms': drop operand match.group(2)")),
    *(("writer.WriterMachine." + function, part, "equivalent", _BUFFERS_WHILE_RUNNING) for function, part in (
        ("tick", "drop operand self.state is WriterState.RUNNING"),
        ("_deadline", "drop operand self.state is WriterState.RUNNING"),
        ("_flush", "drop operand not self._move(channel, _FLUSH)"))),
    ("writer.WriterMachine._resume_held", "drop operand channel.buffer is not None", "equivalent",
     "a record is held only when its channel has no buffer and none could be opened; every buffer is then flushed, "
     "and while it is held the producer is blocked (write and finish refused), so its channel still has none"),
    ("registry.MessageKind.field_names", "!= -> <", "equivalent",
     "the common header's fields are type_id and seq, and 'seq' < 'type_id'"),
    ("settings._time_ms", "63 -> 62", "unreachable",
     _REFUSED_SETTINGS + " (the surviving one is the lower bound: only negative times other than -1 lie below "
     "-2^62, refused anyway; walks with 2^63-1 ms tell the upper one apart)"),
)
"""The survivors judged by hand: equivalent (no input can tell them apart; why), or unreachable through the trace
contract (which input it lacks). A survivor matched by no entry is a gap the generator should close."""


def judged(name: str) -> tuple[str, str] | None:
    """(class, why) of a surviving mutant, or None when it is a gap."""
    return judged_by(name, JUDGED)


def report(outcome: Mapping[str, Any]) -> str:
    """docs/walks/shuffle.md from a selection's outcome."""
    intro = ["# Walk corpus: shuffle", "",
             "Generated by `python -m conformance.shuffle.walks --select` (do not edit): "
             f"{outcome['candidates']} candidate walks from seed {outcome['seed']}, {len(outcome['kept'])} kept in "
             "`conformance/shuffle/vectors/walks.json`, and the derived walks (candidates from "
             f"{CANDIDATES} on); a mutant is tried on every walk running its lines (the kept ones first): the rarest "
             "shapes (a malformed payload, a setting at the edge of its domain) are the ones a mutant needs.",
             "How the corpus is derived and how the survivors are judged: docs/conformance.md, "
             "\"Walk corpus: shuffle\"; the judgements are `conformance.shuffle.walks.JUDGED`.", ""]
    inputs = json.loads((ROOT / "docs" / "walks" / "shuffle-inputs-selection.json").read_text())
    return render_report(outcome, intro, JUDGED, "the trace contract",
                         ("the input corpus (docs/walks/shuffle-inputs.md), which the suite's `*-input-corpus` "
                          "cases replay", frozenset(inputs["killedBy"])))


def _differs(run: Any, test: Json) -> bool:
    """Whether ``run`` answers the recorded walk ``test`` otherwise than recorded (or crashes, or never answers)."""
    try:
        with time_limit(5.0):
            answers = run(test)
    except (Exception, WalkTimeout):  # noqa: BLE001 - a crash is an answer the spec never gives
        return True
    observed = ("sends", "events", "deadline")
    return any({k: a.get(k) for k in observed} != {k: s[k] for k in observed} for a, s in zip(answers, test["steps"]))


def catalogue_caught(names: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The sensitivity catalogue's bugs in the spec (``conformance/shuffle/bugs.py``; only ``names`` when given) the
    recorded walks tell apart on their own, in process, and those they miss (bugs outside what a trace runs among
    them)."""
    from conformance.shuffle.bugs import BUGS  # the catalogue imports spec.auth: only this report needs it

    recorded_tests = json.loads(WALK_FILE.read_text())["tests"]
    caught: list[str] = []
    missed: list[str] = []
    for bug in [b for b in BUGS if not names or b.name in names]:
        module = bug.file.removesuffix(".py").replace("/", ".")
        text = (ROOT / bug.file).read_text()
        lines = text.splitlines(keepends=True)
        whole = OperatorMutant(module, "", bug.name, 1, len(lines), 0, len(lines[-1]), text.replace(bug.search,
                                                                                                      bug.replace, 1))
        with fresh_modules(PREFIXES, whole):
            try:
                run = import_runner("conformance.shuffle.walks", "run_walk")()
            except Exception:  # noqa: BLE001 - a bug that breaks the import is told apart by any walk
                caught.append(bug.name)
                continue
            told = any(_differs(run, test) for test in recorded_tests)
        (caught if told else missed).append(bug.name)
    return caught, missed


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--catalogue" in args:
        caught, missed = catalogue_caught()
        print(f"the walks alone tell apart {len(caught)} of {len(caught) + len(missed)} catalogue bugs; missed: "
              + ", ".join(missed))
        return 0
    return vectorgen.corpus_main("conformance.shuffle.walks", __doc__, (WALK_FILE, SELECTION_FILE, REPORT_FILE),
                                 CANDIDATES, select_corpus, build, report, render, args, select_unjudged_corpus)


if __name__ == "__main__":
    sys.exit(main())
