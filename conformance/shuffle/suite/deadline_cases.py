"""Every timer of the shuffle machines at its exact instant, through the ``exec:`` trace contract.

Over TCP a timer can only be judged to within the scheduler's slack, so a deadline that fires a
millisecond late passes every live case. A program that declares ``traces`` is driven the way the
trace vectors drive it (docs/conformance.md, trace contract): time is the ``t`` of each input, in
milliseconds. For each timer of :data:`DEADLINES` (one per setting that bounds a wait, from
docs/spec/shuffle.md) the machine is brought to where the timer runs, all at ``t`` = 0, then fed the
input that may fire it one millisecond before the instant (nothing may happen) and at it (it must).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Final, Mapping

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.targets import ExecTarget, ShuffleTarget
from conformance.shuffle.vector_exec import TraceDriverError, exec_answers
from spec.shuffle.errors import TerminationAckTimeout, WriterConnectionTimeout, WriterUnreachable
from spec.shuffle.jsonform import to_json
from spec.shuffle.messages import CreditMessage
from spec.shuffle.settings import ShuffleSettings

CONNECT_TIMEOUT: Final = "connect-timeout"
"""Capability: the program takes the trace header ``connectTimeoutMs`` and the reader input ``connectFailed``."""

WAIT_MS: Final = 50
TIMEOUT_MS: Final = 1000
ACK_TIMEOUT_MS: Final = 400
Json = Mapping[str, Any]
Answer = dict[str, Any]

_SETTINGS: Final = ShuffleSettings(network_buffer_size=1 << 20, network_buffer_max_wait_time_ms=WAIT_MS,
                                   writer_connection_timeout_ms=TIMEOUT_MS).to_dict()
_BOUND: Final[tuple[Json, ...]] = (
    {"input": "accepted", "peer": 0, "t": 0},
    {"input": "received", "peer": 0, "t": 0, "message": to_json(CreditMessage(writer_id=0, reader_id=0, num_messages=1))},
)


def _failed(condition: str) -> Callable[[Answer], bool]:
    return lambda answer: any(e.get("event") == "Failed" and e.get("error") == condition for e in answer["events"])


def _sends_data(answer: Answer) -> bool:
    return any(s["message"]["type"].startswith("DATA") for s in answer["sends"])


def _anything(answer: Answer) -> bool:
    return bool(answer["sends"]) or any(e.get("event") == "Failed" for e in answer["events"])


@dataclass(frozen=True, slots=True)
class Deadline:
    """A timer: the trace header, the inputs at ``t`` = 0 that start it, the input that may fire it at
    ``t``, its instant, and what firing is."""

    what: str
    header: Json
    lead: tuple[Json, ...]
    probe: Callable[[int], Json]
    instant_ms: int
    fired: Callable[[Answer], bool]
    fired_text: str


def _tick(t: int) -> Json:
    return {"input": "tick", "t": t}


DEADLINES: Final[Mapping[str, Deadline]] = {
    "writer-connection-timeout": Deadline(
        f"writerConnectionTimeout {TIMEOUT_MS} ms, no reader bound", {"role": "writer", "peers": 1, "settings": _SETTINGS},
        (), _tick, TIMEOUT_MS, _failed(WriterConnectionTimeout.condition), WriterConnectionTimeout.condition),
    "writer-ack-timeout": Deadline(
        f"termination-ack timeout {ACK_TIMEOUT_MS} ms after finish",
        {"role": "writer", "peers": 1, "settings": _SETTINGS, "ackTimeoutMs": ACK_TIMEOUT_MS},
        _BOUND + ({"input": "finish", "t": 0},), _tick, ACK_TIMEOUT_MS,
        _failed(TerminationAckTimeout.condition), TerminationAckTimeout.condition),
    "writer-max-wait-on-write": Deadline(
        f"networkBufferMaxWaitTimeMs {WAIT_MS}: a record appended to a buffer that old",
        {"role": "writer", "peers": 1, "settings": _SETTINGS},
        _BOUND + ({"input": "write", "peer": 0, "t": 0, "record": "aa"},),
        lambda t: {"input": "write", "peer": 0, "t": t, "record": "bb"}, WAIT_MS, _sends_data, "a DATA"),
    "writer-periodic-flush": Deadline(
        f"networkBufferMaxWaitTimeMs {WAIT_MS}: the periodic flush",
        {"role": "writer", "peers": 1, "settings": _SETTINGS},
        _BOUND + ({"input": "write", "peer": 0, "t": 0, "record": "aa"},), _tick, WAIT_MS, _sends_data, "a DATA"),
    "reader-connect-timeout": Deadline(
        f"the reader's connect timeout {TIMEOUT_MS} ms after the first failed attempt",
        {"role": "reader", "peers": 1, "settings": _SETTINGS, "connectTimeoutMs": TIMEOUT_MS},
        ({"input": "connectFailed", "peer": 0, "t": 0, "cause": "refused"},), _tick, TIMEOUT_MS,
        _failed(WriterUnreachable.condition), WriterUnreachable.condition),
}


def at_its_instant(name: str) -> Callable[[ShuffleTarget, CaseContext], Verdict]:
    """The case of timer ``name``: nothing one millisecond before its instant, the firing at it."""
    deadline = DEADLINES[name]

    def check(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
        assert isinstance(t, ExecTarget)  # only a program can declare ``traces``
        steps = list(deadline.lead) + [deadline.probe(deadline.instant_ms - 1), deadline.probe(deadline.instant_ms)]
        expected = (f"{deadline.what}: nothing at t={deadline.instant_ms - 1} ms, {deadline.fired_text} at "
                    f"t={deadline.instant_ms} ms")
        try:
            answers = exec_answers(t.command, {**deadline.header}, steps)
        except TraceDriverError as exc:
            return Verdict(False, expected, f"the trace driver: {exc}")
        before, at = answers[-2], answers[-1]
        problems = []
        if _anything(before):
            problems.append(f"one millisecond early: {before}")
        if not deadline.fired(at):
            problems.append(f"at the instant: {at}")
        return Verdict(not problems, expected, "; ".join(problems) or "as expected")

    return check
