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

import argparse
import copy
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Final, Mapping, Sequence

from conformance import vectorgen
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
CANDIDATES: Final = 2400
MAX_STEPS: Final = 14

MODULES: Final = (
    "spec.shuffle.writer", "spec.shuffle.reader", "spec.shuffle._machine", "spec.shuffle.registry",
    "spec.shuffle.settings", "spec.shuffle.records", "spec.shuffle.clock", "spec.shuffle.checksum",
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


def _spelled(rng: random.Random, settings: ShuffleSettings) -> dict[str, str]:
    """The settings as Spark keys, some left out (Spark's default) or spelled another way Spark reads."""
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
    return raw


def _writer_header(rng: random.Random) -> dict[str, Any]:
    peers = rng.choice((1, 1, 2, 2, 3))
    n = rng.choice((16, 20, 21, 100, 1001, 1024, 10000))
    memory = rng.choice((1, peers * SOCKETS + 2 * peers * n, peers * SOCKETS + 2 * peers * n + 1,
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
    weights = {"accepted": 6 if unaccepted else int(fault), "credit": 6 if unbound else int(fault),
               "write": 8 if running else int(fault), "finish": 2 if running else int(fault),
               "done": 5 if m._in_flight else 0, "closed": 2 * fault, "tick": 3, "ack": 8 if awaiting else int(fault),
               "other": 2 * fault}
    kind = rng.choices(list(weights), list(weights.values()))[0]
    if kind == "accepted":
        chosen = rng.choice(unaccepted) if unaccepted and not fault else conn
        d.accepted.add(chosen)
        return {"input": "accepted", "peer": chosen, "t": t}
    if kind == "credit":
        if unbound and not fault:
            reader = conn = rng.choice(unbound)
        named = rng.choice([directory, directory, partition, directory + 1, 5]) if fault else directory
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
    if kind == "closed":
        return {"input": "closed", "peer": conn, "t": t}
    if kind == "tick":
        return {"input": "tick", "t": t}
    if kind == "ack":
        if awaiting and not fault:
            reader = conn = rng.choice(awaiting)
            ch = m.channels[reader]
        seq = ch.last_seq + (rng.choice((0, 1, -1)) if fault else 0)
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
    return max(0, d.rng.choice(sizes))


def _reader_step(d: _Draw) -> dict[str, Any]:
    m = d.machine
    assert isinstance(m, ReaderMachine)
    rng = d.rng
    fault = rng.random() < 0.12
    connecting = [w for w, c in m.channels.items() if c.state is ReaderChannelState.CONNECTING]
    open_ = [w for w, c in m.channels.items() if c.state is ReaderChannelState.OPEN]
    acking = [w for w, c in m.channels.items() if c.state is ReaderChannelState.TERMINATED]
    held = [w for w, c in m.channels.items() if c.unreleased]
    weights = {"connected": 6 if connecting else int(fault), "connectFailed": 2 if connecting else 0,
               "data": 10 if open_ else int(fault), "tc": 2 if open_ else int(fault),
               "ackDone": 6 if acking else int(fault), "release": 4 if held else 0, "closed": 2 * fault, "tick": 2,
               "other": 2 * fault}
    kind = rng.choices(list(weights), list(weights.values()))[0]
    pool = {"connected": connecting, "connectFailed": connecting, "data": open_, "tc": open_, "ackDone": acking,
            "release": held}.get(kind) or list(m.channels)
    peer = rng.choice(pool if not fault else list(m.channels))
    ch = m.channels[peer]
    t = d.later()
    partition = ch.partition_id if ch.partition_id is not None else (
        peer if "writerIds" not in d.header else rng.choice((0, 1, 3)))
    named = rng.choice((partition, partition + 1, peer if peer != partition else 6)) if fault else partition
    reader = rng.choice((0, 0, 1)) if fault else 0
    seq = ch.last_seq + (rng.choice((1, 0, 2, -ch.last_seq - 2)) if fault else 1)
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
    if fault and rng.random() < 0.4:
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
    header = _writer_header(rng) if rng.random() < 0.55 else _reader_header(rng)
    try:
        d = _Draw(rng, header)
    except (UsageError, ValueError):
        return draw(rng)  # settings whose permit budget Spark refuses: not a trace
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


def candidates(count: int = CANDIDATES, seed: int = SEED) -> list[Walk]:
    """The candidate walks of ``seed``, in order (walk ``i`` is the same for every count above ``i``)."""
    rng = random.Random(seed)
    return [draw(rng) for _ in range(count)]


# -- the corpus --------------------------------------------------------------------------------------------

HEADER: Final = [
    "Walks of a writer or a reader under test, in the trace contract of traces.json (t in ms; peers, settings,",
    "writerIds, directoryId, ackTimeoutMs, connectTimeoutMs as there), with deadlines: each step's answer adds",
    "'deadline', the instant in ms the side next needs a tick (null: none). Walks are drawn from the seed and",
    "kept only when they tell the spec apart from one of its first-order operator mutants; 'walk' is the",
    "candidate's number, 'comment' the mutant it was kept for as 'function: operator' (docs/walks/shuffle.md).",
]


SHOULD_FAILURES: Final = {
    ("writer", "READER_ALREADY_BOUND"), ("reader", "READER_ALREADY_BOUND"), ("writer", "MISMATCHED_CHANNEL_IDS"),
    ("reader", "MISMATCHED_CHANNEL_IDS"), ("writer", "CONNECTION_CLOSED_BEFORE_TERMINATION"),
    ("writer", "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE:TERMINATION_ACK_MESSAGE"),
    ("reader", "STREAMING_SHUFFLE_UNEXPECTED_MESSAGE_TYPE:DATA_MESSAGE_UNSAFE_ROW"),
}
"""Failures where the reference is stricter than Spark 4.3.0 (traces.json's SHOULD traces): a walk ending in
one is judged as a SHOULD, as are walks using an option Spark lacks (ackTimeoutMs, connectTimeoutMs)."""


def level_of(walk: Json, answers: Sequence[Json]) -> str:
    if "ackTimeoutMs" in walk or "connectTimeoutMs" in walk:
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
    walks = candidates(max((n for n, _ in kept), default=-1) + 1)
    tests = [_test(i, n, comment, walks[n]) for i, (n, comment) in enumerate(kept, 1)]
    return {"algorithm": "streaming-shuffle-walks", "schema": SCHEMA_NAME, "sparkVersion": "4.3.0",
            "generatorVersion": GENERATOR_VERSION, "seed": SEED, "candidates": CANDIDATES,
            "numberOfTests": len(tests), "header": HEADER, "tests": tests}


def recorded() -> list[tuple[int, str]]:
    """The kept walks the committed file records."""
    if not WALK_FILE.exists():
        return []
    return [(int(t["walk"]), str(t["comment"])) for t in json.loads(WALK_FILE.read_text())["tests"]]


def render() -> str:
    return vectorgen.render(build(recorded()))


# -- the selection -----------------------------------------------------------------------------------------

def _rule(name: str) -> str:
    """``module:function:line: operator`` -> ``module-tail.function: operator`` (no line number)."""
    module, function, _line, operator = name.split(":", 3)
    return f"{module.rsplit('.', 1)[-1]}.{function}: {operator.strip()}"


def select_corpus(count: int, progress: bool) -> tuple[list[tuple[int, str]], str]:
    """Run the selection; the kept walks with their comments, and the report's text."""
    from conformance.operator_mutants import import_runner, mutants_of, select

    walks = candidates(count)
    mutants = [m for module in MODULES for m in mutants_of(module)]
    selection = select(walks, import_runner("conformance.shuffle.walks", "run_walk"), PREFIXES, mutants,
                       progress=(lambda line: print(line, file=sys.stderr, flush=True)) if progress else (lambda _: None))
    first: dict[int, str] = {}
    for name, index in selection.killed_by.items():
        first.setdefault(index, _rule(name))
    kept = [(index, first[index]) for index in selection.kept]
    return kept, report(mutants, selection.killed_by, selection.survivors, selection.broken, len(kept), count)


def report(mutants: Sequence[Any], killed_by: Mapping[str, int], survivors: Sequence[str], broken: Sequence[str],
           kept: int, count: int) -> str:
    per: dict[str, Counter[str]] = {}
    for m in mutants:
        c = per.setdefault(m.module, Counter())
        c["mutants"] += 1
        c["told apart"] += m.name in killed_by
        c["broken"] += m.name in broken
        c["survivors"] += m.name in survivors
    lines = ["# Walk corpus: shuffle", "",
             "Generated by `python -m conformance.shuffle.walks --select` (do not edit): "
             f"{count} candidate walks from seed {SEED}, {kept} kept in `conformance/shuffle/vectors/walks.json`.",
             "How the corpus is derived and how the survivors are judged: docs/conformance.md, "
             "\"Walk corpus: shuffle\".", "",
             "| module | mutants | told apart | broken | survivors |", "|---|---:|---:|---:|---:|"]
    total: Counter[str] = Counter()
    for module, c in per.items():
        total.update(c)
        lines.append(f"| {module} | {c['mutants']} | {c['told apart']} | {c['broken']} | {c['survivors']} |")
    lines.append(f"| **all** | {total['mutants']} | {total['told apart']} | {total['broken']} | {total['survivors']} |")
    lines += ["", "## Survivors by function", ""]
    grouped: dict[str, list[str]] = {}
    for name in survivors:
        rule = _rule(name)
        function, operator = rule.split(": ", 1)
        grouped.setdefault(function, []).append(operator)
    for function in sorted(grouped, key=lambda f: (-len(grouped[f]), f)):
        lines.append(f"- `{function}` ({len(grouped[function])}):")
        lines += [f"  - `{op}`" for op in grouped[function]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--select" in args:
        parser = argparse.ArgumentParser(prog="python -m conformance.shuffle.walks --select")
        parser.add_argument("--select", action="store_true")
        parser.add_argument("--count", type=int, default=CANDIDATES)
        options = parser.parse_args(args)
        kept, text = select_corpus(options.count, progress=True)
        REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
        REPORT_FILE.write_text(text)
        WALK_FILE.write_text(vectorgen.render(build(kept)))
        print(f"wrote {WALK_FILE} ({len(kept)} walks) and {REPORT_FILE}")
        return 0
    return vectorgen.write_or_check("conformance.shuffle.walks", __doc__, WALK_FILE, render, args)


if __name__ == "__main__":
    sys.exit(main())
